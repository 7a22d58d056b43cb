//! Settlement conversion, driven step by step (scanner, tracker and converter called in turn on
//! a sandbox chain that only moves when mined): a fiat-priced invoice settled into another
//! asset, expired, refused and failed quotes crediting the paid asset, a reversal before the
//! credit, a converter that was down at detection, racing converters, and the exact ledger.

use entity::{Bucket, ConversionState, EntryType, Environment, ledger_entry, settlement_conversion};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};
use testkit::{TRON_DEST, d};
use uuid::Uuid;
use workers::converter::{self, Converter, Step, venue::Venues};

/// The shared step-by-step pipeline (`support::pipe`) with the settlement converter.
struct Pipe {
    base: crate::support::pipe::Pipe,
    converter: Converter,
}

impl std::ops::Deref for Pipe {
    type Target = crate::support::pipe::Pipe;
    fn deref(&self) -> &crate::support::pipe::Pipe {
        &self.base
    }
}

async fn pipe_with(f: impl FnOnce(&mut domain::config::Config)) -> Pipe {
    let base = crate::support::pipe::Pipe::start(f).await;
    let app = &base.app;
    app.state.rates.refresh(Environment::Test).await.unwrap();
    let converter = Converter {
        db: app.state.db.clone(),
        venues: Venues::from_config(&app.state.config, app.state.rates.clone(), &app.state.db),
        quote_lock: chrono::Duration::seconds(app.state.config.settlement.quote_lock_secs as i64),
    };
    Pipe { base, converter }
}

async fn pipe() -> Pipe {
    pipe_with(|_| {}).await
}

impl Pipe {
    async fn invoice(&self, body: Value) -> Uuid {
        self.app.create_invoice_id(&self.key, body).await
    }

    /// Scan every test gate and track every payment (no conversion).
    async fn track(&self) {
        self.scan_and_track().await;
    }

    /// One converter pass over what it has to do.
    async fn convert(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for id in converter::due(&self.app.state.db, 100).await.unwrap() {
            steps.push(self.converter.step(id).await.unwrap());
        }
        steps
    }

    async fn conversion(&self, id: Uuid) -> Value {
        self.get_invoice(id).await["payments"][0]["settlement_conversion"].clone()
    }

    /// (entry type, bucket, amount) of a gate's ledger, oldest first.
    async fn ledger(&self, gate: &str) -> Vec<(EntryType, Bucket, Decimal)> {
        testkit::assert_ledger_sums(&self.app.state.db, self.merchant, gate).await;
        ledger_entry::Entity::find()
            .filter(ledger_entry::Column::MerchantId.eq(self.merchant))
            .filter(ledger_entry::Column::GateId.eq(gate))
            .order_by_asc(ledger_entry::Column::Id)
            .all(&self.app.state.db)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.entry_type, e.bucket, e.amount.0))
            .collect()
    }

    async fn credited_events(&self) -> Vec<Value> {
        testkit::event_payloads(&self.app.state.db, "balance.credited").await
    }

    /// A BTC invoice priced at 600 USD (0.01 BTC at the sandbox's 60 000) settling into USDT on
    /// tron, with `metadata`.
    async fn fiat_btc_to_usdt(&self, metadata: Value) -> Uuid {
        self.invoice(json!({
            "currency": "BTC", "amount_fiat": "600", "fiat_currency": "USD",
            "target_settlement_asset": "tron_usdt", "metadata": metadata,
        }))
        .await
    }
}

/// Sandbox defaults: 60 000 USD per BTC, 1 per USDT, 0.5 % spread, 0.25 % fee.
const RATE: &str = "59700";
const GROSS: &str = "597";
const FEE: &str = "1.4925";
const NET: &str = "595.5075";

