//! A merchant's own webhook endpoints, through the API (`/v1/webhook_endpoints`) and the
//! dashboard: list, create (the secret shown once), read, change, delete, rotate the secret
//! (shown once; the previous one keeps signing for `webhooks.rotation_overlap_secs`), send a
//! `test` event to one endpoint, and redeliver the failed deliveries of a time range. The
//! caller (`Principal`) sees only its merchant's endpoints in its key's environment: anyone
//! else's is "not found". Every change is recorded in the audit log with the caller as actor
//! (`api_key:<id>` or `user:<id>`), in the transaction of the change; secrets are never recorded.
//!
//! Redelivery of a range starts each selected delivery's schedule over, due now, and leaves it
//! for the deliverer's sweep (the API holds no queue), like the single redelivery
//! (`deliveries::redeliver`). One request redelivers at most [`REDELIVER_MAX`] deliveries; a
//! range holding more is refused, naming `to`, so the caller narrows it.

use chrono::{DateTime, Duration, Utc};
use entity::{DeliveryId, DeliveryStatus, EventId, webhook_delivery, webhook_endpoint};
use sea_orm::{ColumnTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
use serde_json::{Value, json};
use uuid::Uuid;

use super::WebhookError;
use super::endpoints::{self, EndpointChange, EndpointInfo, NewEndpoint};
use super::outbound::TargetPolicy;
use super::secrets::SecretBox;
use crate::audit::{Entry, record};
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::keys::Principal;
use crate::state::AppState;

/// Most deliveries one range redelivery takes.
pub const REDELIVER_MAX: u64 = 1000;

/// A webhook error as the caller sees it: the field at fault, not found, or a fault of ours.
pub fn refusal(e: WebhookError) -> DomainError {
    match e {
        WebhookError::InvalidUrl(m) => DomainError::invalid_field("url", m),
        WebhookError::InvalidEvent(m) => DomainError::validation(vec![m]),
        WebhookError::InvalidDescription(m) => DomainError::invalid_field("description", m),
        WebhookError::TooManyEndpoints(n) => DomainError::conflict(
            ErrorCode::WebhookEndpointLimit,
            format!("at most {n} webhook endpoints per merchant and environment: delete one first"),
        ),
        WebhookError::UnknownEndpoint(_) | WebhookError::NoEndpoint(..) => DomainError::not_found("webhook endpoint"),
        WebhookError::UnknownDelivery(_) => DomainError::not_found("webhook delivery"),
        WebhookError::Db(e) => DomainError::from(e),
        e @ (WebhookError::UnknownMerchant(_) | WebhookError::SeveralEndpoints(..) | WebhookError::Secret(_)) => {
            DomainError::internal(e)
        }
    }
}

/// What the audit log keeps of an endpoint: never its secret.
pub fn audited(i: &EndpointInfo) -> Value {
    json!({
        "url": i.url,
        "description": i.description,
        "enabled_events": i.enabled_events,
        "disabled": i.disabled,
        "previous_secret_until": i.previous_secret_until.map(|t| t.to_rfc3339()),
    })
}

fn entry(who: &Principal, action: &'static str, id: Uuid) -> Entry {
    Entry::new(&who.actor(), action, "webhook_endpoint", id).merchant(who.merchant_id, Some(who.environment))
}

fn policy(state: &AppState) -> TargetPolicy {
    TargetPolicy::from_config(&state.config.webhooks)
}

async fn owned(db: &impl sea_orm::ConnectionTrait, who: &Principal, id: Uuid) -> DomainResult<webhook_endpoint::Model> {
    crate::owned::get::<webhook_endpoint::Entity>(db, who, id).await
}

/// The caller's endpoints in its environment, oldest first.
pub async fn list(state: &AppState, who: &Principal) -> DomainResult<Vec<EndpointInfo>> {
    let now = Utc::now();
    let rows = endpoints::list_for(&state.db, who.merchant_id, who.environment).await.map_err(refusal)?;
    Ok(rows.iter().map(|m| EndpointInfo::from_model(m, now)).collect())
}

/// One of the caller's endpoints.
pub async fn get(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<EndpointInfo> {
    Ok(EndpointInfo::from_model(&owned(&state.db, who, id).await?, Utc::now()))
}

/// Creates an endpoint; returns it with its secret, shown this once.
pub async fn create(
    state: &AppState,
    sbox: &SecretBox,
    who: &Principal,
    new: &NewEndpoint,
) -> DomainResult<(EndpointInfo, String)> {
    let txn = crate::db::begin_write(&state.db).await?;
    let (m, secret) =
        endpoints::create(&txn, sbox, policy(state), who.merchant_id, who.environment, new).await.map_err(refusal)?;
    let info = EndpointInfo::from_model(&m, Utc::now());
    record(&txn, entry(who, "webhook_endpoint.create", m.id).change(None, Some(audited(&info)))).await?;
    txn.commit().await?;
    Ok((info, secret))
}

/// Changes one of the caller's endpoints (URL, description, event filter, `disabled`).
pub async fn update(
    state: &AppState,
    who: &Principal,
    id: Uuid,
    change: &EndpointChange,
) -> DomainResult<EndpointInfo> {
    let txn = crate::db::begin_write(&state.db).await?;
    let before = owned(&txn, who, id).await?;
    let now = Utc::now();
    let before_info = EndpointInfo::from_model(&before, now);
    let after = endpoints::update(&txn, policy(state), before, change).await.map_err(refusal)?;
    let info = EndpointInfo::from_model(&after, now);
    record(&txn, entry(who, "webhook_endpoint.update", id).change(Some(audited(&before_info)), Some(audited(&info))))
        .await?;
    txn.commit().await?;
    Ok(info)
}

/// A new secret for one of the caller's endpoints, shown this once; the previous one keeps
/// signing beside it for `webhooks.rotation_overlap_secs`.
pub async fn rotate_secret(
    state: &AppState,
    sbox: &SecretBox,
    who: &Principal,
    id: Uuid,
) -> DomainResult<(EndpointInfo, String)> {
    // Bounded (ten years), so that no configured value can overflow the expiry time.
    let secs = i64::try_from(state.config.webhooks.rotation_overlap_secs).unwrap_or(i64::MAX);
    let overlap = Duration::seconds(secs.clamp(0, 3650 * 86_400));
    let txn = crate::db::begin_write(&state.db).await?;
    let before = owned(&txn, who, id).await?;
    let now = Utc::now();
    let before_info = EndpointInfo::from_model(&before, now);
    let (after, secret) = endpoints::rotate_secret(&txn, sbox, before, overlap).await.map_err(refusal)?;
    let info = EndpointInfo::from_model(&after, now);
    record(
        &txn,
        entry(who, "webhook_endpoint.rotate_secret", id).change(Some(audited(&before_info)), Some(audited(&info))),
    )
    .await?;
    txn.commit().await?;
    Ok((info, secret))
}

/// Deletes one of the caller's endpoints; its open deliveries stop (`dead`, never sent
/// elsewhere). Returns how many stopped.
pub async fn delete(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<u64> {
    let txn = crate::db::begin_write(&state.db).await?;
    let m = owned(&txn, who, id).await?;
    let (gone, stopped) = endpoints::delete(&txn, &m).await.map_err(refusal)?;
    if !gone {
        txn.rollback().await?;
        return Err(DomainError::not_found("webhook endpoint"));
    }
    let before = audited(&EndpointInfo::from_model(&m, Utc::now()));
    let after = json!({"deliveries_stopped": stopped});
    record(&txn, entry(who, "webhook_endpoint.delete", id).change(Some(before), Some(after))).await?;
    txn.commit().await?;
    Ok(stopped)
}

/// Sends a `test` event to one of the caller's endpoints only; the deliverer's sweep sends it.
pub async fn send_test(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<(EventId, DeliveryId)> {
    let txn = crate::db::begin_write(&state.db).await?;
    owned(&txn, who, id).await?;
    let (event, delivery) =
        super::admin::send_test_to(&txn, who.merchant_id, who.environment, id, false).await.map_err(refusal)?;
    record(
        &txn,
        entry(who, "webhook_endpoint.test", id).change(None, Some(json!({"event_id": event, "delivery_id": delivery}))),
    )
    .await?;
    txn.commit().await?;
    Ok((event, delivery))
}

/// Which deliveries a range redelivery takes: the caller's, created in `[from, to)`, with
/// `status` (default: the failed ones, dead or retrying).
#[derive(Debug, Clone)]
pub struct RedeliverRange {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub status: Option<DeliveryStatus>,
}

/// What a range redelivery did.
#[derive(Debug, Clone, Default)]
pub struct Redelivered {
    /// Deliveries the range selected.
    pub matched: u64,
    /// Deliveries made due again (a pending one, or one changed meanwhile, is left as it is).
    pub redelivered: Vec<DeliveryId>,
}

/// Redelivers every delivery the range selects (at most [`REDELIVER_MAX`]; more is refused),
/// audited as one entry.
pub async fn redeliver_range(state: &AppState, who: &Principal, r: &RedeliverRange) -> DomainResult<Redelivered> {
    if r.to <= r.from {
        return Err(DomainError::invalid_field("to", "must be later than from"));
    }
    let statuses = match r.status {
        Some(s) => vec![s],
        None => vec![DeliveryStatus::Dead, DeliveryStatus::Retrying],
    };
    let q = who
        .rows::<webhook_delivery::Entity>()
        .filter(webhook_delivery::Column::Status.is_in(statuses.clone()))
        .filter(webhook_delivery::Column::CreatedAt.gte(r.from))
        .filter(webhook_delivery::Column::CreatedAt.lt(r.to));
    let matched = q.clone().count(&state.db).await?;
    if matched > REDELIVER_MAX {
        return Err(DomainError::invalid_field(
            "to",
            format!("the range holds {matched} deliveries; at most {REDELIVER_MAX} per request: narrow it"),
        ));
    }
    let ids: Vec<Uuid> = q
        .select_only()
        .column(webhook_delivery::Column::Id)
        .order_by_asc(webhook_delivery::Column::CreatedAt)
        .order_by_asc(webhook_delivery::Column::Id)
        .limit(REDELIVER_MAX)
        .into_tuple()
        .all(&state.db)
        .await?;
    let txn = crate::db::begin_write(&state.db).await?;
    let mut redelivered = Vec::new();
    for id in ids {
        if super::admin::replay_as(&txn, id.into(), false).await.map_err(refusal)? {
            redelivered.push(DeliveryId::from(id));
        }
    }
    let after = json!({
        "from": r.from.to_rfc3339(),
        "to": r.to.to_rfc3339(),
        "statuses": statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "matched": matched,
        "redelivered": redelivered.len(),
    });
    record(
        &txn,
        Entry::new(&who.actor(), "webhook_delivery.redeliver_range", "webhook_delivery", "*")
            .merchant(who.merchant_id, Some(who.environment))
            .change(None, Some(after)),
    )
    .await?;
    txn.commit().await?;
    Ok(Redelivered { matched, redelivered })
}
