//! The deposit pipeline's rules, driven step by step on a sandbox chain that only moves when
//! mined: scanning, confirmations, crediting exactly once, every invoice transition and event of
//! the PRODUCT.md table, reversals, static address deposits, and the sweeper.

use std::time::Duration;

use entity::{Environment, event};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::{TRON_DEST, d};
use uuid::Uuid;
use workers::tracker::Next;
use workers::{scanner, tracker};

use crate::support::steps::{force_expired, pipe, pipe_with, set_time};

#[tokio::test]
async fn exact_payment_confirms_and_credits_once() {
    let p = pipe().await;
    let (inv, dep) = p.paid_invoice("USDT", "tron", "100").await;
    assert_eq!(dep["gate_id"], "tron_usdt");
    // The deposit is in the next block: not visible until that block exists.
    assert!(p.step().await.is_empty());
    assert_eq!(p.status(inv).await, "pending");
    p.mine("tron_usdt", 1).await;
    assert_eq!(p.step().await.len(), 1);
    let got = p.get_invoice(inv).await;
    assert_eq!(got["status"], "confirming");
    let pay = &got["payments"][0];
    assert_eq!(pay["status"], "confirming");
    assert_eq!(pay["confirmations"], 1);
    assert_eq!(pay["required_confirmations"], 19);
    assert_eq!(pay["tx_hash"], dep["tx_hash"]);
    assert_eq!(p.balance("tron_usdt").await, (d("0"), d("100")));
    p.mine_and_step("tron_usdt", 17).await;
    assert_eq!(p.get_invoice(inv).await["payments"][0]["confirmations"], 18);
    assert_eq!(p.status(inv).await, "confirming");
    p.mine_and_step("tron_usdt", 1).await;
    let got = p.get_invoice(inv).await;
    assert_eq!(got["status"], "paid");
    assert_eq!(got["amount_paid"], "100");
    assert!(got["paid_at"].is_string());
    assert_eq!(got["payments"][0]["status"], "confirmed");
    assert_eq!(p.balance("tron_usdt").await, (d("100"), d("0")));
    // Replays change nothing.
    for _ in 0..3 {
        p.step().await;
    }
    assert_eq!(p.balance("tron_usdt").await, (d("100"), d("0")));
    assert_eq!(p.events(inv).await, ["invoice.confirming", "invoice.paid", "balance.credited"].map(String::from));
    p.assert_ledger("tron_usdt").await;
    let credited = p.first_event("balance.credited").await;
    assert_eq!(credited.payload["credited_amount"], "100");
    assert_eq!(credited.payload["outcome"], "source_credited");
    assert_eq!(credited.payload["credited_currency"], "USDT");
    assert_eq!(credited.payload["credited_network"], "tron");
    // The webhook `data` fields are a contract (docs/api-decisions.md): exactly these keys.
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let sorted = |k: &[&str]| {
        let mut k: Vec<String> = k.iter().map(|s| (*s).to_owned()).collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&credited.payload),
        sorted(&[
            "invoice_id",
            "payment_id",
            "external_id",
            "outcome",
            "failure_class",
            "source_amount",
            "source_currency",
            "source_network",
            "credited_amount",
            "credited_currency",
            "credited_network"
        ])
    );
    let paid = p.first_event("invoice.paid").await;
    assert_eq!(
        keys(&paid.payload),
        sorted(&[
            "invoice_id",
            "external_id",
            "currency",
            "network",
            "environment",
            "amount_requested",
            "amount_paid",
            "status",
            "payment_id",
            "tx_hash",
            "payment_amount",
            "paid_at"
        ])
    );
    assert_eq!(paid.payload["status"], "paid");
    // The credit is refundable now.
    // The merchant pays a refund's fees by default (spec 2.6).
    p.fund_refund_fees().await;
    let body = json!({"invoice_id": inv, "currency": "tron_usdt", "amount": "100", "destination": TRON_DEST});
    let r = p.refund("after-credit", &body).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
}

