//! Operator views and actions over deliveries (`ops webhooks`): list with filters, attempts,
//! replay, and the `test` event.

use chrono::{DateTime, Utc};
use entity::{
    DeliveryId, DeliveryStatus, DeliveryTrigger, Environment, EventId, MerchantId, webhook_attempt, webhook_delivery,
    webhook_endpoint,
};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde_json::json;
use uuid::Uuid;

use super::WebhookError;
use crate::events::EventKind;

/// Filters of `ops webhooks list`; every one optional.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub merchant_id: Option<Uuid>,
    pub environment: Option<Environment>,
    pub statuses: Vec<DeliveryStatus>,
    pub event_type: Option<String>,
    /// Deliveries created at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Deliveries created before this time.
    pub until: Option<DateTime<Utc>>,
    pub limit: u64,
}

fn filtered(f: &DeliveryFilter) -> sea_orm::Select<webhook_delivery::Entity> {
    let mut q = webhook_delivery::Entity::find();
    if let Some(m) = f.merchant_id {
        q = q.filter(webhook_delivery::Column::MerchantId.eq(m));
    }
    if let Some(e) = f.environment {
        q = q.filter(webhook_delivery::Column::Environment.eq(e));
    }
    if !f.statuses.is_empty() {
        q = q.filter(webhook_delivery::Column::Status.is_in(f.statuses.clone()));
    }
    if let Some(t) = &f.event_type {
        q = q.filter(webhook_delivery::Column::EventType.eq(t.as_str()));
    }
    if let Some(t) = f.since {
        q = q.filter(webhook_delivery::Column::CreatedAt.gte(t));
    }
    if let Some(t) = f.until {
        q = q.filter(webhook_delivery::Column::CreatedAt.lt(t));
    }
    q
}

/// Newest first.
pub async fn list(db: &DatabaseConnection, f: &DeliveryFilter) -> Result<Vec<webhook_delivery::Model>, WebhookError> {
    Ok(filtered(f)
        .order_by_desc(webhook_delivery::Column::CreatedAt)
        .order_by_desc(webhook_delivery::Column::Id)
        .limit(f.limit.max(1))
        .all(db)
        .await?)
}

/// A delivery and its attempts, oldest first.
pub async fn attempts(
    db: &DatabaseConnection,
    delivery_id: DeliveryId,
) -> Result<(webhook_delivery::Model, Vec<webhook_attempt::Model>), WebhookError> {
    let d = webhook_delivery::Entity::find_by_id(delivery_id)
        .one(db)
        .await?
        .ok_or(WebhookError::UnknownDelivery(delivery_id))?;
    let a = webhook_attempt::Entity::find()
        .filter(webhook_attempt::Column::DeliveryId.eq(delivery_id))
        .order_by_asc(webhook_attempt::Column::AttemptNo)
        .all(db)
        .await?;
    Ok((d, a))
}

/// Makes one delivery due now with the schedule starting over. Returns whether it changed
/// (a pending delivery is already due). The caller enqueues it.
pub async fn replay(db: &impl ConnectionTrait, delivery_id: DeliveryId) -> Result<bool, WebhookError> {
    replay_as(db, delivery_id, true).await
}

/// [`replay`]; with `enqueued` false (a caller with no queue, the API) the delivery is left
/// for the deliverer's sweep, which takes every due delivery not on the queue.
pub async fn replay_as(
    db: &impl ConnectionTrait,
    delivery_id: DeliveryId,
    enqueued: bool,
) -> Result<bool, WebhookError> {
    let d = webhook_delivery::Entity::find_by_id(delivery_id)
        .one(db)
        .await?
        .ok_or(WebhookError::UnknownDelivery(delivery_id))?;
    let Some(next) = d.status.on(DeliveryTrigger::Replay) else {
        return Ok(false);
    };
    let now = Utc::now();
    let none: Option<DateTime<Utc>> = None;
    let n = webhook_delivery::Entity::update_many()
        .col_expr(webhook_delivery::Column::Status, Expr::value(next.as_str()))
        .col_expr(webhook_delivery::Column::RetryStep, Expr::value(0))
        .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(now))
        .col_expr(webhook_delivery::Column::LeaseUntil, Expr::value(none))
        .col_expr(webhook_delivery::Column::DeadAt, Expr::value(none))
        .col_expr(webhook_delivery::Column::DeliveredAt, Expr::value(none))
        .col_expr(webhook_delivery::Column::EnqueuedAt, Expr::value(enqueued.then_some(now)))
        .col_expr(webhook_delivery::Column::UpdatedAt, Expr::value(now))
        .filter(webhook_delivery::Column::Id.eq(d.id))
        .filter(webhook_delivery::Column::Status.eq(d.status))
        .filter(webhook_delivery::Column::AttemptCount.eq(d.attempt_count))
        .exec(db)
        .await?
        .rows_affected;
    Ok(n == 1)
}

