//! HTTP handlers, router and OpenAPI paths of the event log: `/v1/events` (permission
//! `events:read`). A merchant reconciles from here, and an endpoint added later can read what
//! happened before it existed.

use axum::extract::State;
use chrono::{DateTime, Utc};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::extract::{PathId, QueryParams};
use crate::state::HttpState;
use domain::events::EventKind;
use domain::events::query::{self, EventResponse, ListFilter};
use domain::owned;
use entity::EventId;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(list_events)).routes(routes!(get_event))
}

crate::envelope::documented! {
    EventEnvelope = EventResponse;
    EventListEnvelope = Vec<EventResponse>;
}

/// An RFC 3339 timestamp parameter; 400 naming it otherwise.
fn timestamp(q: &QueryParams, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => DateTime::parse_from_rfc3339(v)
            .map(|t| Some(t.to_utc()))
            .map_err(|_| ApiError::invalid_field(name, format!("must be an RFC 3339 timestamp, got {v:?}"))),
    }
}

/// A UUID parameter; 400 naming it otherwise.
fn uuid(q: &QueryParams, name: &str) -> Result<Option<uuid::Uuid>, ApiError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| ApiError::invalid_field(name, format!("must be a UUID, got {v:?}"))),
    }
}

/// List the key's merchant's events in its environment, newest first.
#[utoipa::path(get, path = "/v1/events", tag = "events", security(("api_key" = [])),
    params(
        ("type" = Option<String>, Query, description = "One event type: invoice.confirming, invoice.paid, invoice.overpaid, invoice.underpaid, invoice.expired, invoice.invalid, invoice.late_deposit, invoice.deposit_reversed, invoice.activated, invoice.draft_expired, invoice.sent, invoice.resolved, balance.credited, payout.completed, payout.failed, test"),
        ("created_after" = Option<String>, Query, format = DateTime, description = "RFC 3339; events strictly after"),
        ("created_before" = Option<String>, Query, format = DateTime, description = "RFC 3339; events strictly before"),
        ("invoice_id" = Option<uuid::Uuid>, Query, description = "Events about this invoice (its balance credits included)"),
        ("payout_id" = Option<uuid::Uuid>, Query, description = "Events about this payout"),
        crate::envelope::PageParams,
    ),
    responses(
        (status = 200, description = "One page of events, newest first", body = EventListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope),
        (status = 403, description = "Key lacks events:read", body = ErrorEnvelope),
    ))]
pub async fn list_events(
    State(state): State<HttpState>,
    auth: Allowed<perm::EventsRead>,
    q: QueryParams,
) -> ApiResult<Page<EventResponse>> {
    let page = q.page()?;
    let kinds = EventKind::ALL.map(EventKind::as_str).join(", ");
    let filter = ListFilter {
        event_type: q.one_of("type", |v| EventKind::parse(v).map(EventKind::as_str), &kinds)?,
        created_after: timestamp(&q, "created_after")?,
        created_before: timestamp(&q, "created_before")?,
        invoice_id: uuid(&q, "invoice_id")?,
        payout_id: uuid(&q, "payout_id")?,
    };
    let listed = owned::page(&state.db, &auth, &filter, page).await?;
    Ok(Page::listed(&listed.rows, EventResponse::from_model, &listed, page.limit))
}

/// Get one event, with exactly the body its webhooks carry.
#[utoipa::path(get, path = "/v1/events/{event_id}", tag = "events", security(("api_key" = [])),
    params(("event_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "The event, with the body its webhooks carry", body = EventEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn get_event(
    State(state): State<HttpState>,
    auth: Allowed<perm::EventsRead>,
    PathId(id): PathId<EventId>,
) -> ApiResult<Data<EventResponse>> {
    Ok(Data::ok(EventResponse::from_model(&query::get(&state, &auth, id).await?)))
}
