//! Every row of the PRODUCT.md invoice table, end to end: the `api`, `deposit-scanner` and
//! `confirmation-tracker` binaries as separate processes, driven only through the API and its
//! test helpers (deposits, reversals), checking statuses, payments, ledger entries and the
//! outbox events. Rows that need the checkout page (draft activation, payer notification) belong
//! to the checkout issue and are not here.

use testkit::fleet;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use fleet::{Fleet, Proc, wait_ready};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    api: String,
    key: String,
}

impl Client {
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self.http.post(format!("{}{path}", self.api)).header("X-API-Key", &self.key).json(&body).send();
        let r = r.await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> Value {
        let r = self.http.get(format!("{}{path}", self.api)).header("X-API-Key", &self.key).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.json::<Value>().await.unwrap()["data"].clone()
    }

    async fn invoice(&self, body: Value) -> String {
        let (s, b) = self.post("/v1/invoices", body).await;
        assert_eq!(s, 201, "{b}");
        b["data"]["id"].as_str().unwrap().to_owned()
    }

    async fn deposit(&self, invoice: &str, amount: &str) -> String {
        let (s, b) = self.post("/v1/test/deposits", json!({"invoice_id": invoice, "amount": amount})).await;
        assert_eq!(s, 201, "{b}");
        b["data"]["id"].as_str().unwrap().to_owned()
    }

    async fn reverse(&self, deposit: &str) {
        let (s, b) = self.post(&format!("/v1/test/deposits/{deposit}/reverse"), json!({})).await;
        assert_eq!(s, 200, "{b}");
    }

    async fn wait(&self, invoice: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let inv = self.get(&format!("/v1/invoices/{invoice}")).await;
            if inv["status"] == status {
                return inv;
            }
            assert!(Instant::now() < deadline, "invoice {invoice} stuck at {} (wanted {status}): {inv}", inv["status"]);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the invoice's payments satisfy `pred`.
    async fn wait_payments(&self, invoice: &str, what: &str, pred: impl Fn(&[Value]) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let inv = self.get(&format!("/v1/invoices/{invoice}")).await;
            if pred(inv["payments"].as_array().unwrap()) {
                return inv;
            }
            assert!(Instant::now() < deadline, "invoice {invoice}: {what} never happened: {inv}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn events(db: &sea_orm::DatabaseConnection, invoice: &str) -> Vec<String> {
    testkit::invoice_events(db, invoice).await
}

/// Ledger entry types referencing the invoice's payments, per payment, oldest first.
async fn ledger_types(db: &sea_orm::DatabaseConnection, payment_ids: &[String]) -> Vec<(String, String)> {
    let ids: Vec<uuid::Uuid> = payment_ids.iter().map(|p| p.parse().unwrap()).collect();
    entity::ledger_entry::Entity::find()
        .filter(entity::ledger_entry::Column::ReferenceId.is_in(ids))
        .order_by_asc(entity::ledger_entry::Column::CreatedAt)
        .order_by_asc(entity::ledger_entry::Column::Id)
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.entry_type.as_str().to_owned(), format!("{}:{}", e.bucket_name(), e.amount.0.normalize())))
        .collect()
}

trait BucketName {
    fn bucket_name(&self) -> &'static str;
}

impl BucketName for entity::ledger_entry::Model {
    fn bucket_name(&self) -> &'static str {
        match self.bucket {
            entity::Bucket::Available => "available",
            entity::Bucket::Pending => "pending",
            entity::Bucket::Reserved => "reserved",
        }
    }
}