/// Deliveries for the merchant's past events in `env` that never had one (they happened before
/// its endpoint existed), created at or after `since` and of `event_type` when given, oldest
/// first: an endpoint added later receives what happened before it. Returns the new deliveries
/// (due now; the caller enqueues them). `test` events are not sent again.
pub async fn deliver_missed(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    since: Option<DateTime<Utc>>,
    event_type: Option<&str>,
) -> Result<Vec<DeliveryId>, WebhookError> {
    use entity::event;
    use sea_orm::IntoActiveModel;
    use sea_orm::sea_query::{OnConflict, Query};
    if webhook_endpoint::Entity::find_by_id((merchant_id.0, env)).one(db).await?.is_none() {
        return Err(WebhookError::NoEndpoint(merchant_id, env));
    }
    let delivered = Query::select()
        .column(webhook_delivery::Column::EventId)
        .from(webhook_delivery::Entity)
        .and_where(webhook_delivery::Column::MerchantId.eq(merchant_id))
        .to_owned();
    let mut q = event::Entity::find()
        .filter(event::Column::MerchantId.eq(merchant_id))
        .filter(event::Column::Environment.eq(env))
        .filter(event::Column::DispatchedAt.is_not_null())
        .filter(event::Column::EventType.ne(EventKind::Test.as_str()))
        .filter(event::Column::Id.not_in_subquery(delivered));
    if let Some(t) = since {
        q = q.filter(event::Column::CreatedAt.gte(t));
    }
    if let Some(t) = event_type {
        q = q.filter(event::Column::EventType.eq(t));
    }
    let events = q.order_by_asc(event::Column::CreatedAt).order_by_asc(event::Column::Id).all(db).await?;
    let now = Utc::now();
    let rows: Vec<_> = events.iter().map(|e| super::dispatch::new_delivery(e, now)).collect();
    let ids = rows.iter().map(|d| d.id.into()).collect();
    for chunk in rows.chunks(500) {
        webhook_delivery::Entity::insert_many(chunk.iter().cloned().map(IntoActiveModel::into_active_model))
            .on_conflict(OnConflict::column(webhook_delivery::Column::EventId).do_nothing().to_owned())
            .exec_without_returning(db)
            .await?;
    }
    Ok(ids)
}

/// Ids of the failed deliveries (dead, or retrying) the filter selects, oldest first.
pub async fn failed(db: &DatabaseConnection, f: &DeliveryFilter) -> Result<Vec<DeliveryId>, WebhookError> {
    let f = DeliveryFilter { statuses: vec![DeliveryStatus::Dead, DeliveryStatus::Retrying], ..f.clone() };
    let ids: Vec<Uuid> = filtered(&f)
        .select_only()
        .column(webhook_delivery::Column::Id)
        .order_by_asc(webhook_delivery::Column::CreatedAt)
        .into_tuple()
        .all(db)
        .await?;
    Ok(ids.into_iter().map(DeliveryId::from).collect())
}

/// `data` of the `test` event.
pub fn test_data(env: Environment, test_id: Uuid) -> serde_json::Value {
    json!({
        "message": "Test delivery from paygate. Verify the signature, then answer 2xx.",
        "environment": env.as_str(),
        "test_id": test_id,
    })
}

/// Writes a `test` event for the merchant's endpoint; the deliverer sends it like any other.
/// Returns the event id.
pub async fn send_test(
    db: &DatabaseConnection,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<EventId, WebhookError> {
    if webhook_endpoint::Entity::find_by_id((merchant_id.0, env)).one(db).await?.is_none() {
        return Err(WebhookError::NoEndpoint(merchant_id, env));
    }
    let tag = Uuid::now_v7();
    let data = test_data(env, tag);
    crate::events::emit(db, merchant_id, env, EventKind::Test, format!("test:{tag}"), data)
        .await?
        .ok_or_else(|| WebhookError::Db(sea_orm::DbErr::Custom("test event key reused".into())))
}
