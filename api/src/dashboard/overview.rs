//! Overview: balances per currency, the latest invoices and the webhook deliveries' health.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{Duration, Utc};
use domain::gates::GATES;
use domain::owned;
use entity::{DeliveryStatus, balance, webhook_delivery};
use maud::html;
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{page as render, ts};
use super::{Signed, from_domain};
use crate::state::HttpState;

pub async fn page_handler(state: &HttpState, s: &Signed, q: &DoneQuery) -> Result<Response, Response> {
    let who = s.principal();
    let db = &state.db;
    let err = |e: sea_orm::DbErr| from_domain(s, e.into());
    let balances = balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(s.user.merchant_id))
        .filter(balance::Column::Environment.eq(s.session.environment))
        .all(db)
        .await
        .map_err(err)?;
    let filter = domain::invoices::service::ListFilter::default();
    let (recent, total) = owned::list(db, &who, &filter, (10, 0)).await.map_err(err)?;
    let since = Utc::now() - Duration::hours(24);
    let count = |status: DeliveryStatus| {
        webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::MerchantId.eq(s.user.merchant_id))
            .filter(webhook_delivery::Column::Environment.eq(s.session.environment))
            .filter(webhook_delivery::Column::Status.eq(status))
            .filter(webhook_delivery::Column::CreatedAt.gte(since))
            .count(db)
    };
    let delivered = count(DeliveryStatus::Succeeded).await.map_err(err)?;
    let pending =
        count(DeliveryStatus::Pending).await.map_err(err)? + count(DeliveryStatus::Retrying).await.map_err(err)?;
    let failed = count(DeliveryStatus::Dead).await.map_err(err)?;
    let held: Vec<_> = GATES
        .iter()
        .filter_map(|g| balances.iter().find(|b| b.gate_id == g.id).map(|b| (g, b)))
        .filter(|(_, b)| {
            b.available.0 != Decimal::ZERO || b.pending.0 != Decimal::ZERO || b.reserved.0 != Decimal::ZERO
        })
        .collect();
    Ok(render(
        Some(s),
        StatusCode::OK,
        "Overview",
        "/dashboard",
        html! {
            (done_notice(q))
            h2 { "Balances" }
            @if held.is_empty() { p.muted { "No funds yet in this environment." } }
            @else {
                div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                    thead { tr { th scope="col" { "Currency" } th scope="col" { "Network" } th.num scope="col" { "Available" } th.num scope="col" { "Pending" } th.num scope="col" { "Reserved" } } }
                    tbody {
                        @for (g, b) in &held {
                            tr { td { (g.asset) } td { (g.network) } td.num { (b.available.0.normalize()) } td.num { (b.pending.0.normalize()) } td.num { (b.reserved.0.normalize()) } }
                        }
                    }
                } }
            }
            h2 { "Webhooks, last 24 hours" }
            p { (delivered) " delivered · " (pending) " waiting or retrying · "
                @if failed > 0 { strong.status { (failed) " failed" } } @else { "0 failed" } }
            h2 { "Latest invoices" }
            @if recent.is_empty() { p.muted { "No invoices yet in this environment." } }
            @else {
                div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                    thead { tr { th scope="col" { "Invoice" } th scope="col" { "Created" } th scope="col" { "Status" } th.num scope="col" { "Amount" } } }
                    tbody {
                        @for inv in &recent {
                            tr {
                                td { a.mono href={ "/dashboard/invoices/" (inv.id) } { (inv.id) } }
                                td { (ts(inv.created_at)) }
                                td.status { (inv.status.as_str()) }
                                td.num { (super::invoices::amount(inv)) }
                            }
                        }
                    }
                } }
                p { a href="/dashboard/invoices" { "All " (total) " invoices" } }
            }
            section.card {
                h2 { "Your sessions" }
                form method="post" action="/dashboard/logout-everywhere" {
                    (super::view::csrf(s))
                    button.secondary type="submit" { "Sign out everywhere" }
                }
            }
        },
    ))
}

pub async fn page(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<DoneQuery>,
) -> Response {
    page_handler(&state, &s, &q).await.unwrap_or_else(|r| r)
}