#[tokio::test]
async fn a_fiat_priced_invoice_is_settled_into_another_asset() {
    let p = pipe().await;
    let inv = p.fiat_btc_to_usdt(json!({})).await;
    let created = p.get_invoice(inv).await;
    assert_eq!(created["amount_requested"], "0.01");
    assert_eq!(created["target_settlement_asset"], "tron_usdt");
    assert_eq!(created["settlement_target_currency"], "USDT");
    assert_eq!(created["settlement_target_network"], "tron");
    p.pay(inv, "0.01").await;
    p.mine("bitcoin", 1).await;
    p.track().await;
    // Detected, not quoted yet: both statuses pending.
    let c = p.conversion(inv).await;
    assert_eq!((c["quote_status"].as_str(), c["execution_status"].as_str()), (Some("pending"), Some("pending")));
    assert_eq!(c["target_currency"], "USDT");

    // The converter quotes it at detection, locked for 15 minutes.
    assert_eq!(p.convert().await, [Step::Quoted]);
    let c = p.conversion(inv).await;
    assert_eq!(c["quote_status"], "quoted");
    assert_eq!(c["execution_status"], "pending");
    assert_eq!(c["source_amount"], "0.01");
    assert_eq!((c["target_gross_amount"].as_str(), c["fee_amount"].as_str()), (Some(GROSS), Some(FEE)));
    assert_eq!(c["net_amount"], NET);
    assert_eq!(c["failure_class"], Value::Null);
    let quoted_at = chrono::DateTime::parse_from_rfc3339(c["quoted_at"].as_str().unwrap()).unwrap();
    let until = chrono::DateTime::parse_from_rfc3339(c["locked_until"].as_str().unwrap()).unwrap();
    assert_eq!(until - quoted_at, chrono::Duration::seconds(900));
    let row = settlement_conversion::Entity::find_by_id(
        Uuid::parse_str(p.get_invoice(inv).await["payments"][0]["id"].as_str().unwrap()).unwrap(),
    )
    .one(&p.app.state.db)
    .await
    .unwrap()
    .unwrap();
    assert_eq!(row.rate.unwrap().0, d(RATE));
    assert_eq!(row.venue, "sandbox");
    // Nothing to do until it confirms.
    assert!(p.convert().await.is_empty());

    // Confirmed: the invoice is paid, but the balance waits for the conversion.
    p.mine("bitcoin", 3).await;
    p.track().await;
    assert_eq!(p.get_invoice(inv).await["status"], "paid");
    assert_eq!(p.balance("bitcoin").await, (d("0"), d("0.01")));
    assert!(p.credited_events().await.is_empty(), "balance.credited waits for the final credit");

    assert_eq!(p.convert().await, [Step::Settled]);
    let c = p.conversion(inv).await;
    assert_eq!((c["quote_status"].as_str(), c["execution_status"].as_str()), (Some("quoted"), Some("executed")));
    assert_eq!(p.balance("bitcoin").await, (d("0"), d("0")));
    assert_eq!(p.balance("tron_usdt").await, (d(NET), d("0")));
    // Replays change nothing.
    for _ in 0..3 {
        assert!(p.convert().await.is_empty());
        p.track().await;
    }
    assert_eq!(p.balance("tron_usdt").await, (d(NET), d("0")));
    assert_eq!(p.ledger("bitcoin").await, testkit::converted_source_entries("0.01"));
    assert_eq!(p.ledger("tron_usdt").await, [(EntryType::ConversionCredit, Bucket::Available, d(NET))]);
    assert_eq!(
        testkit::invoice_events(&p.app.state.db, inv).await,
        ["invoice.confirming", "invoice.paid", "balance.credited"].map(String::from)
    );
    let ev = &p.credited_events().await[0];
    assert_eq!(ev["outcome"], "target_credited");
    assert_eq!(ev["failure_class"], Value::Null);
    assert_eq!((ev["source_amount"].as_str(), ev["source_currency"].as_str()), (Some("0.01"), Some("BTC")));
    assert_eq!(ev["source_network"], "bitcoin");
    assert_eq!((ev["credited_amount"].as_str(), ev["credited_currency"].as_str()), (Some(NET), Some("USDT")));
    assert_eq!(ev["credited_network"], "tron");
    // Its fiat value at the credit: the invoice's dollars, at USDT's market rate then (1), of
    // the net amount credited; the exports read it.
    let pay = entity::payment::Entity::find_by_id(row.payment_id).one(&p.app.state.db).await.unwrap().unwrap();
    assert_eq!(pay.credited_fiat_currency.as_deref(), Some("USD"));
    assert_eq!(pay.credited_fiat_rate.map(|r| r.0), Some(d("1")));
    assert_eq!(pay.credited_fiat_value.map(|v| v.0.to_string()), Some("595.51".into()));
    // The credit is refundable in the asset it landed in, up to the net amount.
    let refund = |amount: &str| json!({"invoice_id": inv, "currency": "USDT", "network": "tron", "amount": amount, "destination": TRON_DEST});
    let over = p.refund("r1", &refund("595.5076")).await;
    assert_eq!(over.status.as_u16(), 422, "{}", over.body);
    let btc = json!({"invoice_id": inv, "currency": "BTC", "amount": "0.001",
                     "destination": "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"});
    let r = p.refund("r2", &btc).await;
    assert_eq!(r.status.as_u16(), 422, "{}", r.body);
    // The merchant pays a refund's fees by default (spec 2.6).
    p.fund_refund_fees().await;
    let ok = p.refund("r3", &refund(NET)).await;
    assert_eq!(ok.status.as_u16(), 201, "{}", ok.body);
}

