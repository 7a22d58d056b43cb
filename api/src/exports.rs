//! Accounting exports: `GET /v1/exports/{kind}` (permission `exports:read`), CSV streamed page
//! by page (domain::exports). [`csv_response`] is the streamed answer any route can give.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::error::{ApiError, ApiResult, ErrorEnvelope};
use crate::extract::QueryParams;
use crate::state::HttpState;
use domain::exports::{self, ExportKind};
use entity::{Environment, MerchantId};

/// This resource's routes.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(export))
}

/// The streamed CSV download of `merchant`'s `kind` rows in `environment` created in
/// `[from, to)`: `text/csv; charset=utf-8`, an attachment named `<kind>-<from>-<to>.csv`, one
/// chunk per page of `page_size` rows.
pub fn csv_response(
    db: sea_orm::DatabaseConnection,
    merchant: MerchantId,
    environment: Environment,
    kind: ExportKind,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    page_size: u64,
) -> Response {
    let stream = exports::csv_stream(db, merchant, environment, kind, from, to, page_size);
    let disposition = format!("attachment; filename=\"{}\"", kind.file_name(from, to));
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    resp
}

/// The merchant's invoices, payments, ledger entries or payouts created in `[from, to)` in this
/// environment, oldest first, as CSV (a header row, then one row each), streamed. Amounts are
/// exact decimals, timestamps RFC 3339 UTC; free text starting with `= + - @`, a tab or a
/// carriage return is prefixed with `'`. Not a point-in-time snapshot: rows are read page by
/// page as the response streams.
#[utoipa::path(get, path = "/v1/exports/{kind}", tag = "exports", security(("api_key" = [])),
    params(
        ("kind" = ExportKind, Path, description = "What to export"),
        ("from" = String, Query, description = "Start of the range, inclusive: an RFC 3339 timestamp or a YYYY-MM-DD date (midnight UTC)"),
        ("to" = String, Query, description = "End of the range, exclusive: an RFC 3339 timestamp or a YYYY-MM-DD date (midnight UTC); after `from`, at most 400 days after it"),
    ),
    responses(
        (status = 200, description = "The CSV, streamed; `Content-Disposition: attachment; filename=\"<kind>-<from>-<to>.csv\"`",
            content_type = "text/csv", body = String,
            headers(("Content-Disposition" = String, description = "attachment; filename=\"<kind>-<from>-<to>.csv\""))),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn export(
    State(state): State<HttpState>,
    auth: Allowed<perm::ExportsRead>,
    kind: Result<Path<String>, PathRejection>,
    q: QueryParams,
) -> ApiResult<Response> {
    let kind = match kind {
        Ok(Path(k)) => ExportKind::parse_field(&k)?,
        Err(e) => return Err(ApiError::invalid_field("kind", e.body_text())),
    };
    let range = exports::parse_range(q.get("from"), q.get("to"))?;
    Ok(csv_response(state.db.clone(), auth.merchant_id, auth.environment, kind, range, exports::PAGE_SIZE))
}
