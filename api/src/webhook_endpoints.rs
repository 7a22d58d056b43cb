//! The merchant's own webhook endpoints (several per environment, each with its event filter):
//! `GET`/`POST /v1/webhook_endpoints`, `GET`/`PATCH`/`DELETE /v1/webhook_endpoints/{endpoint_id}`,
//! `POST /v1/webhook_endpoints/{endpoint_id}/rotate_secret` and `/test`, and
//! `POST /v1/webhook_deliveries/redeliver` for a time range. Every rule lives in
//! `domain::webhooks::manage`; these handlers only read the request and shape the answer.

use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::{Allowed, perm};
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::extract::{JsonBody, PathId};
use crate::state::HttpState;
use domain::domain_error::ErrorCode;
use domain::events::EventKind;
use domain::invoices::types::ts;
use domain::webhooks::endpoints::{EndpointChange, EndpointInfo, NewEndpoint};
use domain::webhooks::manage::{self, RedeliverRange};
use domain::webhooks::secrets::SecretBox;
use entity::DeliveryStatus;

/// This resource's routes.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(list_endpoints, create_endpoint))
        .routes(routes!(get_endpoint, update_endpoint, delete_endpoint))
        .routes(routes!(rotate_secret))
        .routes(routes!(send_test))
        .routes(routes!(redeliver_range))
}

crate::envelope::documented! {
    EndpointListEnvelope = Vec<EndpointResponse>;
    EndpointEnvelope = EndpointResponse;
    EndpointSecretEnvelope = EndpointWithSecretResponse;
    EndpointDeletedEnvelope = EndpointDeletedResponse;
    EndpointTestEnvelope = EndpointTestResponse;
    RedeliveredEnvelope = RedeliveredResponse;
}

/// A webhook endpoint (never its secret, which is shown once, when it is made or rotated).
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointResponse {
    pub id: Uuid,
    pub url: String,
    pub description: Option<String>,
    /// The event types it receives; empty: every event. A `test` event is always received.
    pub enabled_events: Vec<String>,
    /// A disabled endpoint receives no new deliveries.
    pub disabled: bool,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    /// While a rotation overlaps: when the previous secret stops signing.
    pub previous_secret_expires_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl EndpointResponse {
    fn of(i: &EndpointInfo) -> Self {
        EndpointResponse {
            id: i.id,
            url: i.url.clone(),
            description: i.description.clone(),
            enabled_events: i.enabled_events.clone(),
            disabled: i.disabled,
            environment: i.environment.as_str().to_owned(),
            previous_secret_expires_at: i.previous_secret_until.map(ts),
            created_at: ts(i.created_at),
            updated_at: ts(i.updated_at),
        }
    }
}

/// An endpoint with its signing secret, shown this once (store it now).
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointWithSecretResponse {
    #[serde(flatten)]
    pub details: EndpointResponse,
    /// The signing secret (`whsec_…`): stored encrypted, never shown again.
    pub secret: String,
}

/// A deleted endpoint.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointDeletedResponse {
    pub id: Uuid,
    pub deleted: bool,
    /// Its deliveries that were still open: stopped (`dead`), never sent elsewhere.
    pub deliveries_stopped: u64,
}

/// The `test` event and its one delivery, to this endpoint only.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointTestResponse {
    pub event_id: Uuid,
    pub delivery_id: Uuid,
}

/// What a range redelivery did.
#[derive(Debug, Serialize, ToSchema)]
pub struct RedeliveredResponse {
    /// Deliveries the range and status selected.
    pub matched: u64,
    /// Deliveries made due again (a pending one is left as it is).
    pub redelivered: u64,
    pub delivery_ids: Vec<Uuid>,
}

/// An event type name (`invoice.paid`, …), as `GET /v1/events?type=` takes it.
pub struct EventTypeName;

impl utoipa::PartialSchema for EventTypeName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let kinds: Vec<String> = EventKind::ALL.iter().map(|k| k.as_str().to_owned()).collect();
        ObjectBuilder::new().schema_type(Type::String).enum_values(Some(kinds)).into()
    }
}

impl ToSchema for EventTypeName {}

