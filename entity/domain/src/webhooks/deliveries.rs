//! The merchant's own webhook delivery log through the API (`/v1/webhook_deliveries`,
//! permissions `webhooks:read`/`webhooks:write`): its deliveries in the key's environment with
//! each attempt (status, latency, the response's first bytes), and redelivery of one.
//!
//! A redelivery starts the delivery's schedule over, due now, and is left for the deliverer's
//! sweep (the API holds no queue), so it goes out within `webhooks.stale_after_secs` and the
//! sweep's interval; it is recorded in
//! the audit log with the key (`webhook_delivery.replay`, actor `api_key:<id>`).

use entity::{DeliveryId, DeliveryStatus, webhook_attempt, webhook_delivery};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Select};
use serde_json::json;

use crate::audit::{Entry, record};
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::keys::Principal;
use crate::owned::{self, Filter};
use crate::state::AppState;

/// Which deliveries a list shows.
#[derive(Debug, Default)]
pub struct DeliveryFilter {
    pub status: Option<DeliveryStatus>,
    pub event_type: Option<String>,
    /// Only the deliveries to this endpoint.
    pub endpoint_id: Option<uuid::Uuid>,
}

impl Filter<webhook_delivery::Entity> for DeliveryFilter {
    fn apply(&self, mut q: Select<webhook_delivery::Entity>) -> Select<webhook_delivery::Entity> {
        if let Some(s) = self.status {
            q = q.filter(webhook_delivery::Column::Status.eq(s));
        }
        if let Some(t) = &self.event_type {
            q = q.filter(webhook_delivery::Column::EventType.eq(t.as_str()));
        }
        if let Some(e) = self.endpoint_id {
            q = q.filter(webhook_delivery::Column::EndpointId.eq(e));
        }
        q
    }

    fn tally(&self) -> Option<crate::list_counts::Tally> {
        use crate::list_counts::{Key, List, Tally};
        let key = Key {
            status: self.status.map(|s| sea_orm::ActiveEnum::to_value(&s)),
            kind: self.event_type.clone(),
            ..Key::default()
        };
        self.endpoint_id.is_none().then(|| Tally::new(List::WebhookDeliveries, key))
    }
}

/// One page of the caller's deliveries, newest first, and how many there are in all.
pub async fn list(
    state: &AppState,
    who: &Principal,
    f: &DeliveryFilter,
    page: crate::db::PageRequest,
) -> DomainResult<crate::db::Listed<webhook_delivery::Model>> {
    owned::page(&state.db, who, f, page).await
}

/// One of the caller's deliveries with its attempts, oldest first.
pub async fn get(
    state: &AppState,
    who: &Principal,
    id: DeliveryId,
) -> DomainResult<(webhook_delivery::Model, Vec<webhook_attempt::Model>)> {
    let d = owned::get::<webhook_delivery::Entity>(&state.db, who, id).await?;
    let attempts = webhook_attempt::Entity::find()
        .filter(webhook_attempt::Column::DeliveryId.eq(d.id))
        .order_by_asc(webhook_attempt::Column::AttemptNo)
        .all(&state.db)
        .await?;
    Ok((d, attempts))
}

fn audited(d: &webhook_delivery::Model) -> serde_json::Value {
    json!({"status": d.status.as_str(), "attempt_count": d.attempt_count, "next_attempt_at": d.next_attempt_at.to_rfc3339()})
}

/// Sends one of the caller's deliveries again (a succeeded or dead one, or a retrying one now
/// instead of at its next attempt). 409 `delivery_pending` while it waits for its first attempt.
pub async fn redeliver(
    state: &AppState,
    who: &Principal,
    id: DeliveryId,
) -> DomainResult<(webhook_delivery::Model, Vec<webhook_attempt::Model>)> {
    let before = owned::get::<webhook_delivery::Entity>(&state.db, who, id).await?;
    let txn = crate::db::begin_write(&state.db).await?;
    let moved = super::admin::replay_as(&txn, id, false).await.map_err(|e| match e {
        super::WebhookError::Db(e) => DomainError::from(e),
        other => DomainError::internal(other),
    })?;
    if !moved {
        txn.rollback().await?;
        return Err(DomainError::conflict(
            ErrorCode::DeliveryPending,
            "this delivery is pending: its first attempt is due already (or it changed meanwhile)",
        ));
    }
    let after = owned::get::<webhook_delivery::Entity>(&txn, who, id).await?;
    let entry = Entry::new(&who.actor(), "webhook_delivery.replay", "webhook_delivery", id)
        .merchant(who.merchant_id, Some(who.environment))
        .change(Some(audited(&before)), Some(audited(&after)));
    record(&txn, entry).await?;
    txn.commit().await?;
    get(state, who, id).await
}
