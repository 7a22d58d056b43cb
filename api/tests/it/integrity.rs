//! PostgreSQL enforces what the code assumes (migration `m20261123_000013_integrity`): every
//! CHECK constraint refuses a bad write, and ledger entries can be neither updated nor deleted.
//! SQLite has no such constraints (money is TEXT there), so this suite runs with `pg-tests`
//! (its `mod` in `main.rs` is gated on the feature).

use sea_orm::{ActiveModelTrait, ConnectionTrait, EntityTrait, IntoActiveModel, TransactionTrait};
use serde_json::json;
use testkit::{TestApp, credit_invoice};
use uuid::Uuid;

const TRON_DEST: &str = "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7";

/// (table, constraint, a bad assignment). The probe copies one existing row, applies the
/// assignment and inserts it back: only the named constraint may refuse it (CHECK constraints
/// are evaluated before unique indexes, and the error must name the constraint).
const BAD_WRITES: &[(&str, &str, &str)] = &[
    ("invoices", "ck_invoices_status", "status = 'bogus'"),
    ("invoices", "ck_invoices_environment", "environment = 'prod'"),
    ("invoices", "ck_invoices_amount_requested", "amount_requested = 0"),
    ("invoices", "ck_invoices_amount_paid", "amount_paid = -1"),
    ("payments", "ck_payments_status", "status = 'lost'"),
    ("payments", "ck_payments_environment", "environment = ''"),
    ("payments", "ck_payments_amount", "amount = 0"),
    ("payments", "ck_payments_credited_amount", "credited_amount = -5"),
    ("payments", "ck_payments_confirmations", "confirmations = -1"),
    ("balances", "ck_balances_pending", "pending = -0.000001"),
    ("balances", "ck_balances_reserved", "reserved = -1"),
    ("balances", "ck_balances_environment", "environment = 'staging'"),
    ("ledger_entries", "ck_ledger_entries_bucket", "bucket = 'elsewhere'"),
    ("ledger_entries", "ck_ledger_entries_type", "entry_type = 'gift'"),
    ("ledger_entries", "ck_ledger_entries_amount", "amount = 0"),
    ("payouts", "ck_payouts_status", "status = 'sent'"),
    ("payouts", "ck_payouts_amount", "amount = -1"),
    ("payouts", "ck_payouts_fees", "network_fee = -1"),
    ("payouts", "ck_payouts_allocation", "payout_fee_allocation = 'nobody'"),
    ("refunds", "ck_refunds_status", "status = 'done'"),
    ("refunds", "ck_refunds_amount", "merchant_debit_amount = 0"),
    ("refunds", "ck_refunds_fees", "refund_fee = -1"),
    ("invoice_credits", "ck_invoice_credits_amounts", "refunded = -1"),
    ("static_addresses", "ck_static_addresses_total", "total_received = -1"),
    ("webhook_deliveries", "ck_webhook_deliveries_status", "status = 'maybe'"),
    ("settlement_conversions", "ck_settlement_conversions_state", "state = 'pondering'"),
    ("settlement_conversions", "ck_settlement_conversions_source", "source_amount = 0"),
];

