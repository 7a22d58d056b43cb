//! The merchant API's routes, each declared once by its handler's `#[utoipa::path]`: the
//! router serves them (`app::router`) and the OpenAPI document describes them
//! (`openapi::document`), both from this one list.

use utoipa_axum::router::OpenApiRouter;

use crate::state::HttpState;

/// The routes the OpenAPI document describes, each declared once by its handler's
/// `#[utoipa::path]`: the axum routes and the document's paths come from the same list.
pub fn documented_routes() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .merge(crate::invoices::router())
        .merge(crate::static_addresses::router())
        .merge(crate::public::router())
        .merge(crate::balances::router())
        .merge(crate::payouts::router())
        .merge(crate::refunds::router())
        .merge(crate::events::router())
        .merge(crate::settings::router())
        .merge(crate::api_keys::router())
        .merge(crate::webhook_deliveries::router())
        .merge(crate::exports::router())
        .merge(crate::webhook_endpoints::router())
        .merge(crate::test_helpers::router())
}
