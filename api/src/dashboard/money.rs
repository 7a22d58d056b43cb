//! Balances with each currency's ledger, refunds and static deposit addresses (read only; the
//! actions are on the invoice and payout pages).

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::gates::{self, GATES};
use domain::owned;
use entity::{balance, ledger_entry, refund, static_address};
use maud::html;
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::Deserialize;

use super::view::{error_page, page, ts};
use super::{Signed, from_domain};
use crate::state::HttpState;

#[derive(Deserialize)]
pub struct BalanceQuery {
    currency: Option<String>,
}

pub async fn balances(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<BalanceQuery>,
) -> Response {
    let db = &state.db;
    let rows = match balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(s.user.merchant_id))
        .filter(balance::Column::Environment.eq(s.session.environment))
        .all(db)
        .await
    {
        Ok(r) => r,
        Err(e) => return from_domain(&s, e.into()),
    };
    let gate = match q.currency.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => match gates::resolve(c, None) {
            Ok(g) => Some(g),
            Err(e) => return error_page(Some(&s), StatusCode::BAD_REQUEST, &format!("currency: {e}")),
        },
    };
    let entries = match gate {
        None => Vec::new(),
        Some(g) => match ledger_entry::Entity::find()
            .filter(ledger_entry::Column::MerchantId.eq(s.user.merchant_id))
            .filter(ledger_entry::Column::Environment.eq(s.session.environment))
            .filter(ledger_entry::Column::GateId.eq(g.id))
            .order_by_desc(ledger_entry::Column::CreatedAt)
            .order_by_desc(ledger_entry::Column::Id)
            .limit(200)
            .all(db)
            .await
        {
            Ok(r) => r,
            Err(e) => return from_domain(&s, e.into()),
        },
    };
    let zero = Decimal::ZERO;
    page(
        Some(&s),
        StatusCode::OK,
        "Balances",
        "/dashboard/balances",
        html! {
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Currency" } th scope="col" { "Network" } th.num scope="col" { "Available" } th.num scope="col" { "Pending" } th.num scope="col" { "Reserved" } th scope="col" { "Ledger" } } }
                tbody {
                    @for g in GATES.iter() {
                        @let b = rows.iter().find(|b| b.gate_id == g.id);
                        tr {
                            td { (g.asset) } td { (g.network) }
                            td.num { (b.map_or(zero, |b| b.available.0).normalize()) }
                            td.num { (b.map_or(zero, |b| b.pending.0).normalize()) }
                            td.num { (b.map_or(zero, |b| b.reserved.0).normalize()) }
                            td { a href={ "/dashboard/balances?currency=" (g.id) } { "Entries" } }
                        }
                    }
                }
            } }
            @if let Some(g) = gate {
                h2 { "Ledger: " (g.asset) " on " (g.network) " (latest 200)" }
                @if entries.is_empty() { p.muted { "No entries." } }
                @else {
                    div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                        thead { tr { th scope="col" { "When" } th scope="col" { "Type" } th scope="col" { "Bucket" } th.num scope="col" { "Amount" } th.num scope="col" { "Balance after" } th scope="col" { "Reference" } } }
                        tbody {
                            @for e in &entries {
                                tr {
                                    td { (ts(e.created_at)) }
                                    td { (e.entry_type.as_str()) }
                                    td { (e.bucket.as_str()) }
                                    td.num { (e.amount.0.normalize()) }
                                    td.num { (e.balance_after.0.normalize()) }
                                    td { (e.reference_type.as_deref().unwrap_or("")) " " code { (e.reference_id.map(|i| i.to_string()).unwrap_or_default()) } }
                                }
                            }
                        }
                    } }
                }
            }
        },
    )
}

pub async fn refunds(State(state): State<HttpState>, Extension(s): Extension<Signed>) -> Response {
    let f = domain::refunds::service::ListFilter { status: None, invoice_id: None };
    let rows: Vec<refund::Model> = match owned::list(&state.db, &s.principal(), &f, (100, 0)).await {
        Ok((r, _)) => r,
        Err(e) => return from_domain(&s, e.into()),
    };
    page(
        Some(&s),
        StatusCode::OK,
        "Refunds",
        "/dashboard/refunds",
        html! {
            p.muted { "Refund a paid invoice from its page." }
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Refund" } th scope="col" { "Created" } th scope="col" { "Invoice" } th scope="col" { "Status" } th.num scope="col" { "Amount" } th scope="col" { "Destination" } } }
                tbody {
                    @for r in &rows {
                        tr {
                            td { code { (r.id) } }
                            td { (ts(r.created_at)) }
                            td { a.mono href={ "/dashboard/invoices/" (r.invoice_id) } { (r.invoice_id) } }
                            td.status { (r.status.as_str()) }
                            td.num { (r.amount.0.normalize()) " " (r.currency) }
                            td { code { (r.destination) } }
                        }
                    }
                }
            } }
        },
    )
}

pub async fn addresses(State(state): State<HttpState>, Extension(s): Extension<Signed>) -> Response {
    let f = domain::static_addresses::service::ListFilter { currency: None, network: None };
    let rows: Vec<static_address::Model> = match owned::list(&state.db, &s.principal(), &f, (100, 0)).await {
        Ok((r, _)) => r,
        Err(e) => return from_domain(&s, e.into()),
    };
    page(
        Some(&s),
        StatusCode::OK,
        "Static addresses",
        "/dashboard/addresses",
        html! {
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Address" } th scope="col" { "Currency" } th scope="col" { "Label" } th.num scope="col" { "Received" } th.num scope="col" { "Deposits" } } }
                tbody {
                    @for a in &rows {
                        tr {
                            td { code { (a.address) } @if let Some(t) = &a.address_tag { " tag " code { (t) } } }
                            td { (a.currency) " on " (a.network) }
                            td { (a.label.as_deref().unwrap_or("")) }
                            td.num { (a.total_received.0.normalize()) }
                            td.num { (a.invoice_count) }
                        }
                    }
                }
            } }
        },
    )
}