#[tokio::test]
async fn underpaid_topped_up_overpaid_and_tolerance() {
    let p = pipe().await;
    let inv = p.invoice("BTC", "bitcoin", "1").await;
    p.pay(inv, "0.6").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.status(inv).await, "underpaid");
    p.pay(inv, "0.4").await;
    p.mine_and_step("bitcoin", 1).await;
    assert_eq!(p.status(inv).await, "underpaid", "an unconfirmed top-up does not move it");
    p.mine_and_step("bitcoin", 2).await;
    assert_eq!(p.status(inv).await, "paid");
    assert_eq!(p.get_invoice(inv).await["amount_paid"], "1");
    assert_eq!(
        p.events(inv).await,
        ["invoice.confirming", "invoice.underpaid", "balance.credited", "invoice.paid", "balance.credited"]
            .map(String::from)
    );

    let over = p.invoice("BTC", "bitcoin", "1").await;
    p.pay(over, "1.5").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.status(over).await, "overpaid");
    assert_eq!(p.balance("bitcoin").await, (d("2.5"), d("0")));
    p.assert_ledger("bitcoin").await;

    // A 1% tolerance: 0.995 of 1 is paid.
    let p = pipe().await;
    let m = domain::merchants::create_merchant(
        &p.app.state.db,
        "Tolerant",
        &domain::merchants::MerchantSettings { underpayment_tolerance_percent: d("1"), ..Default::default() },
    )
    .await
    .unwrap();
    let key = p.app.key(m.id, Environment::Test, &[]).await;
    let inv = p.app.create_invoice(&key, json!({"currency": "BTC", "amount": "1"})).await;
    let r = p.app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": inv["id"], "amount": "0.995"})).await;
    assert_eq!(r.status.as_u16(), 201);
    p.mine_and_step("bitcoin", 3).await;
    let got = p.app.get(&format!("/v1/invoices/{}", inv["id"].as_str().unwrap()), Some(&key)).await;
    assert_eq!(got.data()["status"], "paid");
}

#[tokio::test]
async fn expiry_late_deposits_and_draft_expiry() {
    let p = pipe().await;
    let inv = p.invoice("USDT", "tron", "10").await;
    force_expired(&p, inv).await;
    let report = p.sweep(Duration::from_secs(30)).await;
    assert_eq!(report.expired, 1);
    assert_eq!(p.status(inv).await, "expired");
    assert_eq!(p.sweep(Duration::from_secs(30)).await.expired, 0);
    // A deposit after expiry: recorded and credited, status unchanged, late_deposit.
    p.pay(inv, "10").await;
    p.mine_and_step("tron_usdt", 19).await;
    p.assert_state(inv, "expired", "tron_usdt", ("10", "0")).await;
    assert_eq!(p.events(inv).await, ["invoice.expired", "invoice.late_deposit", "balance.credited"].map(String::from));

    // A deposit seen after expires_at but before the sweeper ran: expired first, then late.
    let (inv, _) = p.paid_invoice("USDT", "tron", "10").await;
    force_expired(&p, inv).await;
    p.mine_and_step("tron_usdt", 19).await;
    assert_eq!(p.status(inv).await, "expired");
    assert_eq!(p.events(inv).await, ["invoice.expired", "invoice.late_deposit", "balance.credited"].map(String::from));

    // Drafts expire at draft_expires_at.
    let draft =
        p.app.create_invoice(&p.key, json!({"amount_fiat": "10", "fiat_currency": "USD", "is_deferred": true})).await;
    let draft: Uuid = draft["id"].as_str().unwrap().parse().unwrap();
    set_time(&p, draft, entity::invoice::Column::DraftExpiresAt).await;
    assert_eq!(p.sweep(Duration::from_secs(30)).await.drafts_expired, 1);
    assert_eq!(p.status(draft).await, "expired");
    assert_eq!(p.events(draft).await, ["invoice.draft_expired"]);
    p.assert_ledger("tron_usdt").await;
}

