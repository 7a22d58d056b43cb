//! The scan's guarded move of invoices to `confirming` returns what their events read of them
//! (`InvoiceFacts`, eleven columns by position), equal to the same facts taken from the whole
//! row after the move, on SQLite and (feature `pg-tests`) PostgreSQL; a second move finds
//! nothing to move.

use chrono::Utc;
use domain::events::InvoiceFacts;
use entity::{InvoiceId, InvoiceStatus, invoice};
use sea_orm::EntityTrait;
use serde_json::json;
use testkit::TestApp;

#[tokio::test]
async fn a_deposit_moves_pending_invoices_once_and_returns_their_facts_as_the_rows_hold_them() {
    let (app, _, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    let a = app.create_invoice_id(&key, json!({"currency": "BTC", "amount": "0.25", "external_id": "order-7"})).await;
    let b = app.create_invoice_id(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "1.5"})).await;
    let ids = [InvoiceId::from(a), InvoiceId::from(b)];

    let mut moved = domain::invoices::lifecycle::see_deposits(db, &ids, Utc::now()).await.unwrap();
    moved.sort_by_key(|f| f.id);
    let mut rows = [
        invoice::Entity::find_by_id(a).one(db).await.unwrap().unwrap(),
        invoice::Entity::find_by_id(b).one(db).await.unwrap().unwrap(),
    ];
    rows.sort_by_key(|r| r.id);
    assert!(rows.iter().all(|r| r.status == InvoiceStatus::Confirming));
    let from_rows: Vec<InvoiceFacts> = rows.iter().map(InvoiceFacts::from).collect();
    assert_eq!(moved, from_rows, "the returned facts are the rows' after the move");
    assert_eq!(moved.iter().find(|f| f.id == a).unwrap().external_id.as_deref(), Some("order-7"));
    assert_eq!(moved[0].data(None), domain::events::invoice_data(&rows[0], None));

    let again = domain::invoices::lifecycle::see_deposits(db, &ids, Utc::now()).await.unwrap();
    assert!(again.is_empty(), "a confirming invoice is not moved twice");
}
