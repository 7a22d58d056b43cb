//! The merchant's webhook delivery log: `GET /v1/webhook_deliveries`,
//! `GET /v1/webhook_deliveries/{delivery_id}` (with its attempts) and
//! `POST /v1/webhook_deliveries/{delivery_id}/redeliver` (domain::webhooks::deliveries).

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{PathId, QueryParams};
use crate::state::HttpState;
use domain::events::EventKind;
use domain::invoices::types::ts;
use domain::webhooks::deliveries::{self, DeliveryFilter};
use entity::{DeliveryId, DeliveryStatus, webhook_attempt, webhook_delivery};

/// This resource's routes.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(list_deliveries)).routes(routes!(get_delivery)).routes(routes!(redeliver))
}

crate::envelope::documented! {
    DeliveryListEnvelope = Vec<DeliveryResponse>;
    DeliveryEnvelope = DeliveryResponse;
}

/// One HTTP attempt of a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptResponse {
    pub attempt_no: i32,
    pub url: String,
    pub started_at: String,
    pub latency_ms: i64,
    /// The endpoint's HTTP status; null when none came (refused, timed out, blocked address).
    pub status_code: Option<i32>,
    pub error: Option<String>,
    /// The first bytes of the endpoint's answer.
    pub response_excerpt: Option<String>,
    pub succeeded: bool,
}

/// A delivery of one event to one of the merchant's endpoints.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryResponse {
    pub id: Uuid,
    pub event_id: Uuid,
    /// The endpoint it goes to; null only on deliveries made before endpoints had ids (they go
    /// to the merchant's oldest endpoint in the environment).
    pub endpoint_id: Option<Uuid>,
    pub event_type: String,
    #[schema(value_type = entity::DeliveryStatus)]
    pub status: String,
    pub attempt_count: i32,
    pub next_attempt_at: Option<String>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub created_at: String,
    pub delivered_at: Option<String>,
    pub dead_at: Option<String>,
    /// Every attempt, oldest first (in a list: none, read one delivery for them).
    pub attempts: Vec<AttemptResponse>,
}

impl DeliveryResponse {
    fn of(d: &webhook_delivery::Model, attempts: &[webhook_attempt::Model]) -> Self {
        let open = matches!(d.status, DeliveryStatus::Pending | DeliveryStatus::Retrying);
        DeliveryResponse {
            id: d.id,
            event_id: d.event_id,
            endpoint_id: d.endpoint_id,
            event_type: d.event_type.clone(),
            status: d.status.as_str().to_owned(),
            attempt_count: d.attempt_count,
            next_attempt_at: open.then(|| ts(d.next_attempt_at)),
            last_status_code: d.last_status_code,
            last_error: d.last_error.clone(),
            created_at: ts(d.created_at),
            delivered_at: d.delivered_at.map(ts),
            dead_at: d.dead_at.map(ts),
            attempts: attempts
                .iter()
                .map(|a| AttemptResponse {
                    attempt_no: a.attempt_no,
                    url: a.url.clone(),
                    started_at: ts(a.started_at),
                    latency_ms: a.latency_ms,
                    status_code: a.status_code,
                    error: a.error.clone(),
                    response_excerpt: a.response_body.clone(),
                    succeeded: a.succeeded,
                })
                .collect(),
        }
    }
}

/// The merchant's webhook deliveries in this environment, newest first.
#[utoipa::path(get, path = "/v1/webhook_deliveries", tag = "webhooks", security(("api_key" = [])),
    params(
        ("status" = Option<entity::DeliveryStatus>, Query, description = "Only deliveries in this status"),
        ("type" = Option<String>, Query, description = "Only deliveries of this event type (as `GET /v1/events?type=`)"),
        ("endpoint_id" = Option<uuid::Uuid>, Query, description = "Only deliveries to this endpoint"),
        crate::envelope::PageParams,
    ),
    responses(
        (status = 200, description = "One page, newest first", body = DeliveryListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope),
    ))]
pub async fn list_deliveries(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksRead>,
    q: QueryParams,
) -> ApiResult<Page<DeliveryResponse>> {
    let page = q.page()?;
    let statuses = "pending, retrying, succeeded, dead";
    let kinds = EventKind::ALL.map(EventKind::as_str).join(", ");
    let filter = DeliveryFilter {
        status: q.one_of("status", DeliveryStatus::parse, statuses)?,
        event_type: q.one_of("type", |v| EventKind::parse(v).map(|k| k.as_str().to_owned()), &kinds)?,
        endpoint_id: q.one_of("endpoint_id", |v| Uuid::parse_str(v).ok(), "a UUID")?,
    };
    let listed = deliveries::list(&state, &auth, &filter, page).await?;
    Ok(Page::listed(&listed.rows, |d| DeliveryResponse::of(d, &[]), &listed, page.limit))
}

/// One delivery with every attempt: status, latency and the first bytes of each answer.
#[utoipa::path(get, path = "/v1/webhook_deliveries/{delivery_id}", tag = "webhooks", security(("api_key" = [])),
    params(("delivery_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, body = DeliveryEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn get_delivery(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksRead>,
    PathId(id): PathId<DeliveryId>,
) -> ApiResult<Data<DeliveryResponse>> {
    let (d, attempts) = deliveries::get(&state, &auth, id).await?;
    Ok(Data::ok(DeliveryResponse::of(&d, &attempts)))
}

/// Send a delivery again: its schedule starts over, due now (the same body and delivery id, a
/// fresh signature). 409 `delivery_pending` while it waits for its first attempt.
#[utoipa::path(post, path = "/v1/webhook_deliveries/{delivery_id}/redeliver", tag = "webhooks", security(("api_key" = [])),
    params(("delivery_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "Due again", body = DeliveryEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "delivery_pending", body = ErrorEnvelope),
    ))]
pub async fn redeliver(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    PathId(id): PathId<DeliveryId>,
) -> ApiResult<Data<DeliveryResponse>> {
    let (d, attempts) = deliveries::redeliver(&state, &auth, id).await?;
    Ok(Data::ok(DeliveryResponse::of(&d, &attempts)))
}