#[tokio::test]
async fn reversals_before_and_after_credit() {
    let p = pipe().await;
    // Before confirmation: back to pending, the pending amount disappears.
    let (inv, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 1).await;
    p.assert_state(inv, "confirming", "ethereum", ("0", "1")).await;
    p.reverse_and_step(&dep).await;
    p.assert_state(inv, "pending", "ethereum", ("0", "0")).await;
    assert_eq!(p.get_invoice(inv).await["payments"][0]["status"], "reversed");
    assert_eq!(p.events(inv).await, ["invoice.confirming", "invoice.deposit_reversed"]);

    // After credit: the credit is taken back and the invoice becomes invalid.
    let (inv, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 12).await;
    p.assert_state(inv, "paid", "ethereum", ("1", "0")).await;
    p.reverse_and_step(&dep).await;
    p.assert_state(inv, "invalid", "ethereum", ("0", "0")).await;
    assert_eq!(
        p.events(inv).await,
        ["invoice.confirming", "invoice.paid", "balance.credited", "invoice.deposit_reversed", "invoice.invalid"]
            .map(String::from)
    );
    // Nothing is left to refund.
    assert_eq!(testkit::invoice_credit(&p.app.state.db, inv, "ethereum").await.credited.0, Decimal::ZERO);

    // After credit and a payout of the funds: the merchant owes the reversed amount.
    let (_, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 12).await;
    let payout = json!({"currency": "ETH", "network": "ethereum", "amount": "0.9995", "destination": "0x52908400098527886E0F7030069857D2E4169EE7"});
    let r = p.app.post("/v1/payouts", Some(&p.key), &payout).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    p.reverse_and_step(&dep).await;
    assert_eq!(p.balance("ethereum").await, (d("-0.9995"), d("0")));
    p.assert_ledger("ethereum").await;
    // A reversal seen twice is applied once.
    p.step().await;
    assert_eq!(p.balance("ethereum").await, (d("-0.9995"), d("0")));
}

#[tokio::test]
async fn unconfirmed_past_the_monitoring_window_is_invalid_but_still_credited_later() {
    let p = pipe_with(|c| c.pipeline.monitor_window_secs = 0).await;
    let (inv, _) = p.paid_invoice("BTC", "bitcoin", "0.5").await;
    p.mine_and_step("bitcoin", 1).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    p.step().await;
    assert_eq!(p.status(inv).await, "invalid");
    p.mine_and_step("bitcoin", 2).await;
    p.assert_state(inv, "invalid", "bitcoin", ("0.5", "0")).await;
    assert_eq!(
        p.events(inv).await,
        ["invoice.confirming", "invoice.invalid", "invoice.late_deposit", "balance.credited"].map(String::from)
    );
}

#[tokio::test]
async fn static_address_deposits_create_invoices() {
    let p = pipe().await;
    let a = p.app.post("/v1/addresses", Some(&p.key), &json!({"currency": "USDT", "network": "tron"})).await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.body);
    let id = a.data()["id"].as_str().unwrap().to_owned();
    p.deposit(json!({"address_id": id}), "25").await;
    p.deposit(json!({"address_id": id}), "5.5").await;
    p.mine("tron_usdt", 19).await;
    assert_eq!(p.step().await.len(), 2);
    p.step().await;
    let addr = p.app.get(&format!("/v1/addresses/{id}"), Some(&p.key)).await;
    assert_eq!(addr.data()["invoice_count"], 2);
    assert_eq!(addr.data()["total_received"], "30.5");
    let invs = p.app.get(&format!("/v1/addresses/{id}/invoices"), Some(&p.key)).await;
    let list = invs.data().as_array().unwrap().clone();
    assert_eq!(list.len(), 2);
    for inv in &list {
        assert_eq!(inv["status"], "paid");
        assert_eq!(inv["source"], "static_address");
        assert_eq!(inv["static_address_id"], json!(id));
    }
    assert_eq!(p.balance("tron_usdt").await, (d("30.5"), d("0")));
    p.assert_ledger("tron_usdt").await;
}

