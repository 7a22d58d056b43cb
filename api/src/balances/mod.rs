//! Balances and their ledger: `/v1/balances`, `/v1/balances/{currency}/ledger`.

use axum::extract::State;
use chrono::{DateTime, Utc};
use entity::{EntryType, balance, ledger_entry};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::{Allowed, perm};
use crate::envelope::{Page, Pagination};
use crate::error::{ApiError, ApiResult, ErrorCode, ErrorEnvelope};
use crate::extract::QueryParams;
use crate::state::HttpState;
use domain::db::Position;
use domain::gates::{self, GATES};
use domain::invoices::types::ts;

/// This resource's routes: each handler's `#[utoipa::path]` is its one declaration of method and
/// path, served here and described in the OpenAPI document with the schemas it names.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(list_balances)).routes(routes!(list_ledger))
}

crate::envelope::documented! {
    BalanceListEnvelope = Vec<BalanceResponse>;
    LedgerListEnvelope = Vec<LedgerEntryResponse>;
}

/// A balance row (PRODUCT.md): one per gate, zeros included.
#[derive(Debug, Serialize, ToSchema)]
pub struct BalanceResponse {
    pub currency: String,
    pub network: String,
    pub gate_id: String,
    /// Spendable.
    pub available: String,
    /// Seen on chain, awaiting confirmations.
    pub pending: String,
    /// Held for payouts and refunds in progress.
    pub reserved: String,
    /// available + pending + reserved.
    pub total: String,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    /// Last change; null for a balance never touched.
    pub updated_at: Option<String>,
}

/// A ledger entry (PRODUCT.md).
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerEntryResponse {
    pub id: Uuid,
    pub currency: String,
    pub network: String,
    pub gate_id: String,
    #[serde(rename = "type")]
    pub entry_type: EntryType,
    /// Which part of the balance moved: `available`, `pending` or `reserved`.
    pub bucket: entity::Bucket,
    /// Signed change.
    pub amount: String,
    /// The bucket's value after this entry.
    pub balance_after: String,
    pub reference_type: Option<String>,
    pub reference_id: Option<Uuid>,
    pub description: Option<String>,
    pub created_at: String,
}

/// Balances of the key's merchant and environment: one row per gate, zeros included.
/// `limit`/`offset` are accepted (and validated) but reserved: every gate is always returned.
#[utoipa::path(get, path = "/v1/balances", tag = "balances", security(("api_key" = [])),
    params(
        ("environment" = Option<String>, Query, description = "Ignored: the key decides"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 100, description = "Reserved, no effect (1..100)"),
        ("offset" = Option<i64>, Query, minimum = 0, description = "Reserved, no effect (>= 0)"),
    ),
    responses((status = 200, description = "One balance per gate, zeros included", body = BalanceListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope)))]
pub async fn list_balances(
    State(state): State<HttpState>,
    auth: Allowed<perm::BalancesRead>,
    q: QueryParams,
) -> ApiResult<Page<BalanceResponse>> {
    q.pagination()?;
    let rows = balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(auth.merchant_id))
        .filter(balance::Column::Environment.eq(auth.environment))
        .all(&state.db)
        .await?;
    let data: Vec<BalanceResponse> = GATES
        .iter()
        .map(|g| {
            let row = rows.iter().find(|r| r.gate_id == g.id);
            let zero = rust_decimal::Decimal::ZERO;
            let (a, p, r) = row.map_or((zero, zero, zero), |b| (b.available.0, b.pending.0, b.reserved.0));
            let total = a.checked_add(p).and_then(|x| x.checked_add(r)).unwrap_or(rust_decimal::Decimal::MAX);
            BalanceResponse {
                currency: g.asset.into(),
                network: g.network.into(),
                gate_id: g.id.into(),
                available: a.normalize().to_string(),
                pending: p.normalize().to_string(),
                reserved: r.normalize().to_string(),
                total: total.normalize().to_string(),
                environment: auth.environment.as_str().into(),
                updated_at: row.map(|b| ts(b.updated_at)),
            }
        })
        .collect();
    let n = data.len() as u64;
    Ok(Page { data, pagination: Pagination::new(n, n, 0) })
}

