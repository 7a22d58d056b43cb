//! Exports: the bookkeeper's CSV of invoices, payments, ledger entries or payouts for a date
//! range, downloaded from the page (the same stream as `GET /v1/exports/{kind}`: keyset pages,
//! never the whole year in memory).

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::exports::{self, ExportKind};
use domain::users::roles::Capability;
use entity::MerchantId;
use maud::html;
use serde::Deserialize;

use super::view::{error_page, page};
use super::{Signed, audit};
use crate::state::HttpState;

const KINDS: [(ExportKind, &str); 4] = [
    (ExportKind::Invoices, "Invoices"),
    (ExportKind::Payments, "Payments"),
    (ExportKind::LedgerEntries, "Ledger entries"),
    (ExportKind::Payouts, "Payouts"),
];

pub async fn page_get(Extension(s): Extension<Signed>) -> Response {
    if let Err(r) = s.require(Capability::Export) {
        return r;
    }
    let today = chrono::Utc::now().date_naive();
    let month_ago = today - chrono::Duration::days(30);
    page(
        Some(&s),
        StatusCode::OK,
        "Exports",
        "/dashboard/exports",
        html! {
            p { "CSV files of the " strong { (s.session.environment.as_str()) } " environment, one row per record created in the range (the end date included), with the fiat value at the time of credit where the invoice locked a rate. Cells that a spreadsheet would read as a formula start with an apostrophe." }
            form.card method="get" action="/dashboard/exports/download" {
                label for="e-kind" { "What" }
                select id="e-kind" name="kind" {
                    @for (k, label) in KINDS { option value=(k.as_str()) { (label) } }
                }
                label for="e-from" { "From" }
                input id="e-from" name="from" type="date" required value=(month_ago);
                label for="e-to" { "To (included)" }
                input id="e-to" name="to" type="date" required value=(today);
                p { button type="submit" id="download" { "Download CSV" } }
            }
        },
    )
}

#[derive(Deserialize)]
pub struct DownloadQuery {
    kind: String,
    from: String,
    to: String,
}

pub async fn download(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<DownloadQuery>,
) -> Response {
    if let Err(r) = s.require(Capability::Export) {
        return r;
    }
    let Some(kind) = ExportKind::parse(&q.kind) else {
        return error_page(
            Some(&s),
            StatusCode::BAD_REQUEST,
            "kind: one of invoices, payments, ledger_entries, payouts",
        );
    };
    // The form's end date is included: the range ends at the start of the next day.
    let to = match chrono::NaiveDate::parse_from_str(q.to.trim(), "%Y-%m-%d") {
        Ok(d) => (d + chrono::Duration::days(1)).to_string(),
        Err(_) => q.to.clone(),
    };
    let range = match exports::parse_range(Some(q.from.trim()), Some(&to)) {
        Ok(r) => r,
        Err(e) => return super::from_domain(&s, e),
    };
    audit(&state, &s, "export.download", "export", kind.as_str()).await;
    let mut r = crate::exports::csv_response(
        state.db.clone(),
        MerchantId(s.user.merchant_id),
        s.session.environment,
        kind,
        range,
        exports::PAGE_SIZE,
    );
    super::secure_headers(r.headers_mut(), "no-store");
    r
}
