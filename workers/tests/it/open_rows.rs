//! Work proportional to what is open: the invoice expiry sweeps, the payment sweep and the
//! webhook dispatcher read their partial indexes (only pending invoices, drafts, watched
//! payments, undispatched events), as the database's
//! own query plan shows, on SQLite and (feature `pg-tests`) on PostgreSQL, with a history of
//! closed rows beside the open ones.

use chrono::Utc;
use entity::{InvoiceStatus, invoice};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseBackend, EntityTrait, QueryFilter, QueryTrait, Statement, TransactionTrait,
};
use serde_json::json;
use testkit::TestApp;
use workers::tracker::sweeper::{Expiry, expiring, stale_payments};

/// The plan of `sql` as text: PostgreSQL's `EXPLAIN` (sequential scans off, so any usable index
/// shows) or SQLite's `EXPLAIN QUERY PLAN`.
async fn plan(app: &TestApp, sql: String) -> String {
    let db = &app.state.db;
    let backend = db.get_database_backend();
    let txn = db.begin().await.unwrap();
    let explain = match backend {
        DatabaseBackend::Postgres => {
            txn.execute_unprepared("SET LOCAL enable_seqscan = off").await.unwrap();
            format!("EXPLAIN {sql}")
        }
        _ => format!("EXPLAIN QUERY PLAN {sql}"),
    };
    let rows = txn.query_all_raw(Statement::from_string(backend, explain)).await.unwrap();
    let lines: Vec<String> = rows
        .iter()
        .map(|r| match backend {
            DatabaseBackend::Postgres => r.try_get::<String>("", "QUERY PLAN").unwrap(),
            _ => r.try_get::<String>("", "detail").unwrap(),
        })
        .collect();
    txn.rollback().await.unwrap();
    lines.join("\n")
}

#[tokio::test]
async fn the_sweeps_read_only_open_rows_through_their_partial_indexes() {
    let (app, _, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    let backend = db.get_database_backend();
    // A history: 60 invoices, all but two moved out of `pending` (as paid and expired ones are).
    let mut ids = Vec::new();
    for i in 0..60 {
        ids.push(app.create_invoice_id(&key, json!({"currency": "BTC", "amount": format!("0.{:04}", i + 1)})).await);
    }
    invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(InvoiceStatus::Expired.as_str()))
        .filter(invoice::Column::Id.is_in(ids[2..].to_vec()))
        .exec(db)
        .await
        .unwrap();
    if backend == DatabaseBackend::Postgres {
        db.execute_unprepared("ANALYZE invoices").await.unwrap();
    }
    let now = Utc::now() + chrono::Duration::days(365);
    let pending = plan(&app, expiring(Expiry::Pending, now).build(backend).to_string()).await;
    assert!(pending.contains("idx_invoices_pending_expiry"), "the expiry sweep's plan:\n{pending}");
    let drafts = plan(&app, expiring(Expiry::Draft, now).build(backend).to_string()).await;
    assert!(drafts.contains("idx_invoices_draft_expiry"), "the draft sweep's plan:\n{drafts}");
    let dispatch = plan(&app, domain::webhooks::dispatch::undispatched(100).build(backend).to_string()).await;
    assert!(dispatch.contains("idx_events_undispatched"), "the dispatcher's plan:\n{dispatch}");
    let watched = plan(&app, stale_payments(Utc::now()).build(backend).to_string()).await;
    assert!(watched.contains("idx_payments_watched"), "the payment sweep's plan:\n{watched}");
    let mail = plan(&app, workers::deliverer::mail::due_query(now, 50).build(backend).to_string()).await;
    assert!(mail.contains("idx_invoices_email_open"), "the payer e-mail sweep's plan:\n{mail}");
    let convert = plan(&app, workers::converter::due_query(100).build(backend).to_string()).await;
    assert!(convert.contains("idx_payments_uncredited_open"), "the converter's plan:\n{convert}");

    // And the sweep expires exactly the open ones that are due.
    let past = Utc::now() - chrono::Duration::minutes(1);
    invoice::Entity::update_many()
        .col_expr(invoice::Column::ExpiresAt, Expr::value(past))
        .filter(invoice::Column::Id.is_in(ids.clone()))
        .exec(db)
        .await
        .unwrap();
    let report = workers::tracker::sweeper::sweep(db, std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!(report.expired, 2);
    let expired = testkit::event_payloads(db, "invoice.expired").await;
    assert_eq!(expired.len(), 2);
}

#[tokio::test]
async fn the_deliverers_reads_of_open_deliveries_use_their_partial_indexes() {
    use domain::webhooks::dispatch::{new_delivery, open_with_keys};
    use entity::{DeliveryStatus, Environment, event, webhook_delivery};
    use workers::deliverer::{claim_update, earlier_open, stale_query};

    let app = TestApp::spawn().await;
    let db = &app.state.db;
    let backend = db.get_database_backend();
    let merchant = app.merchant().await;
    let now = Utc::now();
    // A history: 120 deliveries about 6 invoices: two due now, 18 retrying later, the rest delivered.
    let keys: Vec<uuid::Uuid> = (0..6).map(|_| uuid::Uuid::now_v7()).collect();
    let events: Vec<event::Model> = (0..120)
        .map(|i| event::Model::new(merchant, Environment::Test, "invoice.paid", format!("k{i}"), json!({}), now))
        .collect();
    event::Entity::insert_many(events.iter().cloned().map(event::ActiveModel::from))
        .exec_without_returning(db)
        .await
        .unwrap();
    let deliveries: Vec<webhook_delivery::Model> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut d = new_delivery(e, None, now);
            d.order_key = Some(keys[i % keys.len()]);
            if (2..20).contains(&i) {
                d.status = DeliveryStatus::Retrying;
                d.next_attempt_at = now + chrono::Duration::hours(1);
            } else if i >= 20 {
                d.status = DeliveryStatus::Succeeded;
                d.delivered_at = Some(now);
            }
            d
        })
        .collect();
    webhook_delivery::Entity::insert_many(deliveries.iter().cloned().map(webhook_delivery::ActiveModel::from))
        .exec_without_returning(db)
        .await
        .unwrap();
    if backend == DatabaseBackend::Postgres {
        db.execute_unprepared("ANALYZE webhook_deliveries").await.unwrap();
    }
    let stale = plan(&app, stale_query(now, now, 100).build(backend).to_string()).await;
    assert!(stale.contains("idx_webhook_deliveries_open"), "the stale delivery sweep's plan:\n{stale}");
    let mut waiting = deliveries[1].clone();
    waiting.wait_for_earlier = true;
    let earlier = plan(&app, earlier_open(&waiting).unwrap().build(backend).to_string()).await;
    assert!(earlier.contains("idx_webhook_deliveries_open"), "the look for an earlier open delivery:\n{earlier}");
    let marking = plan(&app, open_with_keys([keys[0]]).build(backend).to_string()).await;
    assert!(marking.contains("idx_webhook_deliveries_open"), "the dispatcher's marking of waiting ones:\n{marking}");
    let claim = plan(&app, claim_update(vec![waiting.id], now, now, true).build(backend).to_string()).await;
    assert!(claim.contains("idx_webhook_deliveries_open"), "the ordered claim's guard:\n{claim}");
}

