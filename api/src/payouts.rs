//! HTTP handlers, router and OpenAPI paths of the payout resource: `/v1/payouts`.

use axum::extract::State;
use entity::PayoutStatus;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{JsonBody, PathId, QueryParams};
use crate::state::HttpState;
use domain::owned;
use domain::payouts::service;
use domain::payouts::service::Created;
use domain::payouts::types::{CreatePayoutRequest, PayoutFull, PayoutShort};
use entity::PayoutId;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(create_payout, list_payouts))
        .routes(routes!(get_payout))
        .routes(routes!(cancel_payout))
}

crate::envelope::documented! {
    PayoutShortEnvelope = PayoutShort;
    PayoutFullEnvelope = PayoutFull;
    PayoutListEnvelope = Vec<PayoutFull>;
}

/// Create a payout; funds are reserved at once. Starts `pending_approval` (or `approved` with
/// the merchant's auto-approve setting).
#[utoipa::path(post, path = "/v1/payouts", tag = "payouts", request_body = CreatePayoutRequest, security(("api_key" = [])),
    responses(
        (status = 201, description = "Created (short field set); also for a repeated idempotency_key (header `Idempotent-Replayed: true`)", body = PayoutShortEnvelope),
        (status = 400, description = "Malformed JSON or wrong types", body = ErrorEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 422, description = "validation_error (bounds, destination), unsupported_currency, amount_out_of_range, insufficient_balance", body = ErrorEnvelope),
        (status = 503, description = "gate_offline", body = ErrorEnvelope),
    ))]
pub async fn create_payout(
    State(state): State<HttpState>,
    auth: Allowed<perm::PayoutsWrite>,
    body: JsonBody<CreatePayoutRequest>,
) -> ApiResult<Data<PayoutShort>> {
    Ok(match service::create(&state, &auth, &body.value).await? {
        Created::New(p) => Data::created(PayoutShort::from_model(&p)),
        Created::Replayed(p) => Data::created(PayoutShort::from_model(&p)).with_header("idempotent-replayed", "true"),
    })
}

/// List payouts, newest first (full field set).
#[utoipa::path(get, path = "/v1/payouts", tag = "payouts", security(("api_key" = [])),
    params(
        ("status" = Option<entity::PayoutStatus>, Query),
        crate::envelope::PageParams,
    ),
    responses((status = 200, description = "One page of payouts, newest first", body = PayoutListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope)))]
pub async fn list_payouts(
    State(state): State<HttpState>,
    auth: Allowed<perm::PayoutsRead>,
    q: QueryParams,
) -> ApiResult<Page<PayoutFull>> {
    let page = q.page()?;
    let status = q.one_of("status", PayoutStatus::parse, PayoutStatus::WIRE_LIST)?;
    let listed = owned::page(&state.db, &auth, &service::ListFilter { status }, page).await?;
    Ok(Page::listed(&listed.rows, PayoutFull::from_model, &listed, page.limit))
}

/// Get a payout (full field set).
#[utoipa::path(get, path = "/v1/payouts/{payout_id}", tag = "payouts", security(("api_key" = [])),
    params(("payout_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "The payout", body = PayoutFullEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
pub async fn get_payout(
    State(state): State<HttpState>,
    auth: Allowed<perm::PayoutsRead>,
    PathId(id): PathId<PayoutId>,
) -> ApiResult<Data<PayoutFull>> {
    Ok(Data::ok(PayoutFull::from_model(&service::get(&state, &auth, id).await?)))
}

/// Cancel a payout in `pending_approval` or `approved`; the reservation is released.
#[utoipa::path(post, path = "/v1/payouts/{payout_id}/cancel", tag = "payouts", security(("api_key" = [])),
    params(("payout_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "Cancelled; the reservation is released to the available balance", body = PayoutShortEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "payout_not_cancellable", body = ErrorEnvelope)))]
pub async fn cancel_payout(
    State(state): State<HttpState>,
    auth: Allowed<perm::PayoutsWrite>,
    PathId(id): PathId<PayoutId>,
) -> ApiResult<Data<PayoutShort>> {
    Ok(Data::ok(PayoutShort::from_model(&service::cancel(&state, &auth, id).await?)))
}