fn ids(inv: &Value) -> Vec<String> {
    inv["payments"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// Brings an invoice's payment window to an end (the sweeper then expires it): a 60 s minimum
/// merchant lifetime would make the test wait a minute otherwise.
async fn end_window(db: &sea_orm::DatabaseConnection, invoice: &str) {
    use sea_orm::sea_query::Expr;
    let id: uuid::Uuid = invoice.parse().unwrap();
    let res = entity::invoice::Entity::update_many()
        .col_expr(entity::invoice::Column::ExpiresAt, Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)))
        .filter(entity::invoice::Column::Id.eq(id))
        .exec(db)
        .await
        .unwrap();
    assert_eq!(res.rows_affected, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_the_invoice_table() {
    let db = testkit::Db::fresh().await;
    // A 20 s monitoring window: bitcoin (3 blocks) and ethereum (12) confirm well within it at
    // 100 ms blocks; polygon (128 blocks of 300 ms, ~38 s) does not. The margins are wide so a
    // slow machine cannot reorder the steps (a 6 s window failed on a loaded CI runner).
    let fleet = Fleet::new(
        &db.url,
        &[("PAYGATE_PIPELINE__MONITOR_WINDOW_SECS", "20"), ("PAYGATE_SANDBOX__GATE_BLOCK_INTERVAL_MS__POLYGON", "300")],
    );
    let api = fleet.api();
    let http = reqwest::Client::new();
    wait_ready(&http, &api).await;
    let scanner = fleet.worker(env!("CARGO_BIN_EXE_deposit-scanner"));
    let tracker = fleet.worker(env!("CARGO_BIN_EXE_confirmation-tracker"));
    wait_ready(&http, &scanner).await;
    wait_ready(&http, &tracker).await;
    let _procs: [Proc; 3] = [api, scanner, tracker];

    let config = domain::config::Config { database_url: db.url.clone(), ..Default::default() };
    let conn = domain::db::connect(&config).await.unwrap();
    let merchant = domain::merchants::create_merchant(&conn, "E2E", &Default::default()).await.unwrap();
    let all = api::auth::Permissions::all();
    let key = domain::merchants::create_api_key(&conn, merchant.id.into(), entity::Environment::Test, all, None)
        .await
        .unwrap()
        .1;
    let c = Client { http, api: _procs[0].url.clone(), key };

    // (none) -> pending; (none) -> draft; pending -> cancelled (API cancel, no event).
    let btc = |amount: &str| json!({"currency": "BTC", "amount": amount});
    let cancelled = c.invoice(btc("0.1")).await;
    assert_eq!(c.get(&format!("/v1/invoices/{cancelled}")).await["status"], "pending");
    let (st, _) = c.post(&format!("/v1/invoices/{cancelled}/cancel"), json!({})).await;
    assert_eq!(st, 200);
    let in_3s = (chrono::Utc::now() + chrono::Duration::seconds(3)).to_rfc3339();
    let draft = c
        .invoice(json!({"amount_fiat": "10", "fiat_currency": "USD", "is_deferred": true, "draft_expires_at": in_3s}))
        .await;
    assert_eq!(c.get(&format!("/v1/invoices/{draft}")).await["status"], "draft");

    // Start every scenario at once; then check each.
    let paid = c.invoice(btc("0.1")).await;
    c.deposit(&paid, "0.1").await;
    let over = c.invoice(btc("0.1")).await;
    c.deposit(&over, "0.15").await;
    let under = c.invoice(btc("0.1")).await;
    c.deposit(&under, "0.04").await;
    let expired = c.invoice(btc("0.1")).await;
    end_window(&conn, &expired).await;
    let invalid = c.invoice(json!({"currency": "POL", "amount": "5"})).await;
    c.deposit(&invalid, "5").await;
    let reversed_paid = c.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "0.1"})).await;
    let d_reversed_paid = c.deposit(&reversed_paid, "0.1").await;
    c.deposit(&cancelled, "0.1").await;

    // paid -> invalid when the credited deposit is reversed after credit (a reversal is watched
    // for until twice the required confirmations: 12 to 24 ethereum blocks, 1.2 s here).
    c.wait(&reversed_paid, "paid").await;
    c.reverse(&d_reversed_paid).await;
    let inv = c.wait(&reversed_paid, "invalid").await;
    assert_eq!(
        events(&conn, &reversed_paid).await,
        s(&["invoice.confirming", "invoice.paid", "balance.credited", "invoice.deposit_reversed", "invoice.invalid"])
    );
    assert_eq!(
        ledger_types(&conn, &ids(&inv)).await,
        pairs(&[
            ("invoice_credit", "pending:0.1"),
            ("invoice_credit", "pending:-0.1"),
            ("invoice_credit", "available:0.1"),
            ("deposit_reversal", "available:-0.1"),
        ])
    );

    // pending -> confirming -> paid; balance.credited after it.
    let inv = c.wait(&paid, "paid").await;
    assert_eq!(inv["amount_paid"], "0.1");
    assert_eq!(inv["payments"][0]["status"], "confirmed");
    assert_eq!(inv["payments"][0]["required_confirmations"], 3);
    assert!(inv["payments"][0]["confirmations"].as_i64().unwrap() >= 3);
    let ps = ids(&inv);
    c.wait_payments(&paid, "final", |p| p[0]["confirmations"].as_i64().unwrap() >= 6).await;
    assert_eq!(events(&conn, &paid).await, s(&["invoice.confirming", "invoice.paid", "balance.credited"]));
    assert_eq!(
        ledger_types(&conn, &ps).await,
        pairs(&[
            ("invoice_credit", "pending:0.1"),
            ("invoice_credit", "pending:-0.1"),
            ("invoice_credit", "available:0.1")
        ])
    );

    // Overpaid.
    c.wait(&over, "overpaid").await;
    assert_eq!(events(&conn, &over).await, s(&["invoice.confirming", "invoice.overpaid", "balance.credited"]));

    // confirming -> underpaid, top-up -> paid.
    c.wait(&under, "underpaid").await;
    c.deposit(&under, "0.06").await;
    let inv = c.wait(&under, "paid").await;
    assert_eq!(inv["amount_paid"], "0.1");
    assert_eq!(
        events(&conn, &under).await,
        s(&["invoice.confirming", "invoice.underpaid", "balance.credited", "invoice.paid", "balance.credited"])
    );

    // pending -> expired (nothing seen), then a late deposit: credited, status unchanged.
    c.wait(&expired, "expired").await;
    c.deposit(&expired, "0.1").await;
    let inv = c.wait_payments(&expired, "late credit", |p| p.len() == 1 && p[0]["status"] == "confirmed").await;
    assert_eq!(inv["status"], "expired");
    assert_eq!(events(&conn, &expired).await, s(&["invoice.expired", "invoice.late_deposit", "balance.credited"]));

    // cancelled + deposit: late deposit, credited.
    let inv = c.wait_payments(&cancelled, "late credit", |p| p.len() == 1 && p[0]["status"] == "confirmed").await;
    assert_eq!(inv["status"], "cancelled");
    assert_eq!(events(&conn, &cancelled).await, s(&["invoice.late_deposit", "balance.credited"]));

    // draft -> expired at draft_expires_at.
    c.wait(&draft, "expired").await;
    assert_eq!(events(&conn, &draft).await, s(&["invoice.draft_expired"]));

    // The reversal rows pay only now, so their reversal comes well within the monitoring window
    // and long before their 128 confirmations, however long the rows above took.
    let back_to_pending = c.invoice(json!({"currency": "POL", "amount": "5"})).await;
    let d_pending = c.deposit(&back_to_pending, "5").await;
    let back_to_expired = c.invoice(json!({"currency": "POL", "amount": "5"})).await;
    let d_expired = c.deposit(&back_to_expired, "5").await;

    // confirming -> pending when its only unconfirmed deposit is reversed.
    c.wait(&back_to_pending, "confirming").await;
    c.reverse(&d_pending).await;
    let inv = c.wait(&back_to_pending, "pending").await;
    assert_eq!(inv["payments"][0]["status"], "reversed");
    assert_eq!(events(&conn, &back_to_pending).await, s(&["invoice.confirming", "invoice.deposit_reversed"]));
    assert_eq!(
        ledger_types(&conn, &ids(&inv)).await,
        pairs(&[("invoice_credit", "pending:5"), ("deposit_reversal", "pending:-5")])
    );

    // confirming -> expired when reversed after expires_at (announced as expired too).
    c.wait(&back_to_expired, "confirming").await;
    end_window(&conn, &back_to_expired).await;
    c.reverse(&d_expired).await;
    c.wait(&back_to_expired, "expired").await;
    assert_eq!(
        events(&conn, &back_to_expired).await,
        s(&["invoice.confirming", "invoice.deposit_reversed", "invoice.expired"])
    );

    // confirming -> invalid after the monitoring window; credited when it confirms later.
    c.wait(&invalid, "invalid").await;
    let inv = c.wait_payments(&invalid, "late credit", |p| p[0]["status"] == "confirmed").await;
    assert_eq!(inv["status"], "invalid");
    assert_eq!(
        events(&conn, &invalid).await,
        s(&["invoice.confirming", "invoice.invalid", "invoice.late_deposit", "balance.credited"])
    );

    // The balances add up: BTC 0.1 + 0.15 + 0.1 + 0.1 (expired late) + 0.1 (cancelled late);
    // the reversed one is gone. POL: only the invalid invoice's late credit.
    let balances = c.get("/v1/balances").await;
    let by_gate: HashMap<String, Value> =
        balances.as_array().unwrap().iter().map(|b| (b["gate_id"].as_str().unwrap().to_owned(), b.clone())).collect();
    assert_eq!(by_gate["bitcoin"]["available"], "0.55");
    assert_eq!(by_gate["ethereum"]["available"], "0");
    assert_eq!(by_gate["bitcoin"]["pending"], "0");
    assert_eq!(by_gate["polygon"]["available"], "5");
    assert_eq!(by_gate["polygon"]["pending"], "0");
    // Every event exists once.
    let all = entity::event::Entity::find().all(&conn).await.unwrap();
    let keys: std::collections::HashSet<_> = all.iter().map(|e| e.dedupe_key.clone()).collect();
    assert_eq!(keys.len(), all.len());
}