#[tokio::test]
async fn concurrent_scanners_and_trackers_record_and_credit_once() {
    let p = pipe().await;
    let inv = p.invoice("USDT", "tron", "100").await;
    for _ in 0..5 {
        p.pay(inv, "20").await;
    }
    p.mine("tron_usdt", 19).await;
    let db = p.app.state.db.clone();
    let chain = p.chains.get(Environment::Test, "tron_usdt").unwrap();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (db, chain) = (db.clone(), chain.clone());
        set.spawn(async move {
            let mut n = 0;
            while let Some(r) = scanner::scan_gate(&db, chain.as_ref(), Environment::Test, 1).await.unwrap() {
                n += r.recorded.len();
            }
            n
        });
    }
    let mut recorded = 0;
    while let Some(n) = set.join_next().await {
        recorded += n.unwrap();
    }
    assert_eq!(recorded, 5);
    let payments = entity::payment::Entity::find().all(&db).await.unwrap();
    assert_eq!(payments.len(), 5);
    let cfg = p.app.state.config.pipeline.clone();
    let mut set = tokio::task::JoinSet::new();
    for pay in payments.iter().chain(payments.iter()).chain(payments.iter()) {
        let (db, chains, cfg, id) = (db.clone(), p.chains.clone(), cfg.clone(), pay.id);
        set.spawn(async move { tracker::track_payment(&db, &chains, &cfg, id).await.unwrap() });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    p.assert_state(inv, "paid", "tron_usdt", ("100", "0")).await;
    let credited =
        event::Entity::find().filter(event::Column::EventType.eq("balance.credited")).all(&db).await.unwrap();
    assert_eq!(credited.len(), 5);
    let paid = event::Entity::find().filter(event::Column::EventType.eq("invoice.paid")).all(&db).await.unwrap();
    assert_eq!(paid.len(), 1);
    p.assert_ledger("tron_usdt").await;
}

#[tokio::test]
async fn sweeper_finds_payments_nobody_tracks() {
    let p = pipe().await;
    p.paid_invoice("USDT", "tron", "1").await;
    // Scanned, but the hand-over to tracking was lost (a crash between commit and enqueue).
    let recorded = p.mine_and_scan("tron_usdt", 1, 100).await;
    // Seen just now: not stale yet; once `stale_after` passed without a check, it is.
    assert!(p.sweep(Duration::from_secs(30)).await.stale_payments.is_empty());
    let report = p.sweep(Duration::ZERO).await;
    assert_eq!(report.stale_payments, recorded);
    // Once tracked, its job chain has a check scheduled: not stale until that check is overdue
    // by `stale_after` (a lost recheck); once final it is never listed.
    p.step().await;
    assert!(p.sweep(Duration::from_secs(30)).await.stale_payments.is_empty());
    assert!(p.sweep(Duration::ZERO).await.stale_payments.is_empty());
    entity::payment::Entity::update_many()
        .col_expr(
            entity::payment::Column::NextCheckAt,
            sea_orm::sea_query::Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)),
        )
        .exec(&p.app.state.db)
        .await
        .unwrap();
    assert!(p.sweep(Duration::from_secs(30)).await.stale_payments.is_empty());
    assert_eq!(p.sweep(Duration::ZERO).await.stale_payments, recorded);
    p.mine_and_step("tron_usdt", 40).await;
    assert!(p.sweep(Duration::ZERO).await.stale_payments.is_empty());
}

/// A tracker killed after storing a payment's confirmations but before crediting it: the
/// payment looks deep enough to be final, yet it is unconfirmed. The sweeper must still bring it
/// back, and the next track credits it.
#[tokio::test]
async fn sweeper_recovers_a_payment_whose_tracker_died_before_crediting() {
    use sea_orm::sea_query::Expr;
    let p = pipe().await;
    let (inv, _) = p.paid_invoice("USDT", "tron", "1").await;
    let recorded = p.mine_and_scan("tron_usdt", 100, 500).await;
    entity::payment::Entity::update_many()
        .col_expr(entity::payment::Column::Confirmations, Expr::value(95))
        .col_expr(entity::payment::Column::CheckedAt, Expr::value(chrono::Utc::now() - chrono::Duration::hours(1)))
        .exec(&p.app.state.db)
        .await
        .unwrap();
    let report = p.sweep(Duration::from_secs(30)).await;
    assert_eq!(report.stale_payments, recorded);
    let cfg = &p.app.state.config.pipeline;
    tracker::track_payment(&p.app.state.db, &p.chains, cfg, recorded[0]).await.unwrap();
    assert_eq!(p.status(inv).await, "paid");
}