/// A new endpoint in the caller's environment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEndpointRequest {
    /// `https://` (`http://` allowed in test where the operator allows it), at most 2048
    /// characters, not resolving to a private or loopback address.
    #[schema(max_length = 2048)]
    pub url: String,
    /// At most 512 characters.
    #[schema(max_length = 512, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub description: Option<String>,
    /// Event types (as `GET /v1/events?type=`); empty or absent: every event.
    #[schema(value_type = Vec<EventTypeName>)]
    #[serde(default)]
    pub enabled_events: Vec<String>,
}

/// What to change; an absent field stays as it is.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEndpointRequest {
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    /// `null` clears it.
    #[schema(value_type = Option<String>, nullable, max_length = 512, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    #[serde(default, deserialize_with = "present")]
    pub description: Option<Option<String>>,
    /// Event types; empty: every event.
    #[schema(value_type = Option<Vec<EventTypeName>>)]
    pub enabled_events: Option<Vec<String>>,
    pub disabled: Option<bool>,
}

/// A field given (even as `null`) is `Some`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The deliveries to send again: the caller's, created at or after `from` and before `to`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeliverRangeRequest {
    /// RFC 3339 time.
    #[schema(format = DateTime)]
    pub from: String,
    /// RFC 3339 time, later than `from`.
    #[schema(format = DateTime)]
    pub to: String,
    /// Only deliveries in this status; default: the failed ones (dead or retrying).
    #[schema(value_type = Option<entity::DeliveryStatus>)]
    pub status: Option<String>,
}

fn secret_box(state: &HttpState) -> Result<std::sync::Arc<SecretBox>, ApiError> {
    state.secrets.clone().ok_or_else(|| {
        ApiError::unavailable(
            ErrorCode::WebhookSecretsUnavailable,
            "webhook endpoint secrets cannot be made: the operator has not configured webhooks.secret_key",
        )
    })
}

fn time(field: &str, v: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(v)
        .map(|t| t.to_utc())
        .map_err(|e| ApiError::invalid_field(field, format!("must be an RFC 3339 time: {e}")))
}

/// The merchant's webhook endpoints in this environment, oldest first.
#[utoipa::path(get, path = "/v1/webhook_endpoints", tag = "webhooks", security(("api_key" = [])),
    responses(
        (status = 200, body = EndpointListEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn list_endpoints(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksRead>,
) -> ApiResult<Data<Vec<EndpointResponse>>> {
    Ok(Data::ok(manage::list(&state, &auth).await?.iter().map(EndpointResponse::of).collect()))
}

/// Add an endpoint in this environment; its signing secret is in the answer, this once.
#[utoipa::path(post, path = "/v1/webhook_endpoints", tag = "webhooks", security(("api_key" = [])),
    request_body = CreateEndpointRequest,
    responses(
        (status = 201, description = "Made: store `secret` now, it is not shown again", body = EndpointSecretEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 409, description = "webhook_endpoint_limit", body = ErrorEnvelope),
        (status = 503, description = "webhook_secrets_unavailable", body = ErrorEnvelope),
    ))]
pub async fn create_endpoint(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    body: JsonBody<CreateEndpointRequest>,
) -> ApiResult<Data<EndpointWithSecretResponse>> {
    let sbox = secret_box(&state)?;
    let b = body.value;
    let new = NewEndpoint { url: b.url, description: b.description, enabled_events: b.enabled_events };
    let (info, secret) = manage::create(&state, &sbox, &auth, &new).await?;
    Ok(Data::created(EndpointWithSecretResponse { details: EndpointResponse::of(&info), secret }))
}

