//! HTTP handlers, router and OpenAPI paths of the static address resource: `/v1/addresses` (spec 4.12).

use axum::extract::State;
use entity::InvoiceStatus;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::{Data, Page};
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{JsonBody, PathId, QueryParams};
use crate::invoices::InvoiceListEnvelope;
use crate::state::HttpState;
use domain::invoices::types::InvoiceResponse;
use domain::owned;
use domain::static_addresses::service;
use domain::static_addresses::service::ListFilter;
use domain::static_addresses::types::{CreateStaticAddressRequest, StaticAddressResponse};
use entity::StaticAddressId;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(create_address, list_addresses))
        .routes(routes!(get_address))
        .routes(routes!(list_address_invoices))
}

crate::envelope::documented! {
    StaticAddressEnvelope = StaticAddressResponse;
    StaticAddressListEnvelope = Vec<StaticAddressResponse>;
}

/// Create a permanent static deposit address. Success is 200: spec §4 ("unless stated, success
/// returns 200") states no other code for this endpoint.
#[utoipa::path(post, path = "/v1/addresses", tag = "addresses", request_body = CreateStaticAddressRequest,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The new static address", body = StaticAddressEnvelope),
        (status = 400, description = "Malformed request", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown or revoked key", body = ErrorEnvelope),
        (status = 403, description = "Key lacks addresses:write", body = ErrorEnvelope),
        (status = 422, description = "unsupported_currency", body = ErrorEnvelope),
        (status = 503, description = "gate_offline", body = ErrorEnvelope),
    ))]
pub async fn create_address(
    State(state): State<HttpState>,
    auth: Allowed<perm::AddressesWrite>,
    body: JsonBody<CreateStaticAddressRequest>,
) -> ApiResult<Data<StaticAddressResponse>> {
    let model = service::create(&state, &auth, body.value).await?;
    Ok(Data::ok(StaticAddressResponse::from_model(&model)))
}

/// List static addresses of the key's merchant and environment, newest first.
#[utoipa::path(get, path = "/v1/addresses", tag = "addresses", security(("api_key" = [])),
    params(
        ("currency" = Option<String>, Query, description = "Asset code or gate id"),
        ("network" = Option<String>, Query),
        crate::envelope::PageParams,
    ),
    responses(
        (status = 200, description = "One page of static addresses, newest first", body = StaticAddressListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope),
    ))]
pub async fn list_addresses(
    State(state): State<HttpState>,
    auth: Allowed<perm::AddressesRead>,
    q: QueryParams,
) -> ApiResult<Page<StaticAddressResponse>> {
    let page = q.page()?;
    let filter = ListFilter {
        currency: q.get("currency").filter(|s| !s.is_empty()).map(str::to_owned),
        network: q.get("network").filter(|s| !s.is_empty()).map(str::to_owned),
    };
    let listed = owned::page(&state.db, &auth, &filter, page).await?;
    Ok(Page::listed(&listed.rows, StaticAddressResponse::from_model, &listed, page.limit))
}

/// Get a static address.
#[utoipa::path(get, path = "/v1/addresses/{address_id}", tag = "addresses", security(("api_key" = [])),
    params(("address_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "The static address", body = StaticAddressEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
    ))]
pub async fn get_address(
    State(state): State<HttpState>,
    auth: Allowed<perm::AddressesRead>,
    PathId(id): PathId<StaticAddressId>,
) -> ApiResult<Data<StaticAddressResponse>> {
    let model = service::get(&state, &auth, id).await?;
    Ok(Data::ok(StaticAddressResponse::from_model(&model)))
}

/// List the invoices auto-created from deposits to a static address, newest first. Needs
/// `addresses:read` (not `invoices:read`): the list is part of the address resource.
#[utoipa::path(get, path = "/v1/addresses/{address_id}/invoices", tag = "addresses", security(("api_key" = [])),
    params(
        ("address_id" = uuid::Uuid, Path),
        ("status" = Option<entity::InvoiceStatus>, Query),
        crate::envelope::PageParams,
    ),
    responses(
        (status = 200, description = "One page of the invoices the address's deposits created, newest first", body = InvoiceListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
    ))]
pub async fn list_address_invoices(
    State(state): State<HttpState>,
    auth: Allowed<perm::AddressesRead>,
    PathId(id): PathId<StaticAddressId>,
    q: QueryParams,
) -> ApiResult<Page<InvoiceResponse>> {
    let page = q.page()?;
    let status = q.one_of("status", InvoiceStatus::parse, InvoiceStatus::WIRE_LIST)?;
    let address = service::get(&state, &auth, id).await?;
    let filter =
        domain::invoices::service::ListFilter { status, static_address_id: Some(address.id), ..Default::default() };
    let mut listed = owned::page(&state.db, &auth, &filter, page).await?;
    let rows = domain::invoices::service::with_payments(&state.db, std::mem::take(&mut listed.rows)).await?;
    let base = &state.config.public_base_url;
    Ok(Page::listed(&rows, |(inv, p)| InvoiceResponse::from_model(inv, p, base), &listed, page.limit))
}