#[tokio::test]
async fn test_helpers_are_for_test_keys_only() {
    let p = pipe().await;
    let inv = p.invoice("USDT", "tron", "1").await;
    let live = p.app.key(p.merchant, Environment::Live, &[]).await;
    for (path, body) in [
        ("/v1/test/deposits", json!({"invoice_id": inv, "amount": "1"})),
        ("/v1/test/blocks", json!({"currency": "tron_usdt", "count": 1})),
        (&format!("/v1/test/deposits/{}/reverse", Uuid::now_v7()) as &str, json!({})),
    ] {
        p.app.post(path, Some(&live), &body).await.assert_error(404, "not_found", None);
    }
    let k = &p.key;
    p.app.post("/v1/test/deposits", Some(k), &json!({"amount": "1"})).await.assert_error(
        422,
        "validation_error",
        Some("invoice_id"),
    );
    let a = p.app.post("/v1/addresses", Some(k), &json!({"currency": "BTC"})).await.data()["id"].clone();
    p.app
        .post("/v1/test/deposits", Some(k), &json!({"invoice_id": inv, "address_id": a, "amount": "1"}))
        .await
        .assert_error(422, "validation_error", Some("invoice_id"));
    p.app.post("/v1/test/deposits", Some(k), &json!({"invoice_id": inv, "amount": "0"})).await.assert_error(
        422,
        "validation_error",
        Some("amount"),
    );
    p.app.post("/v1/test/deposits", Some(k), &json!({"invoice_id": inv, "amount": "1.0000001"})).await.assert_error(
        422,
        "validation_error",
        Some("amount"),
    );
    p.app.post("/v1/test/blocks", Some(k), &json!({"currency": "tron_usdt", "count": 0})).await.assert_error(
        422,
        "validation_error",
        Some("count"),
    );
    // Another merchant can neither pay into nor reverse this merchant's deposits.
    let other = p.app.key(p.app.merchant().await, Environment::Test, &[]).await;
    p.app.post("/v1/test/deposits", Some(&other), &json!({"invoice_id": inv, "amount": "1"})).await.assert_error(
        404,
        "not_found",
        None,
    );
    let dep = p.pay(inv, "1").await;
    p.app
        .post(&format!("/v1/test/deposits/{}/reverse", dep["id"].as_str().unwrap()), Some(&other), &json!({}))
        .await
        .assert_error(404, "not_found", None);
    // A named tx hash with two outputs.
    let a1 = p.deposit(json!({"invoice_id": inv, "tx_hash": "abc"}), "0.5").await;
    let a2 = p.deposit(json!({"invoice_id": inv, "tx_hash": "abc"}), "0.5").await;
    assert_eq!((a1["output_index"].as_i64(), a2["output_index"].as_i64()), (Some(0), Some(1)));
    // A draft has no address to pay yet.
    let draft =
        p.app.create_invoice(k, json!({"amount_fiat": "10", "fiat_currency": "USD", "is_deferred": true})).await;
    p.app.post("/v1/test/deposits", Some(k), &json!({"invoice_id": draft["id"], "amount": "1"})).await.assert_error(
        422,
        "validation_error",
        Some("invoice_id"),
    );
}