#[tokio::test]
async fn a_quote_confirmed_after_its_lock_credits_the_paid_asset() {
    let p = pipe_with(|c| c.settlement.quote_lock_secs = 1).await;
    let inv = p.fiat_btc_to_usdt(json!({})).await;
    p.pay(inv, "0.01").await;
    p.mine("bitcoin", 1).await;
    p.track().await;
    assert_eq!(p.convert().await, [Step::Quoted]);
    // The payment takes longer to confirm than the quote holds.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    p.mine("bitcoin", 3).await;
    p.track().await;
    assert_eq!(p.convert().await, [Step::Settled]);
    let c = p.conversion(inv).await;
    assert_eq!((c["quote_status"].as_str(), c["execution_status"].as_str()), (Some("expired"), Some("failed")));
    assert_eq!(c["failure_class"], "quote_expired");
    // The quoted amounts stay on record.
    assert_eq!(c["net_amount"], NET);
    assert_eq!(p.balance("bitcoin").await, (d("0.01"), d("0")));
    assert_eq!(p.balance("tron_usdt").await, (d("0"), d("0")));
    assert_eq!(
        p.ledger("bitcoin").await,
        [
            (EntryType::InvoiceCredit, Bucket::Pending, d("0.01")),
            (EntryType::InvoiceCredit, Bucket::Pending, d("-0.01")),
            (EntryType::InvoiceCredit, Bucket::Available, d("0.01")),
        ]
    );
    let ev = &p.credited_events().await[0];
    assert_eq!(
        (ev["outcome"].as_str(), ev["failure_class"].as_str()),
        (Some("source_credited"), Some("quote_expired"))
    );
    assert_eq!((ev["credited_amount"].as_str(), ev["credited_currency"].as_str()), (Some("0.01"), Some("BTC")));
}

#[tokio::test]
async fn forced_sandbox_failures_credit_the_paid_asset_with_their_class() {
    let p = pipe().await;
    let cases = [
        ("fail_quote", "failed", "failed", "quote_rejected"),
        ("expire_quote", "expired", "failed", "quote_expired"),
        ("fail_execution", "quoted", "failed", "execution_rejected"),
    ];
    let mut invoices = Vec::new();
    for (hint, ..) in cases {
        let inv = p.fiat_btc_to_usdt(json!({"sandbox_conversion": hint})).await;
        p.pay(inv, "0.01").await;
        invoices.push(inv);
    }
    p.mine("bitcoin", 1).await;
    p.track().await;
    assert_eq!(p.convert().await, [Step::Quoted; 3]);
    let refused = p.conversion(invoices[0]).await;
    assert_eq!(
        (refused["quote_status"].as_str(), refused["failure_class"].as_str()),
        (Some("failed"), Some("quote_rejected"))
    );
    assert_eq!((refused["net_amount"].clone(), refused["quoted_at"].clone()), (Value::Null, Value::Null));
    p.mine("bitcoin", 3).await;
    p.track().await;
    assert_eq!(p.convert().await, [Step::Settled; 3]);
    for ((_, quote, execution, class), inv) in cases.iter().zip(&invoices) {
        let c = p.conversion(*inv).await;
        assert_eq!(
            (c["quote_status"].as_str(), c["execution_status"].as_str(), c["failure_class"].as_str()),
            (Some(*quote), Some(*execution), Some(*class)),
            "{inv}"
        );
    }
    assert_eq!(p.balance("bitcoin").await, (d("0.03"), d("0")));
    assert_eq!(p.balance("tron_usdt").await, (d("0"), d("0")));
    let mut classes: Vec<String> = p
        .credited_events()
        .await
        .iter()
        .map(|e| {
            assert_eq!(e["outcome"], "source_credited");
            e["failure_class"].as_str().unwrap().to_owned()
        })
        .collect();
    classes.sort();
    assert_eq!(classes, ["execution_rejected", "quote_expired", "quote_rejected"]);
    p.ledger("bitcoin").await;
}

#[tokio::test]
async fn a_payment_reversed_before_its_credit_abandons_the_quote() {
    let p = pipe().await;
    let inv = p.fiat_btc_to_usdt(json!({})).await;
    let dep = p.pay(inv, "0.01").await;
    p.mine("bitcoin", 1).await;
    p.track().await;
    p.convert().await;
    p.mine("bitcoin", 3).await;
    p.track().await;
    // Confirmed (paid), the converter has not settled it yet, and the chain drops it.
    assert_eq!(p.get_invoice(inv).await["status"], "paid");
    let path = format!("/v1/test/deposits/{}/reverse", dep["id"].as_str().unwrap());
    assert_eq!(p.app.post(&path, Some(&p.key), &json!({})).await.status.as_u16(), 200);
    p.track().await;
    assert!(p.convert().await.is_empty(), "nothing left to convert");
    let got = p.get_invoice(inv).await;
    assert_eq!(got["status"], "invalid");
    assert_eq!(got["amount_paid"], "0");
    let c = &got["payments"][0]["settlement_conversion"];
    assert_eq!(
        (c["execution_status"].as_str(), c["failure_class"].as_str()),
        (Some("failed"), Some("payment_reversed"))
    );
    assert_eq!(p.balance("bitcoin").await, (d("0"), d("0")));
    assert_eq!(p.balance("tron_usdt").await, (d("0"), d("0")));
    p.ledger("bitcoin").await;
    assert!(p.credited_events().await.is_empty());
    let events = testkit::invoice_events(&p.app.state.db, inv).await;
    assert_eq!(
        events,
        ["invoice.confirming", "invoice.paid", "invoice.deposit_reversed", "invoice.invalid"].map(String::from)
    );
}