/// One row in every constrained table, written by the service code paths.
async fn populated() -> TestApp {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "USDT", "network": "tron", "amount": "100"})).await;
    let invoice = Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap();
    let payment = credit_invoice(&app, merchant, invoice, "tron_usdt", "100").await;
    let refund =
        json!({"invoice_id": invoice, "currency": "USDT", "network": "tron", "amount": "10", "destination": TRON_DEST});
    let r = app.post_idempotent("/v1/refunds", &key, "refund-1", &refund).await;
    assert_eq!(r.status, 201, "{}", r.body);
    app.create(
        "/v1/payouts",
        &key,
        json!({"currency": "USDT", "network": "tron", "amount": "20", "destination": TRON_DEST}),
    )
    .await;
    let r = app.post("/v1/addresses", Some(&key), &json!({"currency": "BTC"})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let db = &app.state.db;
    domain::events::emit(
        db,
        merchant.into(),
        entity::Environment::Test,
        domain::events::EventKind::InvoicePaid,
        format!("probe:{invoice}"),
        json!({}),
    )
    .await
    .unwrap();
    let event = entity::event::Entity::find().one(db).await.unwrap().expect("an event");
    domain::webhooks::dispatch::new_delivery(&event, None, chrono::Utc::now())
        .into_active_model()
        .insert(db)
        .await
        .unwrap();
    let now = chrono::Utc::now();
    entity::settlement_conversion::Model {
        payment_id: payment,
        invoice_id: invoice,
        merchant_id: merchant,
        environment: entity::Environment::Test,
        source_gate_id: "tron_usdt".into(),
        target_gate_id: "bitcoin".into(),
        source_amount: entity::Amount::new(rust_decimal::Decimal::ONE_HUNDRED),
        rate: None,
        target_gross_amount: None,
        fee_amount: None,
        net_amount: None,
        state: entity::ConversionState::Quoted,
        failure_class: None,
        venue: "sandbox".into(),
        venue_ref: None,
        quoted_at: Some(now),
        locked_until: Some(now),
        settled_at: None,
        created_at: now,
        updated_at: now,
    }
    .into_active_model()
    .insert(db)
    .await
    .unwrap();
    app
}

#[tokio::test]
async fn every_check_constraint_refuses_a_bad_write() {
    let app = populated().await;
    let db = &app.state.db;
    for (table, constraint, assignment) in BAD_WRITES {
        let txn = db.begin().await.unwrap();
        txn.execute_unprepared(&format!("CREATE TEMP TABLE probe ON COMMIT DROP AS SELECT * FROM {table} LIMIT 1"))
            .await
            .unwrap();
        let copied = txn.execute_unprepared(&format!("UPDATE probe SET {assignment}")).await.unwrap();
        assert_eq!(copied.rows_affected(), 1, "{table} has no row to probe");
        let err = txn
            .execute_unprepared(&format!("INSERT INTO {table} SELECT * FROM probe"))
            .await
            .expect_err(&format!("{table}: `{assignment}` was accepted"));
        assert!(err.to_string().contains(constraint), "{table}: `{assignment}` refused by something else: {err}");
        txn.rollback().await.unwrap();
        // The same bad value as an UPDATE of the live row is refused too (but for the
        // append-only ledger, whose trigger refuses any UPDATE first).
        if *table != "ledger_entries" {
            let err = db
                .execute_unprepared(&format!("UPDATE {table} SET {assignment}"))
                .await
                .expect_err(&format!("{table}: UPDATE `{assignment}` was accepted"));
            assert!(err.to_string().contains(constraint), "{table}: UPDATE `{assignment}`: {err}");
        }
    }
}

#[tokio::test]
async fn the_ledger_is_append_only() {
    let app = populated().await;
    let db = &app.state.db;
    let before = entity::ledger_entry::Entity::find().all(db).await.unwrap();
    assert!(!before.is_empty());
    for sql in [
        "UPDATE ledger_entries SET description = 'edited'",
        "UPDATE ledger_entries SET amount = amount * 2",
        "DELETE FROM ledger_entries",
    ] {
        let err = db.execute_unprepared(sql).await.expect_err(sql);
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let after = entity::ledger_entry::Entity::find().all(db).await.unwrap();
    assert_eq!(before, after, "nothing changed");
    // Appending still works: the services keep posting.
    let (merchant, _) = app.test_key().await;
    let bitcoin = domain::gates::find("bitcoin").unwrap();
    domain::ledger::adjust(db, merchant.into(), entity::Environment::Test, bitcoin, rust_decimal::Decimal::ONE, "test")
        .await
        .unwrap();
    assert_eq!(entity::ledger_entry::Entity::find().all(db).await.unwrap().len(), before.len() + 1);
}