/// A load generator's bulk payment (`SandboxChain::deposit_many`, behind `bench-pipeline
/// --sustained`): every transfer is its own transaction in the next block, each recorded and
/// credited once, like deposits one at a time.
#[tokio::test]
async fn bulk_sandbox_deposits_land_in_one_block_and_credit_each_once() {
    let p = pipe().await;
    let gate = domain::gates::find("bitcoin").unwrap();
    let invoices = [p.invoice("BTC", "bitcoin", "0.001").await, p.invoice("BTC", "bitcoin", "0.002").await];
    let mut payments = Vec::new();
    for (inv, amount) in invoices.iter().zip(["0.001", "0.002"]) {
        payments.push((p.address_key(*inv).await, d(amount)));
    }
    let chain = domain::chain::sandbox::SandboxChain::new(p.app.state.db.clone(), gate, 0);
    let block = chain.deposit_many(&payments).await.unwrap();
    let transfers = entity::sandbox_transfer::Entity::find().all(&p.app.state.db).await.unwrap();
    assert_eq!(transfers.len(), 2);
    assert!(transfers.iter().all(|t| t.block_height == block && t.output_index == 0));
    assert_ne!(transfers[0].tx_hash, transfers[1].tx_hash, "one transaction per payer");
    p.mine_and_step("bitcoin", gate.confirmations.into()).await;
    for inv in invoices {
        assert_eq!(p.status(inv).await, "paid");
    }
    assert_eq!(p.balance("bitcoin").await, (d("0.003"), d("0")));
    p.assert_ledger("bitcoin").await;
}

/// The scanner's hand-over (`TrackDue`): every payment its blocks completed confirmed in one
/// transaction, two payments of one invoice and two merchants' balances among them, each
/// credited once, and a replay of the same hand-over changes nothing.
#[tokio::test]
async fn a_hand_over_confirms_its_payments_together_and_credits_each_once() {
    let p = pipe().await;
    let db = &p.app.state.db;
    let (a, b) = (p.invoice("BTC", "bitcoin", "1").await, p.invoice("BTC", "bitcoin", "0.5").await);
    let (other, other_key) = p.app.test_key().await;
    let c = p.app.create_invoice_id(&other_key, json!({"currency": "BTC", "amount": "2"})).await;
    p.pay(a, "0.4").await;
    p.pay(a, "0.6").await;
    p.pay(b, "0.5").await;
    let r = p.app.post("/v1/test/deposits", Some(&other_key), &json!({"invoice_id": c, "amount": "1"})).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    let recorded = p.mine_and_scan("bitcoin", 3, 100).await;
    assert_eq!(recorded.len(), 4);
    let cfg = &p.app.state.config.pipeline;
    for round in 0..2 {
        let (tracked, failed) = tracker::track_due(db, &p.chains, cfg, &recorded).await;
        assert!(failed.is_none(), "round {round}: {failed:?}");
        assert_eq!(tracked.len(), 4);
        // Confirmed, each is watched for reversal until its final depth (6 blocks): the scan of
        // that block hands it over again. A replay (two scans of one gate both hand over the
        // blocks they peeked at) finds it confirmed with its next look stored and starts no job.
        assert!(tracked.iter().all(|(_, next)| *next == Next::AwaitsHandOver), "round {round}: {tracked:?}");
        for id in &recorded {
            let row = entity::payment::Entity::find_by_id(*id).one(db).await.unwrap().unwrap();
            // A stored next look (the sweeper's backstop), no job chain.
            assert!(row.next_check_at.is_some() && row.track_token.is_none(), "round {round}: {row:?}");
        }
        if round == 0 {
            // Awaiting the final-depth hand-over, none is stale; should it be lost, the sweeper
            // takes each once its stored look is overdue.
            assert!(p.sweep(Duration::ZERO).await.stale_payments.is_empty());
            let past = sea_orm::sea_query::Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1));
            entity::payment::Entity::update_many()
                .col_expr(entity::payment::Column::NextCheckAt, past)
                .exec(db)
                .await
                .unwrap();
            assert_eq!(p.sweep(Duration::ZERO).await.stale_payments.len(), 4);
        }
        let theirs = entity::invoice::Entity::find_by_id(c).one(db).await.unwrap().unwrap();
        assert_eq!(
            (p.status(a).await, p.status(b).await, theirs.status),
            ("paid".into(), "paid".into(), entity::InvoiceStatus::Underpaid),
            "round {round}"
        );
        assert_eq!(p.balance("bitcoin").await, (d("1.5"), d("0")), "round {round}");
        let (theirs, _) = testkit::assert_ledger_sums(db, other, "bitcoin").await;
        assert_eq!((theirs.available.0, theirs.pending.0), (d("1"), d("0")), "round {round}");
        let credited =
            event::Entity::find().filter(event::Column::EventType.eq("balance.credited")).all(db).await.unwrap();
        assert_eq!(credited.len(), 4, "round {round}: one balance.credited per payment");
        let cap = entity::invoice_credit::Entity::find_by_id((a, "bitcoin".to_owned())).one(db).await.unwrap().unwrap();
        assert_eq!(cap.credited.0, d("1"), "round {round}: both payments of invoice a count towards its refund cap");
        p.assert_ledger("bitcoin").await;
    }
    // The block that completes their final depth: handed over, looked at, and watched no more.
    p.mine("bitcoin", 2).await;
    assert!(p.mine_and_scan("bitcoin", 1, 100).await.is_empty());
    let chain = p.chains.get(Environment::Test, "bitcoin").unwrap();
    let mut at_final = scanner::due_payments(db, Environment::Test, chain.gate(), 1, 100).await.unwrap();
    at_final.sort();
    let mut all = recorded.clone();
    all.sort();
    assert_eq!(at_final, all);
    let (tracked, failed) = tracker::track_due(db, &p.chains, cfg, &at_final).await;
    assert!(failed.is_none(), "{failed:?}");
    assert!(tracked.iter().all(|(_, next)| *next == Next::Done), "{tracked:?}");
    for id in &recorded {
        let row = entity::payment::Entity::find_by_id(*id).one(db).await.unwrap().unwrap();
        assert_eq!((row.confirmations, row.track_token, row.next_check_at), (6, None, None));
    }
    assert_eq!(p.balance("bitcoin").await, (d("1.5"), d("0")));
    // Confirmed together, an invoice's payments count together: it is paid once, at the first.
    assert_eq!(p.events(a).await, ["invoice.confirming", "invoice.paid", "balance.credited", "balance.credited"]);
}