#[tokio::test]
async fn a_converter_down_at_detection_quotes_and_settles_in_one_pass() {
    let p = pipe().await;
    let inv = p.fiat_btc_to_usdt(json!({})).await;
    p.pay(inv, "0.01").await;
    p.mine("bitcoin", 4).await;
    p.track().await;
    p.track().await;
    assert_eq!(p.get_invoice(inv).await["payments"][0]["status"], "confirmed");
    assert_eq!(p.convert().await, [Step::Settled]);
    assert_eq!(p.conversion(inv).await["execution_status"], "executed");
    assert_eq!(p.balance("tron_usdt").await, (d(NET), d("0")));
}

#[tokio::test]
async fn racing_converters_credit_once() {
    let p = pipe().await;
    let mut invoices = Vec::new();
    for _ in 0..4 {
        let inv = p.fiat_btc_to_usdt(json!({})).await;
        p.pay(inv, "0.01").await;
        invoices.push(inv);
    }
    p.mine("bitcoin", 4).await;
    p.track().await;
    p.track().await;
    let due = converter::due(&p.app.state.db, 100).await.unwrap();
    assert_eq!(due.len(), 4);
    let second = p.converter.clone();
    let (a, b) = tokio::join!(
        async {
            for id in &due {
                p.converter.step(*id).await.unwrap();
            }
        },
        async {
            for id in due.iter().rev() {
                second.step(*id).await.unwrap();
            }
        }
    );
    let _ = (a, b);
    assert_eq!(p.balance("tron_usdt").await, (d(NET) * d("4"), d("0")));
    assert_eq!(p.balance("bitcoin").await, (d("0"), d("0")));
    assert_eq!(p.credited_events().await.len(), 4);
    assert_eq!(p.ledger("tron_usdt").await.len(), 4);
    let states: Vec<ConversionState> = settlement_conversion::Entity::find()
        .all(&p.app.state.db)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.state)
        .collect();
    assert_eq!(states, [ConversionState::Executed; 4]);
}

#[tokio::test]
async fn passthrough_and_same_asset_targets_are_not_converted() {
    let p = pipe().await;
    let same = p
        .invoice(json!({"currency": "USDT", "network": "tron", "amount": "10", "target_settlement_asset": "tron_usdt"}))
        .await;
    let plain = p.invoice(json!({"currency": "USDT", "network": "tron", "amount": "10"})).await;
    p.pay(same, "10").await;
    p.pay(plain, "10").await;
    p.mine("tron_usdt", 20).await;
    p.track().await;
    p.track().await;
    assert!(p.convert().await.is_empty());
    for inv in [same, plain] {
        let c = p.conversion(inv).await;
        assert_eq!(
            (c["quote_status"].as_str(), c["execution_status"].as_str()),
            (Some("not_required"), Some("not_required"))
        );
    }
    assert_eq!(p.balance("tron_usdt").await, (d("20"), d("0")));
    for e in p.credited_events().await {
        assert_eq!(
            (e["outcome"].as_str(), e["failure_class"].as_str()),
            (Some("source_credited"), Some("not_required"))
        );
    }
}

#[tokio::test]
async fn live_invoices_cannot_ask_for_a_conversion_without_a_live_venue() {
    let p = pipe().await;
    let live = p.app.key(p.merchant, Environment::Live, &[]).await;
    for (field, body) in [
        (
            "target_settlement_asset",
            json!({"currency": "USDT", "network": "tron", "amount": "10", "target_settlement_asset": "bitcoin"}),
        ),
        (
            "settlement_target_currency",
            json!({"currency": "USDT", "network": "tron", "amount": "10", "settlement_target_currency": "BTC"}),
        ),
    ] {
        let r = p.app.post("/v1/invoices", Some(&live), &body).await;
        r.assert_error(422, "unsupported_currency", Some(field));
    }
    // Passthrough is fine in live (on a gate with a live adapter).
    let ok = json!({"currency": "USDT", "network": "ethereum", "amount": "10"});
    assert_eq!(p.app.post("/v1/invoices", Some(&live), &ok).await.status.as_u16(), 201);
}
