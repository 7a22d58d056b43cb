//! Test helpers (PRODUCT.md): simulate deposits to an invoice or static address, reverse them
//! and mine sandbox blocks, so a merchant's CI can drive every invoice event. Test keys only:
//! with a live key every route answers 404 as if it did not exist. This module checks the
//! request and who may act; every write is `domain::sandbox_payments`'s.

use axum::extract::State;
use entity::{Environment, invoice, sandbox_transfer, static_address};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::{Allowed, Principal, perm};
use crate::envelope::Data;
use crate::error::{ApiError, ApiResult, ErrorCode, ErrorEnvelope};
use crate::extract::{JsonBody, PathId};
use crate::state::HttpState;
use domain::gates;
use domain::sandbox_payments;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(simulate_deposit))
        .routes(routes!(reverse_deposit))
        .routes(routes!(mine_blocks))
}

crate::envelope::documented! {
    SandboxDepositEnvelope = SandboxDeposit;
    ChainTipEnvelope = ChainTip;
}

/// `POST /v1/test/deposits`: exactly one of `invoice_id` and `address_id`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SimulateDepositRequest {
    pub invoice_id: Option<Uuid>,
    /// A static address id.
    pub address_id: Option<Uuid>,
    /// Decimal string in the gate's asset, > 0, at most the gate's decimals.
    pub amount: String,
    /// Optional transaction hash (at most 128 characters); random when absent. Reusing one adds
    /// another output to that transaction.
    pub tx_hash: Option<String>,
}

/// A transfer on the sandbox chain.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxDeposit {
    pub id: Uuid,
    pub gate_id: String,
    pub tx_hash: String,
    pub output_index: i64,
    pub amount: String,
    /// The block it is included in; confirmations count from there.
    pub block_height: i64,
    pub reversed: bool,
}

impl From<sandbox_transfer::Model> for SandboxDeposit {
    fn from(t: sandbox_transfer::Model) -> Self {
        SandboxDeposit {
            id: t.id,
            gate_id: t.gate_id,
            tx_hash: t.tx_hash,
            output_index: t.output_index,
            amount: t.amount.0.normalize().to_string(),
            block_height: t.block_height,
            reversed: t.reversed_at.is_some(),
        }
    }
}

/// `POST /v1/test/blocks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MineRequest {
    /// Asset code or gate id.
    pub currency: String,
    pub network: Option<String>,
    /// 1..=1000 blocks.
    #[serde(deserialize_with = "crate::extract::whole_number")]
    pub count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChainTip {
    pub gate_id: String,
    pub height: u64,
}

/// Test keys only: a live key sees 404, as if the route did not exist.
fn test_only(who: &Principal) -> ApiResult<()> {
    match who.environment {
        Environment::Test => Ok(()),
        Environment::Live => Err(ApiError::not_found("route")),
    }
}

/// Simulate a deposit to an invoice's or static address's deposit address. It lands in the
/// next sandbox block; the scanner and tracker then handle it as any deposit.
#[utoipa::path(post, path = "/v1/test/deposits", tag = "test helpers", request_body = SimulateDepositRequest, security(("api_key" = [])),
    responses(
        (status = 201, description = "The sandbox transfer", body = SandboxDepositEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "Unknown invoice/address, or a live key", body = ErrorEnvelope),
        (status = 422, description = "validation_error: neither or both targets, a target without a deposit address, a bad amount", body = ErrorEnvelope),
    ))]
pub async fn simulate_deposit(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    body: Result<JsonBody<SimulateDepositRequest>, ApiError>,
) -> ApiResult<Data<SandboxDeposit>> {
    test_only(&auth)?;
    let req = body?.value;
    let (gate_id, address_key) = match (req.invoice_id, req.address_id) {
        (Some(id), None) => {
            let inv = invoice::Entity::find_by_id(id)
                .filter(invoice::Column::MerchantId.eq(auth.merchant_id))
                .filter(invoice::Column::Environment.eq(auth.environment))
                .one(&state.db)
                .await?
                .ok_or_else(|| ApiError::not_found("invoice"))?;
            match (inv.gate_id, inv.address_key) {
                (Some(g), Some(k)) => (g, k),
                _ => {
                    return Err(ApiError::unprocessable(
                        ErrorCode::ValidationError,
                        "invoice_id",
                        "the invoice has no deposit address yet (a draft is activated on its checkout page)",
                    ));
                }
            }
        }
        (None, Some(id)) => {
            let a = static_address::Entity::find_by_id(id)
                .filter(static_address::Column::MerchantId.eq(auth.merchant_id))
                .filter(static_address::Column::Environment.eq(auth.environment))
                .one(&state.db)
                .await?
                .ok_or_else(|| ApiError::not_found("address"))?;
            (a.gate_id, a.address_key)
        }
        _ => {
            return Err(ApiError::unprocessable(
                ErrorCode::ValidationError,
                "invoice_id",
                "give exactly one of invoice_id and address_id",
            ));
        }
    };
    let gate = gates::find(&gate_id).ok_or_else(|| ApiError::internal("target on an unknown gate"))?;
    let amount = domain::payouts::service::parse_amount(gate, &req.amount)?;
    if let Some(h) = &req.tx_hash
        && (h.is_empty() || h.len() > 128)
    {
        return Err(ApiError::unprocessable(ErrorCode::ValidationError, "tx_hash", "1 to 128 characters"));
    }
    let t =
        sandbox_payments::deposit(&state.db, &state.config.sandbox, gate, &address_key, amount, req.tx_hash.as_deref())
            .await?;
    Ok(Data::created(t.into()))
}

