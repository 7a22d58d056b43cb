//! HTTP handlers, router and OpenAPI paths of the invoice resource: `/v1/invoices`.

use entity::InvoiceStatus;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{JsonBody, PathId, QueryParams};
use crate::state::HttpState;
use domain::invoices::service;
use domain::invoices::service::{Created, ListFilter};
use domain::invoices::types::{CreateInvoiceRequest, InvoiceResponse};
use domain::owned;
use entity::InvoiceId;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(create_invoice, list_invoices))
        .routes(routes!(get_invoice))
        .routes(routes!(cancel_invoice))
        .routes(routes!(resolve_invoice))
}

crate::envelope::documented! {
    InvoiceEnvelope = InvoiceResponse;
    InvoiceListEnvelope = Vec<InvoiceResponse>;
}

/// Create an invoice.
#[utoipa::path(post, path = "/v1/invoices", tag = "invoices", request_body = CreateInvoiceRequest,
    security(("api_key" = [])),
    responses(
        (status = 201, description = "Created; also returned for a replayed idempotency key (header `Idempotent-Replayed: true`)", body = InvoiceEnvelope),
        (status = 400, description = "Malformed request", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown or revoked key", body = ErrorEnvelope),
        (status = 403, description = "Key lacks invoices:write", body = ErrorEnvelope),
        (status = 422, description = "unsupported_currency, amount_out_of_range, idempotency_key_mismatch", body = ErrorEnvelope),
        (status = 503, description = "gate_offline, rates_unavailable", body = ErrorEnvelope),
    ))]
pub async fn create_invoice(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    body: JsonBody<CreateInvoiceRequest>,
) -> ApiResult<Data<InvoiceResponse>> {
    let base = &state.config.public_base_url;
    Ok(match service::create(&state, &auth, body.value, &body.raw).await? {
        Created::New(inv) => Data::created(InvoiceResponse::from_model(&inv, &[], base)),
        Created::Replayed(inv) => {
            let (inv, payments) = service::get(&state, &auth, inv.id.into()).await?;
            Data::created(InvoiceResponse::from_model(&inv, &payments, base)).with_header("idempotent-replayed", "true")
        }
    })
}

/// List invoices of the key's merchant and environment, newest first.
#[utoipa::path(get, path = "/v1/invoices", tag = "invoices", security(("api_key" = [])),
    params(
        ("status" = Option<entity::InvoiceStatus>, Query),
        ("currency" = Option<String>, Query, description = "Asset code or gate id"),
        ("network" = Option<String>, Query),
        ("external_id" = Option<String>, Query, description = "Only the invoices with this external_id (the merchant's own reference)"),
        crate::envelope::PageParams,
    ),
    responses(
        (status = 200, description = "One page of invoices, newest first", body = InvoiceListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope),
    ))]
pub async fn list_invoices(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesRead>,
    q: QueryParams,
) -> ApiResult<Page<InvoiceResponse>> {
    let page = q.page()?;
    let filter = ListFilter {
        status: q.one_of("status", InvoiceStatus::parse, InvoiceStatus::WIRE_LIST)?,
        currency: q.get("currency").filter(|s| !s.is_empty()).map(str::to_owned),
        network: q.get("network").filter(|s| !s.is_empty()).map(str::to_owned),
        external_id: q.get("external_id").filter(|s| !s.is_empty()).map(str::to_owned),
        static_address_id: None,
        ..Default::default()
    };
    let mut listed = owned::page(&state.db, &auth, &filter, page).await?;
    let rows = service::with_payments(&state.db, std::mem::take(&mut listed.rows)).await?;
    let base = &state.config.public_base_url;
    Ok(Page::listed(&rows, |(inv, p)| InvoiceResponse::from_model(inv, p, base), &listed, page.limit))
}

/// Get an invoice with its payments.
#[utoipa::path(get, path = "/v1/invoices/{invoice_id}", tag = "invoices", security(("api_key" = [])),
    params(("invoice_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "The invoice with its payments", body = InvoiceEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
    ))]
pub async fn get_invoice(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesRead>,
    PathId(id): PathId<InvoiceId>,
) -> ApiResult<Data<InvoiceResponse>> {
    let (inv, payments) = service::get(&state, &auth, id).await?;
    Ok(Data::ok(InvoiceResponse::from_model(&inv, &payments, &state.config.public_base_url)))
}

/// Cancel a pending invoice.
#[utoipa::path(post, path = "/v1/invoices/{invoice_id}/cancel", tag = "invoices", security(("api_key" = [])),
    params(("invoice_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "Cancelled", body = InvoiceEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "invoice_not_cancellable", body = ErrorEnvelope),
    ))]
pub async fn cancel_invoice(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    PathId(id): PathId<InvoiceId>,
) -> ApiResult<Data<InvoiceResponse>> {
    let (inv, payments) = service::cancel(&state, &auth, id).await?;
    Ok(Data::ok(InvoiceResponse::from_model(&inv, &payments, &state.config.public_base_url)))
}

/// Resolve an invoice by hand: accept what was received as payment in full.
///
/// For an `underpaid` or `overpaid` invoice, or an `expired` or `cancelled` one that took late
/// deposits: it becomes `paid`, and `invoice.resolved` is sent. Balances do not move (every
/// confirmed deposit was credited already); refund an overpaid surplus with `POST /v1/refunds`
/// if you wish (`amount_paid` − `amount_requested`).
#[utoipa::path(post, path = "/v1/invoices/{invoice_id}/resolve", tag = "invoices", security(("api_key" = [])),
    params(("invoice_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "Resolved: now paid", body = InvoiceEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "invoice_not_resolvable", body = ErrorEnvelope),
    ))]
pub async fn resolve_invoice(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    PathId(id): PathId<InvoiceId>,
) -> ApiResult<Data<InvoiceResponse>> {
    let (inv, payments) = service::resolve(&state, &auth, id).await?;
    Ok(Data::ok(InvoiceResponse::from_model(&inv, &payments, &state.config.public_base_url)))
}

use axum::extract::State;
