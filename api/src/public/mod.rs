//! Public endpoints (no key): `/v1/currencies`, `/v1/rates`.

use axum::extract::State;
use entity::Environment;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::List;
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::QueryParams;
use crate::state::HttpState;
use domain::config::GateStatus;
use domain::gates::GATES;
use domain::invoices::types::ts;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(list_currencies)).routes(routes!(list_rates))
}

crate::envelope::documented! {
    CurrencyListEnvelope = Vec<CurrencyResponse>;
    RateListEnvelope = Vec<RateResponse>;
}

/// A gate as published (spec 2.8).
#[derive(Debug, Serialize, ToSchema)]
pub struct CurrencyResponse {
    /// Gate id.
    pub id: String,
    pub name: String,
    /// Asset code.
    pub currency: String,
    pub network: String,
    pub decimals: u32,
    pub confirmations_required: u32,
    /// `online` or `offline`.
    pub status: GateStatus,
    /// A fresh USD rate exists, so USD amounts (`amount_usd`, USD-priced invoices) are available.
    pub usd_nominal_available: bool,
    pub min_amount: String,
    pub max_amount: String,
}

/// A rate row (PRODUCT.md): price of one unit of `currency` in `fiat_currency`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RateResponse {
    pub currency: String,
    pub fiat_currency: String,
    pub rate: String,
    pub source: String,
    pub updated_at: String,
}

fn environment(q: &QueryParams) -> ApiResult<Environment> {
    Ok(q.one_of("environment", Environment::parse, "live, test")?.unwrap_or(Environment::Live))
}

/// Supported currencies (gates) and their availability in an environment.
#[utoipa::path(get, path = "/v1/currencies", tag = "public",
    params(("environment" = Option<entity::Environment>, Query, description = "live (default) or test")),
    responses((status = 200, description = "Every gate with its limits and availability in the environment", body = CurrencyListEnvelope), (status = 400, body = ErrorEnvelope)))]
pub async fn list_currencies(State(state): State<HttpState>, q: QueryParams) -> ApiResult<List<CurrencyResponse>> {
    let env = environment(&q)?;
    Ok(List(
        GATES
            .iter()
            .map(|g| {
                let (min, max) = state.gate_limits(env, g);
                CurrencyResponse {
                    id: g.id.into(),
                    name: g.name.into(),
                    currency: g.asset.into(),
                    network: g.network.into(),
                    decimals: g.decimals,
                    confirmations_required: g.confirmations,
                    status: state.gate_status(env, g),
                    usd_nominal_available: state.rates.get(env, g.asset, "USD").is_some(),
                    min_amount: min.normalize().to_string(),
                    max_amount: max.normalize().to_string(),
                }
            })
            .collect(),
    ))
}

/// Current exchange rates (fresh ones only).
#[utoipa::path(get, path = "/v1/rates", tag = "public",
    params(
        ("currency" = Option<String>, Query, pattern = "^[A-Za-z0-9]{0,20}$", description = "Asset code filter, e.g. BTC"),
        ("fiat" = Option<String>, Query, pattern = "^[A-Za-z0-9]{0,20}$", description = "Fiat filter, e.g. USD"),
        ("environment" = Option<entity::Environment>, Query, description = "live (default) or test: which rates source"),
    ),
    responses((status = 200, description = "The fresh rates; a pair whose rate is stale is left out", body = RateListEnvelope), (status = 400, body = ErrorEnvelope)))]
pub async fn list_rates(State(state): State<HttpState>, q: QueryParams) -> ApiResult<List<RateResponse>> {
    let env = environment(&q)?;
    let currency = q.get("currency").filter(|s| !s.is_empty());
    let fiat = q.get("fiat").filter(|s| !s.is_empty());
    for (name, v) in [("currency", currency), ("fiat", fiat)] {
        if let Some(v) = v
            && (v.len() > 20 || !v.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            return Err(crate::error::ApiError::invalid_field(name, "must be an alphanumeric code"));
        }
    }
    Ok(List(
        state
            .rates
            .list(env, currency, fiat)
            .into_iter()
            .map(|r| RateResponse {
                currency: r.currency,
                fiat_currency: r.fiat_currency,
                rate: r.rate.normalize().to_string(),
                source: r.source,
                updated_at: ts(r.updated_at),
            })
            .collect(),
    ))
}
