//! Operator views and actions over deliveries (`ops webhooks`): list with filters, attempts,
//! replay, and the `test` event.

use chrono::{DateTime, Utc};
use entity::{
    DeliveryId, DeliveryStatus, DeliveryTrigger, Environment, EventId, MerchantId, webhook_attempt, webhook_delivery,
};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde_json::json;
use uuid::Uuid;

use super::{WebhookError, endpoints};
use crate::events::EventKind;

/// Filters of `ops webhooks list`; every one optional.
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub merchant_id: Option<Uuid>,
    pub environment: Option<Environment>,
    pub endpoint_id: Option<Uuid>,
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
    if let Some(e) = f.endpoint_id {
        q = q.filter(webhook_delivery::Column::EndpointId.eq(e));
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

/// Deliveries for the merchant's past events in `env` that the endpoint never had (they happened
/// before it existed), created at or after `since` and of `event_type` when given, oldest
/// first, and only those its filter takes: an endpoint added later receives what happened
/// before it. `endpoint` names it ([`endpoints::resolve`]). Returns the new deliveries (due now;
/// the caller enqueues them). `test` events are not sent again.
pub async fn deliver_missed(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
    since: Option<DateTime<Utc>>,
    event_type: Option<&str>,
) -> Result<Vec<DeliveryId>, WebhookError> {
    use entity::event;
    use sea_orm::IntoActiveModel;
    use sea_orm::sea_query::{Condition, OnConflict, Query};
    let Some(ep) = endpoints::resolve(db, merchant_id, env, endpoint).await? else {
        return Err(WebhookError::NoEndpoint(merchant_id, env));
    };
    // Delivered to this endpoint already, or before endpoints had ids (to the merchant's).
    let delivered = Query::select()
        .column(webhook_delivery::Column::EventId)
        .from(webhook_delivery::Entity)
        .and_where(webhook_delivery::Column::MerchantId.eq(merchant_id))
        .cond_where(
            Condition::any()
                .add(webhook_delivery::Column::EndpointId.eq(ep.id))
                .add(webhook_delivery::Column::EndpointId.is_null()),
        )
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
    let filter = endpoints::EventFilter::stored(&ep.enabled_events);
    let now = Utc::now();
    let mut rows: Vec<_> = events
        .iter()
        .filter(|e| filter.matches(&e.event_type))
        .map(|e| super::dispatch::new_delivery(e, Some(ep.id), now))
        .collect();
    super::dispatch::mark_waiting(db, &mut rows).await?;
    let ids = rows.iter().map(|d| d.id.into()).collect();
    for chunk in rows.chunks(500) {
        webhook_delivery::Entity::insert_many(chunk.iter().cloned().map(IntoActiveModel::into_active_model))
            .on_conflict(
                OnConflict::columns([webhook_delivery::Column::EventId, webhook_delivery::Column::EndpointId])
                    .do_nothing()
                    .to_owned(),
            )
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

/// Writes a `test` event for the merchant's endpoints in `env`; the deliverer sends it like
/// any other, to each enabled one. Returns the event id.
pub async fn send_test(
    db: &DatabaseConnection,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<EventId, WebhookError> {
    if endpoints::list_for(db, merchant_id, env).await?.is_empty() {
        return Err(WebhookError::NoEndpoint(merchant_id, env));
    }
    let tag = Uuid::now_v7();
    let data = test_data(env, tag);
    crate::events::emit(db, merchant_id, env, EventKind::Test, format!("test:{tag}"), data)
        .await?
        .ok_or_else(|| WebhookError::Db(sea_orm::DbErr::Custom("test event key reused".into())))
}

/// Writes a `test` event for one endpoint only (it must be the merchant's in `env`): the event
/// is marked dispatched and its one delivery made here, to that endpoint, even a disabled one
/// (it is what the caller asked to check). With `enqueued` false (a caller with no queue) the
/// delivery is left for the deliverer's sweep. Returns the event and the delivery.
pub async fn send_test_to(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    endpoint_id: Uuid,
    enqueued: bool,
) -> Result<(EventId, DeliveryId), WebhookError> {
    use entity::event;
    use sea_orm::IntoActiveModel;
    let Some(ep) = endpoints::find(db, merchant_id, env, endpoint_id).await? else {
        return Err(WebhookError::UnknownEndpoint(endpoint_id));
    };
    let tag = Uuid::now_v7();
    let now = Utc::now();
    let mut row = event::Model::new(
        merchant_id.into(),
        env,
        EventKind::Test.as_str(),
        format!("test:{tag}"),
        test_data(env, tag),
        now,
    );
    row.dispatched_at = Some(now);
    let e = event::Entity::insert(row.into_active_model()).exec_with_returning(db).await?;
    let mut d = super::dispatch::new_delivery(&e, Some(ep.id), now);
    d.enqueued_at = enqueued.then_some(now);
    let d = webhook_delivery::Entity::insert(d.into_active_model()).exec_with_returning(db).await?;
    Ok((e.id.into(), d.id.into()))
}
