//! Accounting exports (`GET /v1/exports/{kind}`, permission `exports:read`): each kind comes
//! back as CSV a spreadsheet reads, with exact amounts, the fiat value each credit recorded (the
//! rate a fiat-priced invoice locked, else the market rate of the moment), free text that cannot run as a formula, only the key's merchant
//! and environment, and the same rows however the pages fall.

use std::collections::HashMap;

use api::auth::Permission;
use chrono::{Duration, Utc};
use domain::exports::{ExportKind, csv_stream};
use entity::{Amount, Environment};
use futures::{StreamExt, TryStreamExt};
use rust_decimal::Decimal;
use serde_json::json;
use testkit::{TRON_DEST, TestApp, d};
use uuid::Uuid;

type Row = HashMap<String, String>;

/// `[from, to)` around today, as dates.
fn range() -> (String, String) {
    let today = Utc::now().date_naive();
    ((today - Duration::days(1)).to_string(), (today + Duration::days(2)).to_string())
}

fn parse(bytes: &[u8]) -> (Vec<String>, Vec<Row>) {
    let mut r = csv::Reader::from_reader(bytes);
    let header: Vec<String> = r.headers().expect("a header row").iter().map(str::to_owned).collect();
    let rows = r
        .records()
        .map(|rec| {
            let rec = rec.expect("a CSV record");
            header.iter().cloned().zip(rec.iter().map(str::to_owned)).collect()
        })
        .collect();
    (header, rows)
}

/// `GET /v1/exports/{kind}` of today's range, which must be a 200 CSV download: its raw text
/// and its rows.
async fn export(app: &TestApp, key: &str, kind: &str) -> (String, Vec<Row>) {
    let (from, to) = range();
    let r = app.get(&format!("/v1/exports/{kind}?from={from}&to={to}"), Some(key)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(r.headers["content-type"], "text/csv; charset=utf-8");
    assert_eq!(r.headers["content-disposition"], format!("attachment; filename=\"{kind}-{from}-{to}.csv\"").as_str());
    let text = r.body.as_str().unwrap_or_else(|| panic!("not CSV: {}", r.body)).to_owned();
    let (header, rows) = parse(text.as_bytes());
    assert_eq!(header, ExportKind::parse(kind).unwrap().columns());
    (text, rows)
}

fn by<'a>(rows: &'a [Row], col: &str, value: &str) -> &'a Row {
    rows.iter().find(|r| r[col] == value).unwrap_or_else(|| panic!("no row with {col} = {value}: {rows:?}"))
}

async fn exchange_rate(app: &TestApp, invoice: Uuid) -> Decimal {
    use sea_orm::EntityTrait;
    let inv = entity::invoice::Entity::find_by_id(invoice).one(&app.state.db).await.unwrap().unwrap();
    inv.exchange_rate.expect("a fiat-priced invoice locks its rate").0
}

