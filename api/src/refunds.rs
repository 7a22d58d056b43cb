//! HTTP handlers, router and OpenAPI paths of the refund resource: `/v1/refunds`.

use axum::extract::State;
use entity::RefundStatus;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{IdempotencyKey, JsonBody, PathId, QueryParams};
use crate::state::HttpState;
use domain::owned;
use domain::refunds::service;
use domain::refunds::service::{Created, ListFilter};
use domain::refunds::types::{CreateRefundRequest, RefundResponse};
use entity::RefundId;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(create_refund, list_refunds)).routes(routes!(get_refund))
}

crate::envelope::documented! {
    RefundEnvelope = RefundResponse;
    RefundListEnvelope = Vec<RefundResponse>;
}

/// Refund (part of) an invoice's credited payment. The refund runs over a linked payout created
/// and reserved in the same transaction; it starts `pending` and mirrors the payout's status.
#[utoipa::path(post, path = "/v1/refunds", tag = "refunds", request_body = CreateRefundRequest, security(("api_key" = [])),
    params(("Idempotency-Key" = String, Header, description = "Required, 1..255 characters. A replay with the same body returns the recorded refund without new side effects.")),
    responses(
        (status = 201, description = "Created; also for a replay of the same key and body (header `Idempotent-Replayed: true`)", body = RefundEnvelope),
        (status = 400, description = "Missing or invalid Idempotency-Key, malformed JSON, wrong types, malformed invoice_id", body = ErrorEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "Invoice absent, another merchant's or another environment's", body = ErrorEnvelope),
        (status = 409, description = "idempotency_key_mismatch: the key was used with another body", body = ErrorEnvelope),
        (status = 422, description = "validation_error (bounds, destination), unsupported_currency, refund_currency_mismatch (not the invoice's credited asset), refund_exceeds_credit, amount_out_of_range, insufficient_balance", body = ErrorEnvelope),
        (status = 503, description = "gate_offline", body = ErrorEnvelope),
    ))]
pub async fn create_refund(
    State(state): State<HttpState>,
    auth: Allowed<perm::RefundsWrite>,
    IdempotencyKey(key): IdempotencyKey,
    body: JsonBody<CreateRefundRequest>,
) -> ApiResult<Data<RefundResponse>> {
    // Extractors run in order: 401, 403 (`Allowed`), then the header, then the body.
    Ok(match service::create(&state, &auth, &key, &body.value, &body.raw).await? {
        Created::New(r, p) => Data::created(RefundResponse::new(&r, &p)),
        Created::Replayed(r, p) => {
            Data::created(RefundResponse::new(&r, &p)).with_header("idempotent-replayed", "true")
        }
    })
}

/// List refunds, newest first.
#[utoipa::path(get, path = "/v1/refunds", tag = "refunds", security(("api_key" = [])),
    params(
        ("status" = Option<entity::RefundStatus>, Query),
        ("invoice_id" = Option<uuid::Uuid>, Query, description = "Only this invoice's refunds"),
        crate::envelope::PageParams,
    ),
    responses((status = 200, description = "One page of refunds, newest first", body = RefundListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope)))]
pub async fn list_refunds(
    State(state): State<HttpState>,
    auth: Allowed<perm::RefundsRead>,
    q: QueryParams,
) -> ApiResult<Page<RefundResponse>> {
    let page = q.page()?;
    let status = q.one_of("status", RefundStatus::parse, RefundStatus::WIRE_LIST)?;
    let invoice_id = q.one_of("invoice_id", |s| uuid::Uuid::parse_str(s).ok(), "a UUID")?;
    let mut listed = owned::page(&state.db, &auth, &ListFilter { status, invoice_id }, page).await?;
    let rows = service::with_payouts(&state.db, std::mem::take(&mut listed.rows)).await?;
    Ok(Page::listed(&rows, |(r, p)| RefundResponse::new(r, p), &listed, page.limit))
}

/// Get a refund.
#[utoipa::path(get, path = "/v1/refunds/{refund_id}", tag = "refunds", security(("api_key" = [])),
    params(("refund_id" = uuid::Uuid, Path)),
    responses((status = 200, description = "The refund, with its linked payout's status", body = RefundEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope)))]
pub async fn get_refund(
    State(state): State<HttpState>,
    auth: Allowed<perm::RefundsRead>,
    PathId(id): PathId<RefundId>,
) -> ApiResult<Data<RefundResponse>> {
    let (r, p) = service::get(&state, &auth, id).await?;
    Ok(Data::ok(RefundResponse::new(&r, &p)))
}
