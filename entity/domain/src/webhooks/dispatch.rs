//! From outbox events to deliveries. A round takes the oldest undispatched events, claims them
//! with a guarded update (so two deliverer processes never both take one), and creates one
//! delivery per event whose merchant has an endpoint in the event's environment, all in one
//! transaction. Events without an endpoint are marked dispatched and not delivered.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use entity::{DeliveryStatus, Environment, event, webhook_delivery, webhook_endpoint};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ColumnTrait, DatabaseConnection, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, QuerySelect,
};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::events::EventKind;
use crate::invoices::types::ts;

/// The JSON body of spec section 6: `event`, `created_at`, `data`, and `event_id` on
/// `balance.credited` only.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<Uuid>,
    event: &'a str,
    created_at: String,
    data: &'a Value,
}

/// The exact body every attempt of this event's delivery sends.
pub fn body(e: &event::Model) -> String {
    let b = Body {
        event_id: (e.event_type == EventKind::BalanceCredited.as_str()).then_some(e.id),
        event: &e.event_type,
        created_at: ts(e.created_at),
        data: &e.payload,
    };
    serde_json::to_string(&b).expect("a JSON value serialises")
}

/// A new delivery of `e`, due now.
pub fn new_delivery(e: &event::Model, now: DateTime<Utc>) -> webhook_delivery::Model {
    webhook_delivery::Model {
        id: Uuid::now_v7(),
        event_id: e.id,
        merchant_id: e.merchant_id,
        environment: e.environment,
        event_type: e.event_type.clone(),
        body: body(e),
        status: DeliveryStatus::Pending,
        attempt_count: 0,
        retry_step: 0,
        next_attempt_at: now,
        lease_until: None,
        enqueued_at: Some(now),
        last_status_code: None,
        last_error: None,
        event_created_at: e.created_at,
        created_at: now,
        updated_at: now,
        delivered_at: None,
        dead_at: None,
        order_key: e.invoice_id.or(e.payout_id),
        wait_for_earlier: false,
    }
}

/// Marks the deliveries (ordered by event) that must wait for an earlier one with the same
/// order key: one already open, or an earlier one among `rows`.
async fn mark_waiting<C: sea_orm::ConnectionTrait>(db: &C, rows: &mut [webhook_delivery::Model]) -> Result<(), DbErr> {
    let keys: HashSet<Uuid> = rows.iter().filter_map(|d| d.order_key).collect();
    if keys.is_empty() {
        return Ok(());
    }
    let mut seen: HashSet<Uuid> = webhook_delivery::Entity::find()
        .select_only()
        .column(webhook_delivery::Column::OrderKey)
        .filter(webhook_delivery::Column::OrderKey.is_in(keys))
        .filter(webhook_delivery::Column::Status.is_in([DeliveryStatus::Pending, DeliveryStatus::Retrying]))
        .into_tuple::<Option<Uuid>>()
        .all(db)
        .await?
        .into_iter()
        .flatten()
        .collect();
    for d in rows.iter_mut() {
        if let Some(k) = d.order_key {
            d.wait_for_earlier = !seen.insert(k);
        }
    }
    Ok(())
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Dispatched {
    /// Events claimed by this round.
    pub events: usize,
    /// Deliveries created, to be enqueued.
    pub deliveries: Vec<Uuid>,
}

/// One round of at most `limit` events.
pub async fn dispatch_batch(db: &DatabaseConnection, limit: u64) -> Result<Dispatched, DbErr> {
    let candidates = event::Entity::find()
        .filter(event::Column::DispatchedAt.is_null())
        .order_by_asc(event::Column::CreatedAt)
        .limit(limit)
        .all(db)
        .await?;
    if candidates.is_empty() {
        return Ok(Dispatched::default());
    }
    let merchants: HashSet<Uuid> = candidates.iter().map(|e| e.merchant_id).collect();
    let endpoints: HashSet<(Uuid, Environment)> = webhook_endpoint::Entity::find()
        .select_only()
        .column(webhook_endpoint::Column::MerchantId)
        .column(webhook_endpoint::Column::Environment)
        .filter(webhook_endpoint::Column::MerchantId.is_in(merchants))
        .into_tuple::<(Uuid, Environment)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let claimed: HashSet<Uuid> = event::Entity::update_many()
        .col_expr(event::Column::DispatchedAt, Expr::value(now))
        .filter(event::Column::Id.is_in(candidates.iter().map(|e| e.id)))
        .filter(event::Column::DispatchedAt.is_null())
        .exec_with_returning(&txn)
        .await?
        .into_iter()
        .map(|e| e.id)
        .collect();
    // Candidates come oldest first, so a later event of an invoice follows its earlier ones.
    let mut made: Vec<webhook_delivery::Model> = candidates
        .iter()
        .filter(|e| claimed.contains(&e.id) && endpoints.contains(&(e.merchant_id, e.environment)))
        .map(|e| new_delivery(e, now))
        .collect();
    mark_waiting(&txn, &mut made).await?;
    let rows: Vec<webhook_delivery::ActiveModel> = made.into_iter().map(IntoActiveModel::into_active_model).collect();
    let deliveries: Vec<Uuid> = rows.iter().map(|r| *r.id.as_ref()).collect();
    if !rows.is_empty() {
        webhook_delivery::Entity::insert_many(rows)
            .on_conflict(OnConflict::column(webhook_delivery::Column::EventId).do_nothing().to_owned())
            .exec_without_returning(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(Dispatched { events: claimed.len(), deliveries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str) -> event::Model {
        event::Model::new(
            Uuid::now_v7(),
            Environment::Test,
            kind,
            "k".into(),
            json!({"invoice_id": "x", "amount_paid": "1.5"}),
            DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123Z").unwrap().to_utc(),
        )
    }

    #[test]
    fn body_has_event_id_on_balance_credited_only() {
        let e = ev(EventKind::BalanceCredited.as_str());
        let b: Value = serde_json::from_str(&body(&e)).unwrap();
        assert_eq!(b["event_id"], json!(e.id));
        assert_eq!(b["event"], "balance.credited");
        assert_eq!(b["created_at"], "2026-11-21T10:00:00.123Z");
        assert_eq!(b["data"]["amount_paid"], "1.5");
        for k in [EventKind::InvoicePaid.as_str(), "payout.completed", "test"] {
            let b: Value = serde_json::from_str(&body(&ev(k))).unwrap();
            assert!(b.get("event_id").is_none(), "{k}");
            assert_eq!(b.as_object().unwrap().len(), 3, "{k}: event, created_at, data");
        }
    }
}