#[tokio::test]
async fn each_kind_exports_exact_values_fiat_at_credit_and_guarded_text() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let fiat_body = json!({
        "currency": "BTC", "amount_fiat": "100", "fiat_currency": "USD",
        "description": "=HYPERLINK(\"http://evil\",\"x\")", "external_id": "-42", "metadata": {"order": "7"},
    });
    let fiat_inv = app.create_invoice_id(&key, fiat_body).await;
    let crypto_inv = app
        .create_invoice_id(&key, json!({"currency": "BTC", "amount": "0.01", "description": "plain, \"quoted\""}))
        .await;
    let fiat_pay = testkit::credit_invoice(&app, merchant, fiat_inv, "bitcoin", "0.0005").await;
    let crypto_pay = testkit::credit_invoice(&app, merchant, crypto_inv, "bitcoin", "0.01").await;
    let rate = exchange_rate(&app, fiat_inv).await;
    let fiat_value = Amount::fiat(d("0.0005") * rate).0.to_string();
    testkit::fund(&app.state.db, merchant, Environment::Test, "tron_usdt", "100").await;
    let payout = json!({"currency": "tron_usdt", "amount": "10", "destination": TRON_DEST, "description": "@SUM(1)"});
    let p = app.post("/v1/payouts", Some(&key), &payout).await;
    assert_eq!(p.status.as_u16(), 201, "{}", p.body);
    let payout_id = p.data()["id"].as_str().unwrap().to_owned();

    // Invoices: oldest first, free text guarded and quoted, the locked rate and what was asked.
    let (text, rows) = export(&app, &key, "invoices").await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], fiat_inv.to_string(), "oldest first");
    let f = by(&rows, "id", &fiat_inv.to_string());
    assert_eq!(f["description"], "'=HYPERLINK(\"http://evil\",\"x\")");
    assert!(text.contains("\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""), "RFC 4180 quoting: {text}");
    assert_eq!(f["external_id"], "'-42");
    assert_eq!(f["metadata"], r#"{"order":"7"}"#);
    assert_eq!((f["fiat_currency"].as_str(), d(&f["amount_fiat"])), ("USD", d("100")));
    assert_eq!(d(&f["exchange_rate"]), rate);
    assert_eq!((f["gate"].as_str(), f["status"].as_str()), ("bitcoin", "pending"));
    assert_eq!(f["fiat_value_paid"], Amount::fiat(d(&f["amount_paid"]) * rate).0.to_string());
    let c = by(&rows, "id", &crypto_inv.to_string());
    assert_eq!(c["description"], "plain, \"quoted\"");
    assert_eq!(d(&c["amount_requested"]), d("0.01"));
    assert_eq!((c["exchange_rate"].as_str(), c["fiat_value_paid"].as_str(), c["fiat_currency"].as_str()), ("", "", ""));
    chrono::DateTime::parse_from_rfc3339(&c["created_at"]).expect("RFC 3339");
    assert!(c["created_at"].ends_with('Z'), "UTC: {}", c["created_at"]);

    // Payments: the fiat value each credit recorded.
    let (_, rows) = export(&app, &key, "payments").await;
    assert_eq!(rows.len(), 2);
    let f = by(&rows, "id", &fiat_pay.to_string());
    assert_eq!(
        (f["invoice_id"].clone(), f["amount"].as_str(), f["gate"].as_str()),
        (fiat_inv.to_string(), "0.0005", "bitcoin")
    );
    assert_eq!(f["external_id"], "'-42");
    assert!(!f["credited_at"].is_empty() && f["status"] == "confirmed", "{f:?}");
    assert_eq!((f["fiat_currency"].as_str(), d(&f["fiat_rate"])), ("USD", rate));
    assert_eq!(f["fiat_value_at_credit"], fiat_value);
    let c = by(&rows, "id", &crypto_pay.to_string());
    assert_eq!((c["amount"].as_str(), c["credited_amount"].as_str()), ("0.01", "0.01"));
    // The crypto-priced one: the market rate published when it was credited, in the merchant's
    // base currency (60 000 USD per BTC in the test environment).
    assert_eq!(
        (c["fiat_currency"].as_str(), c["fiat_rate"].as_str(), c["fiat_value_at_credit"].as_str()),
        ("USD", "60000", "600.00")
    );

    // Ledger entries: every entry of the merchant's test books; the credit carries its fiat value.
    let (_, rows) = export(&app, &key, "ledger_entries").await;
    let entries = {
        use entity::ledger_entry::{Column, Entity};
        use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
        let q =
            Entity::find().filter(Column::MerchantId.eq(merchant)).filter(Column::Environment.eq(Environment::Test));
        q.count(&app.state.db).await.unwrap()
    };
    assert_eq!(rows.len() as u64, entries);
    let credit = by(&rows, "reference_id", &fiat_pay.to_string());
    assert_eq!((credit["entry_type"].as_str(), credit["bucket"].as_str()), ("invoice_credit", "available"));
    assert_eq!((credit["amount"].as_str(), credit["reference_type"].as_str()), ("0.0005", "payment"));
    assert_eq!(credit["fiat_value_at_credit"], fiat_value);
    let crypto_credit = by(&rows, "reference_id", &crypto_pay.to_string());
    assert_eq!((crypto_credit["amount"].as_str(), crypto_credit["fiat_value_at_credit"].as_str()), ("0.01", "600.00"));
    let fund = by(&rows, "description", "fund");
    assert_eq!(
        (fund["entry_type"].as_str(), fund["gate"].as_str(), fund["amount"].as_str()),
        ("adjustment", "tron_usdt", "100")
    );
    assert_eq!(fund["balance_after"], "100");
    assert!(rows.iter().any(|r| r["reference_id"] == payout_id), "the payout's reservation is in the books");

    // Payouts.
    let (_, rows) = export(&app, &key, "payouts").await;
    assert_eq!(rows.len(), 1);
    let p = &rows[0];
    assert_eq!((p["id"].as_str(), p["amount"].as_str(), p["gate"].as_str()), (payout_id.as_str(), "10", "tron_usdt"));
    assert_eq!((p["description"].as_str(), p["destination"].as_str()), ("'@SUM(1)", TRON_DEST));
    assert!(!p["status"].is_empty() && !p["merchant_debit_amount"].is_empty(), "{p:?}");
}

#[tokio::test]
async fn an_export_shows_only_the_keys_merchant_and_environment_and_needs_exports_read() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let (other, other_key) = app.test_key().await;
    let mine = app.create_invoice_id(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let theirs = app.create_invoice_id(&other_key, json!({"currency": "BTC", "amount": "0.02"})).await;
    testkit::adjust(&app.state.db, merchant, Environment::Test, "tron_usdt", "5", "test money").await;
    testkit::adjust(&app.state.db, merchant, Environment::Live, "tron_usdt", "7", "live money").await;
    testkit::adjust(&app.state.db, other, Environment::Test, "tron_usdt", "9", "their money").await;

    let (_, rows) = export(&app, &key, "invoices").await;
    assert_eq!(rows.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), [mine.to_string()]);
    let (_, rows) = export(&app, &other_key, "invoices").await;
    assert_eq!(rows.iter().map(|r| r["id"].clone()).collect::<Vec<_>>(), [theirs.to_string()]);
    let (_, rows) = export(&app, &key, "ledger_entries").await;
    assert_eq!(rows.iter().map(|r| r["description"].clone()).collect::<Vec<_>>(), ["test money"]);
    let live = app.key(merchant, Environment::Live, &[Permission::ExportsRead]).await;
    let (_, rows) = export(&app, &live, "ledger_entries").await;
    assert_eq!(
        rows.iter().map(|r| (r["description"].clone(), r["amount"].clone())).collect::<Vec<_>>(),
        [("live money".to_owned(), "7".to_owned())]
    );
    let (_, rows) = export(&app, &live, "invoices").await;
    assert!(rows.is_empty(), "no live invoices: {rows:?}");

    // exports:read alone is enough; every other permission is not.
    let (from, to) = range();
    let path = format!("/v1/exports/invoices?from={from}&to={to}");
    let others: Vec<Permission> = Permission::ALL.into_iter().filter(|p| *p != Permission::ExportsRead).collect();
    let without = app.key(merchant, Environment::Test, &others).await;
    app.get(&path, Some(&without)).await.assert_error(403, "forbidden", None);
    // The permission is checked before anything else the request says.
    app.get("/v1/exports/refunds?from=x", Some(&without)).await.assert_error(403, "forbidden", None);
    app.get(&path, None).await.assert_error(401, "unauthorized", None);
    let only = app.key(merchant, Environment::Test, &[Permission::ExportsRead]).await;
    let (_, rows) = export(&app, &only, "invoices").await;
    assert_eq!(rows.len(), 1);
}

#[tokio::test]
async fn bad_kinds_and_ranges_are_400_naming_the_field() {
    let (app, _, key) = TestApp::with_test_key().await;
    let k = Some(key.as_str());
    for (path, field) in [
        ("/v1/exports/refunds?from=2026-01-01&to=2026-02-01", "kind"),
        ("/v1/exports/Invoices?from=2026-01-01&to=2026-02-01", "kind"),
        ("/v1/exports/invoices?to=2026-02-01", "from"),
        ("/v1/exports/invoices?from=2026-01-01", "to"),
        ("/v1/exports/invoices?from=2026-01-01&to=", "to"),
        ("/v1/exports/payments?from=yesterday&to=2026-02-01", "from"),
        ("/v1/exports/payments?from=2026-01-01&to=2026-02-30", "to"),
        ("/v1/exports/payouts?from=2026-02-01&to=2026-02-01", "to"),
        ("/v1/exports/payouts?from=2026-02-01T00:00:01Z&to=2026-02-01", "to"),
        ("/v1/exports/ledger_entries?from=2025-01-01&to=2026-02-06", "to"),
    ] {
        app.get(path, k).await.assert_error(400, "validation_error", Some(field));
    }
    // Timestamps with offsets are taken (400 days to the millisecond is the limit).
    let r = app.get("/v1/exports/ledger_entries?from=2025-01-01T00:00:00%2B02:00&to=2026-02-04T22:00:00Z", k).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(
        r.headers["content-disposition"],
        "attachment; filename=\"ledger_entries-20241231T220000Z-20260204T220000Z.csv\""
    );
    let empty = r.body.as_str().unwrap();
    assert_eq!(parse(empty.as_bytes()).1.len(), 0, "a header row and nothing else: {empty}");
}

/// The domain stream with pages of 1, 2 and 3 rows gives exactly the API's answer (pages of
/// 500), ties of `created_at` included: no row skipped or repeated at a page boundary.
#[tokio::test]
async fn pages_of_any_size_give_the_same_rows_across_their_boundaries() {
    use sea_orm::{ActiveModelTrait, IntoActiveModel};
    let (app, merchant, key) = TestApp::with_test_key().await;
    // Five invoices created at the very same instant (the id breaks the tie), and two more.
    let at = Utc::now() - Duration::hours(1);
    for _ in 0..5 {
        let inv = entity::invoice::Model::blank(Uuid::now_v7(), merchant, Environment::Test, at);
        inv.into_active_model().insert(&app.state.db).await.expect("invoice");
    }
    for amount in ["0.01", "0.02"] {
        app.create_invoice_id(&key, json!({"currency": "BTC", "amount": amount})).await;
    }
    let (api_text, api_rows) = export(&app, &key, "invoices").await;
    assert_eq!(api_rows.len(), 7);
    let (from, to) = range();
    let (from, to) = domain::exports::parse_range(Some(&from), Some(&to)).unwrap();
    for (page, chunks) in [(1, 1 + 7), (2, 1 + 4), (3, 1 + 3), (7, 1 + 1), (500, 1 + 1)] {
        let stream =
            csv_stream(app.state.db.clone(), merchant.into(), Environment::Test, ExportKind::Invoices, from, to, page);
        // At most a few chunks more than expected: a cursor that repeats a row fails, not hangs.
        let got: Vec<Vec<u8>> = stream.take(chunks + 3).try_collect().await.expect("the export");
        // The header, then one chunk per page; a full last page costs one empty read, no chunk.
        assert_eq!(got.len(), chunks, "page size {page}");
        assert_eq!(String::from_utf8(got.concat()).unwrap(), api_text, "page size {page}");
    }
    let ids: std::collections::HashSet<&String> = api_rows.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids.len(), 7, "no row twice");
    let keys: Vec<(String, String)> = api_rows.iter().map(|r| (r["created_at"].clone(), r["id"].clone())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "oldest first, then by id");
}

