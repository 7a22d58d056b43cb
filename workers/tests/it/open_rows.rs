//! Work proportional to what is open: the invoice expiry sweeps and the webhook dispatcher read
//! their partial indexes (only pending invoices, drafts, undispatched events), as the database's
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
use workers::tracker::sweeper::{Expiry, expiring};

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