#[tokio::test]
async fn the_sandbox_answers_a_batch_of_looks_each_in_its_place() {
    use workers::chain::{Look, TxStatus};
    let p = pipe().await;
    let (_, deep) = p.paid_invoice("BTC", "bitcoin", "1").await;
    p.mine("bitcoin", 2).await;
    let (_, reversed) = p.paid_invoice("BTC", "bitcoin", "0.5").await;
    p.mine("bitcoin", 1).await;
    p.reverse_and_step(&reversed).await;
    let (_, unmined) = p.paid_invoice("BTC", "bitcoin", "0.25").await;
    fn look(d: &Value) -> Look<'_> {
        Look {
            tx_hash: d["tx_hash"].as_str().unwrap(),
            output_index: d["output_index"].as_i64().unwrap(),
            seen_at: None,
        }
    }
    let mut looks = vec![look(&deep), look(&reversed), look(&unmined), look(&deep)];
    looks.push(Look { tx_hash: "no-such-transfer", output_index: 0, seen_at: None });
    looks.push(Look { output_index: 1, ..look(&deep) });
    let chain = p.chains.get(Environment::Test, "bitcoin").unwrap();
    let batch: Vec<TxStatus> = chain.statuses(&looks).await.into_iter().map(Result::unwrap).collect();
    let expected = [
        TxStatus::Confirmations(3),
        TxStatus::Gone,
        TxStatus::Confirmations(0),
        TxStatus::Confirmations(3),
        TxStatus::Gone,
        TxStatus::Gone,
    ];
    assert_eq!(batch, expected);
    // The same answers as the looks one by one.
    for (l, want) in looks.iter().zip(expected) {
        assert_eq!(chain.status(l.tx_hash, l.output_index, l.seen_at).await.unwrap(), want, "{l:?}");
    }
}