/// Reverse a simulated deposit: it leaves the sandbox chain, as after a reorg or double spend,
/// and the confirmation tracker is woken for its payment whatever its depth, so the reversal
/// reaches the invoice and the balance within a sweep (`pipeline.sweep_interval_ms`).
/// Idempotent.
#[utoipa::path(post, path = "/v1/test/deposits/{deposit_id}/reverse", tag = "test helpers", security(("api_key" = [])),
    params(("deposit_id" = Uuid, Path)),
    responses(
        (status = 200, description = "The sandbox transfer, reversed (also for a repeated call)", body = SandboxDepositEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "Unknown deposit, another merchant's, or a live key", body = ErrorEnvelope),
    ))]
pub async fn reverse_deposit(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    PathId(id): PathId,
) -> ApiResult<Data<SandboxDeposit>> {
    test_only(&auth)?;
    let t =
        sandbox_transfer::Entity::find_by_id(id).one(&state.db).await?.ok_or_else(|| ApiError::not_found("deposit"))?;
    if !owns_address(&state, &auth, &t.address_key).await? {
        return Err(ApiError::not_found("deposit"));
    }
    let gate = gates::find(&t.gate_id).ok_or_else(|| ApiError::internal("deposit on an unknown gate"))?;
    let t = sandbox_payments::reverse(&state.db, &state.config.sandbox, gate, id.into())
        .await?
        .ok_or_else(|| ApiError::not_found("deposit"))?;
    Ok(Data::ok(t.into()))
}

/// Whether the caller's merchant (test environment) owns the address a transfer went to.
async fn owns_address(state: &HttpState, who: &Principal, address_key: &str) -> ApiResult<bool> {
    let invoice = invoice::Entity::find()
        .filter(invoice::Column::AddressKey.eq(address_key))
        .filter(invoice::Column::Environment.eq(who.environment))
        .filter(invoice::Column::MerchantId.eq(who.merchant_id))
        .one(&state.db)
        .await?;
    if invoice.is_some() {
        return Ok(true);
    }
    Ok(static_address::Entity::find()
        .filter(static_address::Column::AddressKey.eq(address_key))
        .filter(static_address::Column::Environment.eq(who.environment))
        .filter(static_address::Column::MerchantId.eq(who.merchant_id))
        .one(&state.db)
        .await?
        .is_some())
}

/// Mine sandbox blocks on a gate at once, to move confirmations along.
#[utoipa::path(post, path = "/v1/test/blocks", tag = "test helpers", request_body = MineRequest, security(("api_key" = [])),
    responses(
        (status = 200, description = "The gate's sandbox chain tip after mining", body = ChainTipEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "A live key", body = ErrorEnvelope),
        (status = 422, description = "unsupported_currency, validation_error (count)", body = ErrorEnvelope),
    ))]
pub async fn mine_blocks(
    State(state): State<HttpState>,
    auth: Allowed<perm::InvoicesWrite>,
    body: Result<JsonBody<MineRequest>, ApiError>,
) -> ApiResult<Data<ChainTip>> {
    test_only(&auth)?;
    let req = body?.value;
    let gate = gates::resolve(&req.currency, req.network.as_deref())?;
    if !(1..=1000).contains(&req.count) {
        return Err(ApiError::unprocessable(ErrorCode::ValidationError, "count", "1 to 1000 blocks"));
    }
    let height = sandbox_payments::mine(&state.db, &state.config.sandbox, gate, req.count).await?;
    Ok(Data::ok(ChainTip { gate_id: gate.id.into(), height }))
}