/// The load check (not run by default: `cargo test -p api --test it exports::a_large -- --ignored
/// --nocapture`): 20 000 ledger entries stream in pages of 500, each chunk about one page, with
/// the process's resident memory printed before and at its peak while streaming.
#[tokio::test]
#[ignore = "a load check: 20 000 rows"]
async fn a_large_export_streams_in_page_sized_chunks() {
    use entity::{Bucket, EntryType, ledger_entry};
    use sea_orm::EntityTrait;
    const ROWS: usize = 20_000;
    fn rss_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
    let (app, merchant, _) = TestApp::with_test_key().await;
    let start = Utc::now() - Duration::hours(2);
    let rows: Vec<ledger_entry::Model> = (0..ROWS)
        .map(|i| ledger_entry::Model {
            id: Uuid::now_v7(),
            merchant_id: merchant,
            environment: Environment::Test,
            gate_id: "tron_usdt".into(),
            bucket: Bucket::Available,
            entry_type: EntryType::Adjustment,
            amount: Amount::new(d("1.5")),
            balance_after: Amount::new(d("1.5") * Decimal::from(i + 1)),
            reference_type: Some("adjustment".into()),
            reference_id: Some(Uuid::now_v7()),
            description: Some(format!("load row {i}, with a comma")),
            created_at: start + Duration::milliseconds(i as i64 / 3),
        })
        .collect();
    for chunk in rows.chunks(1000) {
        ledger_entry::Entity::insert_many(chunk.iter().cloned().map(ledger_entry::ActiveModel::from))
            .exec_without_returning(&app.state.db)
            .await
            .expect("ledger rows");
    }
    drop(rows);
    let (from, to) = range();
    let (from, to) = domain::exports::parse_range(Some(&from), Some(&to)).unwrap();
    let before = rss_kib();
    let mut stream = std::pin::pin!(csv_stream(
        app.state.db.clone(),
        merchant.into(),
        Environment::Test,
        ExportKind::LedgerEntries,
        from,
        to,
        domain::exports::PAGE_SIZE,
    ));
    let (mut chunks, mut total, mut largest, mut peak, mut records) = (0, 0, 0, before, 0);
    while let Some(chunk) = stream.try_next().await.expect("a chunk") {
        chunks += 1;
        total += chunk.len();
        largest = largest.max(chunk.len());
        records += chunk.windows(2).filter(|w| w == b"\r\n").count();
        peak = peak.max(rss_kib());
    }
    println!(
        "{ROWS} rows: {total} bytes in {chunks} chunks (largest {largest}); RSS {before} KiB before, {peak} KiB at peak"
    );
    assert_eq!(records, ROWS + 1, "every row and the header");
    assert_eq!(chunks, 1 + ROWS / domain::exports::PAGE_SIZE as usize);
    assert!(largest * 30 < total, "a chunk is about one page of the {total} bytes, not the whole: {largest}");
}

/// The document says what the server sends: a `text/csv` 200 with its `Content-Disposition`,
/// the four kinds as a named enum, both bounds required.
#[tokio::test]
async fn the_openapi_document_declares_a_csv_download() {
    let app = TestApp::spawn().await;
    let doc = app.get("/openapi.json", None).await.body;
    let op = &doc["paths"]["/v1/exports/{kind}"]["get"];
    let ok = &op["responses"]["200"];
    assert_eq!(ok["content"].as_object().unwrap().keys().collect::<Vec<_>>(), ["text/csv"], "{ok}");
    assert_eq!(ok["content"]["text/csv"]["schema"]["type"], "string", "{ok}");
    assert!(ok["headers"]["Content-Disposition"].is_object(), "{ok}");
    let kinds = &doc["components"]["schemas"]["ExportKind"]["enum"];
    assert_eq!(kinds, &json!(["invoices", "payments", "ledger_entries", "payouts"]));
    let params: Vec<(&str, bool)> = op["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["required"].as_bool().unwrap_or(false)))
        .collect();
    assert_eq!(params, [("kind", true), ("from", true), ("to", true)]);
    assert_eq!(op["security"], json!([{"api_key": []}]));
}