#[tokio::test]
async fn a_timed_sandbox_says_when_its_next_block_is_due() {
    use domain::chain::sandbox::SandboxChain;
    use workers::chain::Chain;
    let p = pipe().await;
    let gate = domain::gates::find("bitcoin").unwrap();
    // The suite's chains move only when mined: no block is ever due by time.
    assert_eq!(p.chains.get(Environment::Test, "bitcoin").unwrap().next_block_at().await, None);
    let timed = SandboxChain::new(p.app.state.db.clone(), gate, 200);
    let before = chrono::Utc::now();
    let at = Chain::next_block_at(&timed).await.expect("a timed chain knows its next block");
    let after = chrono::Utc::now();
    assert!(at > before && at <= after + chrono::Duration::milliseconds(200), "{before} < {at} <= {after} + 200 ms");
    // Once the tip has grown by that block, the next one is due later.
    let tip = timed.tip().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while timed.tip().await.unwrap() == tip {
        assert!(std::time::Instant::now() < deadline, "the timed chain never grew");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(chrono::Utc::now() >= at, "a block came before it was due");
    assert!(Chain::next_block_at(&timed).await.unwrap() > at);
}

/// Tracking ends at a defined depth (`pipeline::final_depth`) on the sandbox chains, as on the
/// live ones: a bitcoin payment (3 confirmations) is watched for a reversal until 6, then never
/// looked at again; a Solana payment (`finalized`) and an XRP one (a validated ledger) are final
/// once confirmed, and left alone from then on.
#[tokio::test]
async fn sandbox_tracking_ends_at_each_gates_final_depth() {
    let p = pipe().await;
    let (btc, _) = p.paid_invoice("BTC", "bitcoin", "0.5").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.status(btc).await, "paid");
    assert!(p.payment_of(btc).await.next_check_at.is_some(), "watched for a reversal until 6 confirmations");
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.payment_of(btc).await.confirmations, 6);
    p.assert_tracking_ended(btc, "bitcoin", 3).await;
    for (currency, gate) in [("SOL", "solana"), ("XRP", "xrp")] {
        let (inv, _) = p.paid_invoice(currency, gate, "1").await;
        p.mine_and_step(gate, 1).await;
        assert_eq!(p.status(inv).await, "paid", "{gate}");
        p.assert_tracking_ended(inv, gate, 3).await;
    }
}

/// `invoice.deposit_reversed` carries the invoice's status after the reversal (PRODUCT.md):
/// `pending` when its only unconfirmed deposit goes, `expired` when that happens past its window
/// (announced with `invoice.expired` too), `invalid` after credit.
#[tokio::test]
async fn a_reversal_announces_the_status_it_leaves_the_invoice_in() {
    let p = pipe().await;
    let status_in = async |inv: Uuid, event_type: &str| -> Vec<Value> {
        let rows = event::Entity::find()
            .filter(event::Column::InvoiceId.eq(inv))
            .filter(event::Column::EventType.eq(event_type))
            .all(&p.app.state.db)
            .await
            .unwrap();
        rows.into_iter().map(|e| e.payload["status"].clone()).collect()
    };
    // Its only unconfirmed deposit reversed: back to pending.
    let (inv, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 1).await;
    p.reverse_and_step(&dep).await;
    assert_eq!(p.status(inv).await, "pending");
    assert_eq!(p.events(inv).await, ["invoice.confirming", "invoice.deposit_reversed"]);
    assert_eq!(status_in(inv, "invoice.deposit_reversed").await, ["pending"]);

    // The same past the invoice's window: expired, and announced as such.
    let (late, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 1).await;
    force_expired(&p, late).await;
    p.reverse_and_step(&dep).await;
    assert_eq!(p.status(late).await, "expired");
    assert_eq!(p.events(late).await, ["invoice.confirming", "invoice.deposit_reversed", "invoice.expired"]);
    assert_eq!(status_in(late, "invoice.deposit_reversed").await, ["expired"]);
    assert_eq!(status_in(late, "invoice.expired").await, ["expired"]);

    // After credit: invalid.
    let (paid, dep) = p.paid_invoice("ETH", "ethereum", "1").await;
    p.mine_and_step("ethereum", 12).await;
    p.reverse_and_step(&dep).await;
    assert_eq!(p.status(paid).await, "invalid");
    assert_eq!(status_in(paid, "invoice.deposit_reversed").await, ["invalid"]);
    assert_eq!(status_in(paid, "invoice.invalid").await, ["invalid"]);
    p.assert_ledger("ethereum").await;
}