/// One endpoint.
#[utoipa::path(get, path = "/v1/webhook_endpoints/{endpoint_id}", tag = "webhooks", security(("api_key" = [])),
    params(("endpoint_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, body = EndpointEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn get_endpoint(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksRead>,
    PathId(id): PathId<Uuid>,
) -> ApiResult<Data<EndpointResponse>> {
    Ok(Data::ok(EndpointResponse::of(&manage::get(&state, &auth, id).await?)))
}

/// Change an endpoint's URL, description, event filter or `disabled` flag (its secret stays).
#[utoipa::path(patch, path = "/v1/webhook_endpoints/{endpoint_id}", tag = "webhooks", security(("api_key" = [])),
    params(("endpoint_id" = uuid::Uuid, Path)),
    request_body = UpdateEndpointRequest,
    responses(
        (status = 200, body = EndpointEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn update_endpoint(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    PathId(id): PathId<Uuid>,
    body: JsonBody<UpdateEndpointRequest>,
) -> ApiResult<Data<EndpointResponse>> {
    let b = body.value;
    let change = EndpointChange {
        url: b.url,
        description: b.description,
        enabled_events: b.enabled_events,
        disabled: b.disabled,
    };
    Ok(Data::ok(EndpointResponse::of(&manage::update(&state, &auth, id, &change).await?)))
}

/// Delete an endpoint: it receives nothing more, and its deliveries still open stop (`dead`,
/// never sent to another endpoint).
#[utoipa::path(delete, path = "/v1/webhook_endpoints/{endpoint_id}", tag = "webhooks", security(("api_key" = [])),
    params(("endpoint_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, body = EndpointDeletedEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn delete_endpoint(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    PathId(id): PathId<Uuid>,
) -> ApiResult<Data<EndpointDeletedResponse>> {
    let stopped = manage::delete(&state, &auth, id).await?;
    Ok(Data::ok(EndpointDeletedResponse { id, deleted: true, deliveries_stopped: stopped }))
}

/// A new signing secret, in the answer this once; the previous one keeps signing beside it
/// for `webhooks.rotation_overlap_secs` (24 h by default), so the receiver can switch.
#[utoipa::path(post, path = "/v1/webhook_endpoints/{endpoint_id}/rotate_secret", tag = "webhooks", security(("api_key" = [])),
    params(("endpoint_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "Rotated: store `secret` now, it is not shown again", body = EndpointSecretEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
        (status = 503, description = "webhook_secrets_unavailable", body = ErrorEnvelope),
    ))]
pub async fn rotate_secret(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    PathId(id): PathId<Uuid>,
) -> ApiResult<Data<EndpointWithSecretResponse>> {
    let sbox = secret_box(&state)?;
    let (info, secret) = manage::rotate_secret(&state, &sbox, &auth, id).await?;
    Ok(Data::ok(EndpointWithSecretResponse { details: EndpointResponse::of(&info), secret }))
}

/// Send a `test` event to this endpoint only. It goes out with the deliverer's next sweep.
#[utoipa::path(post, path = "/v1/webhook_endpoints/{endpoint_id}/test", tag = "webhooks", security(("api_key" = [])),
    params(("endpoint_id" = uuid::Uuid, Path)),
    responses(
        (status = 201, body = EndpointTestEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn send_test(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    PathId(id): PathId<Uuid>,
) -> ApiResult<Data<EndpointTestResponse>> {
    let (event, delivery) = manage::send_test(&state, &auth, id).await?;
    Ok(Data::created(EndpointTestResponse { event_id: event.into(), delivery_id: delivery.into() }))
}

/// Send again every failed (dead or retrying), or every `status`, delivery of this environment
/// created in `[from, to)`: each schedule starts over, due now. At most 1000 per request: a
/// range holding more is refused (400 naming `to`); narrow it.
#[utoipa::path(post, path = "/v1/webhook_deliveries/redeliver", tag = "webhooks", security(("api_key" = [])),
    request_body = RedeliverRangeRequest,
    responses(
        (status = 200, body = RedeliveredEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn redeliver_range(
    State(state): State<HttpState>,
    auth: Allowed<perm::WebhooksWrite>,
    body: JsonBody<RedeliverRangeRequest>,
) -> ApiResult<Data<RedeliveredResponse>> {
    let b = body.value;
    let status = match b.status.as_deref() {
        None => None,
        Some(s) => Some(DeliveryStatus::parse(s).ok_or_else(|| {
            ApiError::invalid_field("status", format!("must be one of pending, retrying, succeeded, dead, got {s:?}"))
        })?),
    };
    let range = RedeliverRange { from: time("from", &b.from)?, to: time("to", &b.to)?, status };
    let done = manage::redeliver_range(&state, &auth, &range).await?;
    Ok(Data::ok(RedeliveredResponse {
        matched: done.matched,
        redelivered: done.redelivered.len() as u64,
        delivery_ids: done.redelivered.into_iter().map(Uuid::from).collect(),
    }))
}