#[tokio::test]
async fn the_scanners_look_at_the_payments_of_its_blocks_reads_only_watched_ones() {
    use entity::{Amount, Environment, PaymentStatus, payment};
    use rust_decimal::Decimal;

    let (app, _, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    let backend = db.get_database_backend();
    let gate = domain::gates::find("bitcoin").unwrap();
    let required = i32::try_from(gate.confirmations).unwrap();
    // A history: 40 payments of the gate at final depth, two still confirming.
    let mut rows = Vec::new();
    for i in 0..42 {
        let invoice =
            app.create_invoice_id(&key, json!({"currency": "BTC", "amount": format!("0.{:04}", i + 1)})).await;
        let mut p = payment::Model::detected(
            invoice,
            Environment::Test,
            gate.id.to_owned(),
            format!("tx{i}"),
            0,
            Amount::new(Decimal::new(i + 1, 4)),
            Utc::now(),
        );
        p.block_height = Some(100 + i);
        p.required_confirmations = required;
        if i >= 2 {
            p.status = PaymentStatus::Confirmed;
            p.confirmations = required * 2 + 5;
        }
        rows.push(payment::ActiveModel::from(p));
    }
    payment::Entity::insert_many(rows).exec_without_returning(db).await.unwrap();
    if backend == DatabaseBackend::Postgres {
        db.execute_unprepared("ANALYZE payments").await.unwrap();
    }
    let due = workers::scanner::due_payments_query(Environment::Test, gate, 100, 110).build(backend).to_string();
    let due = plan(&app, due).await;
    assert!(due.contains("idx_payments_watched_heights"), "the scan's due payments:\n{due}");
    let depths = domain::payments::tracking::refresh_depths_update(Environment::Test, gate.id, 110);
    let depths = plan(&app, depths.build(backend).to_string()).await;
    assert!(depths.contains("idx_payments_watched_heights"), "the scan's depth refresh:\n{depths}");
    // And the two confirming ones are the ones handed over once their blocks complete them.
    let completes = 100 + i64::from(required) - 1;
    let ids = workers::scanner::due_payments(db, Environment::Test, gate, completes as u64, completes as u64 + 1)
        .await
        .unwrap();
    assert_eq!(ids.len(), 2, "{ids:?}");
}
