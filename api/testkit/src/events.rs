//! The events outbox as a test reads it: payloads by type, an invoice's event types in order,
//! and a partial comparison of JSON fields.

use serde_json::Value;

/// An invoice's events when its credited deposit was reversed (the invoice then `invalid`) and
/// later revived: taken as a late deposit and credited once more.
pub const REVIVED_DEPOSIT_EVENTS: [&str; 7] = [
    "invoice.confirming",
    "invoice.paid",
    "balance.credited",
    "invoice.deposit_reversed",
    "invoice.invalid",
    "invoice.late_deposit",
    "balance.credited",
];

/// Payloads of every outbox event of `event_type`.
pub async fn event_payloads(db: &sea_orm::DatabaseConnection, event_type: &str) -> Vec<Value> {
    use entity::event;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let rows = event::Entity::find().filter(event::Column::EventType.eq(event_type)).all(db).await.expect("events");
    rows.into_iter().map(|e| e.payload).collect()
}

/// Asserts that each field of the object `expected` has that value in `actual` (which may hold
/// more fields).
#[track_caller]
pub fn assert_fields(actual: &Value, expected: Value) {
    for (field, want) in expected.as_object().expect("expected fields as an object") {
        assert_eq!(&actual[field], want, "{field} of {actual}");
    }
}

/// Event types of one invoice in the outbox, oldest first.
pub async fn invoice_events(db: &sea_orm::DatabaseConnection, invoice: impl std::fmt::Display) -> Vec<String> {
    use entity::event;
    use sea_orm::{EntityTrait, QueryOrder};
    let invoice = invoice.to_string();
    let rows = event::Entity::find()
        .order_by_asc(event::Column::CreatedAt)
        .order_by_asc(event::Column::Id)
        .all(db)
        .await
        .expect("events");
    rows.into_iter()
        .filter(|e| e.payload["invoice_id"] == Value::String(invoice.clone()))
        .map(|e| e.event_type)
        .collect()
}