fn parse_time(q: &QueryParams, name: &str) -> ApiResult<Option<DateTime<Utc>>> {
    match q.get(name) {
        None => Ok(None),
        Some(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| ApiError::invalid_field(name, format!("must be an RFC 3339 timestamp, got {s:?}"))),
    }
}

/// Ledger history of one currency (gate id, or an asset code on one network only), newest first.
#[utoipa::path(get, path = "/v1/balances/{currency}/ledger", tag = "balances", security(("api_key" = [])),
    params(
        ("currency" = String, Path, description = "Gate id (`tron_usdt`) or an unambiguous asset code (`BTC`)"),
        ("type" = Option<entity::EntryType>, Query, description = "Entry type filter"),
        ("from" = Option<String>, Query, format = DateTime, description = "RFC 3339; entries at or after"),
        ("to" = Option<String>, Query, format = DateTime, description = "RFC 3339; entries before"),
        crate::envelope::PageParams,
    ),
    responses((status = 200, description = "One page of the currency's ledger entries, newest first", body = LedgerListEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, description = "not_found: a cursor (starting_after, ending_before) names no row of this list", body = ErrorEnvelope),
        (status = 422, description = "unsupported_currency: unknown or ambiguous currency", body = ErrorEnvelope)))]
pub async fn list_ledger(
    State(state): State<HttpState>,
    auth: Allowed<perm::BalancesRead>,
    axum::extract::Path(currency): axum::extract::Path<String>,
    q: QueryParams,
) -> ApiResult<Page<LedgerEntryResponse>> {
    let gate = gates::resolve(&currency, None)
        .map_err(|e| ApiError::unprocessable(ErrorCode::UnsupportedCurrency, "currency", e.to_string()))?;
    let page = q.page()?;
    let entry_type = q.one_of("type", EntryType::parse, EntryType::WIRE_LIST)?;
    let (from, to) = (parse_time(&q, "from")?, parse_time(&q, "to")?);
    let mut query = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(auth.merchant_id))
        .filter(ledger_entry::Column::Environment.eq(auth.environment))
        .filter(ledger_entry::Column::GateId.eq(gate.id));
    if let Some(t) = entry_type {
        query = query.filter(ledger_entry::Column::EntryType.eq(t));
    }
    if let Some(f) = from {
        query = query.filter(ledger_entry::Column::CreatedAt.gte(f));
    }
    if let Some(t) = to {
        query = query.filter(ledger_entry::Column::CreatedAt.lt(t));
    }
    // A cursor is an entry of the same ledger (merchant, environment and currency).
    let cursor = |field: &'static str, id: Option<Uuid>| {
        let own = query.clone();
        let db = &state.db;
        async move {
            let Some(id) = id else { return Ok::<_, ApiError>(None) };
            let row = own.filter(ledger_entry::Column::Id.eq(id)).one(db).await?;
            let row = row.ok_or_else(|| domain::owned::cursor_not_found(field, "ledger entry", id))?;
            Ok(Some((sea_orm::Value::from(row.created_at), row.id)))
        }
    };
    let at = Position {
        offset: page.offset,
        after: cursor("starting_after", page.after).await?,
        before: cursor("ending_before", page.before).await?,
    };
    // The total from the list counters (currency and type), or counted within a time window.
    let total = if from.is_none() && to.is_none() {
        let tally = domain::ledger::tally(gate.id, entry_type);
        domain::list_counts::sum(&state.db, &auth, tally.list, &tally.key, domain::list_counts::Days::Whole).await?
    } else {
        sea_orm::PaginatorTrait::count(query.clone(), &state.db).await?
    };
    let columns = (ledger_entry::Column::CreatedAt, ledger_entry::Column::Id);
    let listed = domain::db::newest_first(&state.db, query, columns, page.limit, at, total).await?;
    Ok(Page::listed(
        &listed.rows,
        |e| LedgerEntryResponse {
            id: e.id,
            currency: gate.asset.into(),
            network: gate.network.into(),
            gate_id: gate.id.into(),
            entry_type: e.entry_type,
            bucket: e.bucket,
            amount: e.amount.0.normalize().to_string(),
            balance_after: e.balance_after.0.normalize().to_string(),
            reference_type: e.reference_type.clone(),
            reference_id: e.reference_id,
            description: e.description.clone(),
            created_at: ts(e.created_at),
        },
        &listed,
        page.limit,
    ))
}
