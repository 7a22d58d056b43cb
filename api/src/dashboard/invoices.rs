//! Invoices: the list with filters (status, currency, creation date, external id, id), one
//! invoice with its payments, event timeline and webhook deliveries, and the actions cancel and
//! resolve (accept what was received as payment in full).

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use domain::events::query::ListFilter as EventFilter;
use domain::invoices::service::{self, ListFilter};
use domain::owned;
use domain::users::roles::Capability;
use entity::{InvoiceId, InvoiceStatus, InvoiceTrigger, event, invoice, webhook_delivery};
use maud::{Markup, html};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde::Deserialize;
use uuid::Uuid;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, error_page, page, ts};
use super::{Signed, audit, from_domain, see_other};
use crate::state::HttpState;

const PAGE_SIZE: u64 = 50;

/// What an invoice asks for: the crypto amount, else the fiat price (deferred invoices).
pub fn amount(inv: &invoice::Model) -> String {
    match (&inv.amount_requested, &inv.currency, &inv.amount_fiat, &inv.fiat_currency) {
        (Some(a), Some(c), _, _) => format!("{} {c}", a.0.normalize()),
        (_, _, Some(a), Some(c)) => format!("{} {c}", a.0.normalize()),
        _ => "—".to_owned(),
    }
}

#[derive(Deserialize, Default)]
pub struct ListQuery {
    status: Option<String>,
    currency: Option<String>,
    from: Option<String>,
    to: Option<String>,
    external_id: Option<String>,
    id: Option<String>,
    offset: Option<u64>,
    done: Option<String>,
}

fn nonempty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn date(s: Option<&str>, field: &str) -> Result<Option<chrono::DateTime<Utc>>, String> {
    s.map(|d| super::day_start(d, field)).transpose()
}

pub async fn list(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<ListQuery>,
) -> Response {
    if let Some(id) = nonempty(&q.id) {
        return match Uuid::parse_str(id) {
            Ok(id) => see_other(&format!("/dashboard/invoices/{id}")),
            Err(_) => error_page(Some(&s), StatusCode::BAD_REQUEST, "id: not an invoice id"),
        };
    }
    let status = match nonempty(&q.status) {
        None => None,
        Some(st) => match InvoiceStatus::parse(st) {
            Some(v) => Some(v),
            None => {
                return error_page(
                    Some(&s),
                    StatusCode::BAD_REQUEST,
                    &format!("status: one of {}", InvoiceStatus::WIRE_LIST),
                );
            }
        },
    };
    let (from, to) = match (date(nonempty(&q.from), "from"), date(nonempty(&q.to), "to")) {
        (Ok(f), Ok(t)) => (f, t.map(|t| t + chrono::Duration::days(1))),
        (Err(e), _) | (_, Err(e)) => return error_page(Some(&s), StatusCode::BAD_REQUEST, &e),
    };
    let filter = ListFilter {
        status,
        currency: nonempty(&q.currency).map(str::to_owned),
        external_id: nonempty(&q.external_id).map(str::to_owned),
        created_from: from,
        created_to: to,
        ..Default::default()
    };
    let offset = q.offset.unwrap_or(0);
    let (rows, total) = match owned::list(&state.db, &s.principal(), &filter, (PAGE_SIZE, offset)).await {
        Ok(r) => r,
        Err(e) => return from_domain(&s, e.into()),
    };
    let keep = |o: u64| {
        let mut p = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("status", &q.status),
            ("currency", &q.currency),
            ("from", &q.from),
            ("to", &q.to),
            ("external_id", &q.external_id),
        ] {
            if let Some(v) = nonempty(v) {
                p.append_pair(k, v);
            }
        }
        p.append_pair("offset", &o.to_string());
        format!("/dashboard/invoices?{}", p.finish())
    };
    page(
        Some(&s),
        StatusCode::OK,
        "Invoices",
        "/dashboard/invoices",
        html! {
            (done_notice(&DoneQuery { done: q.done.clone() }))
            form.filters method="get" action="/dashboard/invoices" {
                div { label for="f-status" { "Status" }
                    select id="f-status" name="status" {
                        option value="" { "Any" }
                        @for st in InvoiceStatus::ALL { option value=(st.as_str()) selected[status == Some(*st)] { (st.as_str()) } }
                    } }
                div { label for="f-currency" { "Currency" } input id="f-currency" name="currency" size="10" value=[nonempty(&q.currency)]; }
                div { label for="f-from" { "Created from" } input id="f-from" name="from" type="date" value=[nonempty(&q.from)]; }
                div { label for="f-to" { "Created to" } input id="f-to" name="to" type="date" value=[nonempty(&q.to)]; }
                div { label for="f-ext" { "External id" } input id="f-ext" name="external_id" value=[nonempty(&q.external_id)]; }
                div { label for="f-id" { "Invoice id" } input id="f-id" name="id" size="36"; }
                div { button type="submit" { "Filter" } }
            }
            p.muted { (total) " invoices" }
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Invoice" } th scope="col" { "Created" } th scope="col" { "External id" } th scope="col" { "Status" } th.num scope="col" { "Amount" } th.num scope="col" { "Received" } } }
                tbody {
                    @for inv in &rows {
                        tr {
                            td { a.mono href={ "/dashboard/invoices/" (inv.id) } { (inv.id) } }
                            td { (ts(inv.created_at)) }
                            td { (inv.external_id.as_deref().unwrap_or("")) }
                            td.status { (inv.status.as_str()) }
                            td.num { (amount(inv)) }
                            td.num { (inv.amount_paid.0.normalize()) }
                        }
                    }
                }
            } }
            p {
                @if offset > 0 { a href=(keep(offset.saturating_sub(PAGE_SIZE))) { "Newer" } " " }
                @if offset + PAGE_SIZE < total { a href=(keep(offset + PAGE_SIZE)) { "Older" } }
            }
        },
    )
}

fn resolvable(inv: &invoice::Model) -> bool {
    inv.status.on(InvoiceTrigger::Resolve).is_some() && inv.amount_paid.0 > Decimal::ZERO
}

fn row(label: &str, value: Markup) -> Markup {
    html! { tr { th scope="row" { (label) } td { (value) } } }
}

pub async fn detail(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<String>,
    Query(q): Query<DoneQuery>,
) -> Response {
    let Ok(id) = Uuid::parse_str(&id) else {
        return error_page(Some(&s), StatusCode::NOT_FOUND, "There is no such invoice.");
    };
    let who = s.principal();
    let (inv, payments) = match service::get(&state, &who, InvoiceId(id)).await {
        Ok(r) => r,
        Err(e) => return from_domain(&s, e),
    };
    let events = match owned::list::<event::Entity>(
        &state.db,
        &who,
        &EventFilter { invoice_id: Some(id), ..Default::default() },
        (200, 0),
    )
    .await
    {
        Ok((rows, _)) => rows,
        Err(e) => return from_domain(&s, e.into()),
    };
    let event_ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let deliveries = match webhook_delivery::Entity::find()
        .filter(webhook_delivery::Column::EventId.is_in(event_ids))
        .filter(webhook_delivery::Column::MerchantId.eq(s.user.merchant_id))
        .order_by_asc(webhook_delivery::Column::CreatedAt)
        .all(&state.db)
        .await
    {
        Ok(d) => d,
        Err(e) => return from_domain(&s, e.into()),
    };
    let manage = s.can(Capability::ManageInvoices);
    page(
        Some(&s),
        StatusCode::OK,
        &format!("Invoice {}", inv.id),
        "/dashboard/invoices",
        html! {
            (done_notice(&q))
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                tbody {
                    (row("Status", html! { span.status id="invoice-status" { (inv.status.as_str()) } }))
                    (row("Amount", html! { (amount(&inv)) }))
                    (row("Received", html! { (inv.amount_paid.0.normalize()) " " (inv.currency.as_deref().unwrap_or("")) }))
                    (row("Network", html! { (inv.network.as_deref().unwrap_or("—")) }))
                    (row("Deposit address", html! { code { (inv.deposit_address.as_deref().unwrap_or("—")) } }))
                    (row("External id", html! { (inv.external_id.as_deref().unwrap_or("—")) }))
                    (row("Description", html! { (inv.description.as_deref().unwrap_or("—")) }))
                    (row("Created", html! { (ts(inv.created_at)) }))
                    (row("Paid", html! { (inv.paid_at.map(ts).unwrap_or_else(|| "—".into())) }))
                }
            } }
            @if manage && (inv.status.on(InvoiceTrigger::Cancel).is_some() || resolvable(&inv)) {
                section.card {
                    h2 { "Actions" }
                    @if resolvable(&inv) {
                        form method="post" action={ "/dashboard/invoices/" (inv.id) "/resolve" } {
                            (csrf(&s))
                            p { "Accept the " (inv.amount_paid.0.normalize()) " received as payment in full: the invoice becomes paid. Balances do not move; refund a surplus with a refund." }
                            button type="submit" id="resolve" { "Resolve as paid" }
                        }
                    }
                    @if inv.status.on(InvoiceTrigger::Cancel).is_some() {
                        form method="post" action={ "/dashboard/invoices/" (inv.id) "/cancel" } {
                            (csrf(&s))
                            p { button.danger type="submit" id="cancel" { "Cancel invoice" } }
                        }
                    }
                }
            }
            @if manage && inv.amount_paid.0 > Decimal::ZERO {
                form.card method="post" action={ "/dashboard/invoices/" (inv.id) "/refund" } {
                    (csrf(&s))
                    input type="hidden" name="idempotency_key" value=(Uuid::new_v4());
                    h2 { "Refund" }
                    label for="r-amount" { "Amount (" (inv.currency.as_deref().unwrap_or("")) ")" }
                    input id="r-amount" name="amount" required inputmode="decimal" size="20";
                    label for="r-destination" { "Payer's address" }
                    input id="r-destination" name="destination" required size="60";
                    label for="r-tag" { "Destination tag (XRP)" }
                    input id="r-tag" name="destination_tag" size="12";
                    p { button.secondary type="submit" { "Refund" } }
                }
            }
            h2 { "Payments" }
            @if payments.is_empty() { p.muted { "No payment seen yet." } }
            @else {
                div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                    thead { tr { th scope="col" { "Transaction" } th.num scope="col" { "Amount" } th scope="col" { "Status" } th scope="col" { "Confirmations" } th scope="col" { "Seen" } th.num scope="col" { "Value at credit" } } }
                    tbody {
                        @for (p, _) in &payments {
                            tr {
                                td {
                                    @match (inv.environment, inv.network.as_deref().and_then(|n| domain::gates::explorer_tx_url(n, &p.tx_hash))) {
                                        (entity::Environment::Live, Some(url)) => { a.mono href=(url) rel="noreferrer noopener" { (p.tx_hash) } },
                                        _ => { code { (p.tx_hash) } },
                                    }
                                }
                                td.num { (p.amount.0.normalize()) }
                                td { (p.status.as_str()) }
                                td { (p.confirmations) " / " (p.required_confirmations) }
                                td { (ts(p.detected_at)) }
                                td.num.fiat {
                                    @match domain::exports::fiat_at_credit(p, Some(&inv)) {
                                        Some(f) => { (f.value.0) " " (f.currency) },
                                        None => { "—" },
                                    }
                                }
                            }
                        }
                    }
                } }
            }
            h2 { "Events" }
            @if events.is_empty() { p.muted { "No events yet." } }
            @else {
                ol {
                    @for e in events.iter().rev() {
                        li { (ts(e.created_at)) " — " code { (e.event_type) } }
                    }
                }
            }
            h2 { "Webhook deliveries" }
            @if deliveries.is_empty() { p.muted { "None." } }
            @else {
                div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                    thead { tr { th scope="col" { "Event" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Last answer" } } }
                    tbody {
                        @for d in &deliveries {
                            tr {
                                td { code { (d.event_type) } }
                                td { (d.status.as_str()) }
                                td { (d.attempt_count) }
                                td { (d.last_status_code.map(|c| c.to_string()).or_else(|| d.last_error.clone()).unwrap_or_else(|| "—".into())) }
                            }
                        }
                    }
                } }
            }
        },
    )
}

pub async fn cancel(State(state): State<HttpState>, Extension(s): Extension<Signed>, Path(id): Path<Uuid>) -> Response {
    if let Err(r) = s.require(Capability::ManageInvoices) {
        return r;
    }
    match service::cancel(&state, &s.principal(), InvoiceId(id)).await {
        Ok(_) => {
            audit(&state, &s, "invoice.cancel", "invoice", id).await;
            see_other(&format!("/dashboard/invoices/{id}?done=cancelled"))
        }
        Err(e) => from_domain(&s, e),
    }
}

pub async fn resolve(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageInvoices) {
        return r;
    }
    match service::resolve(&state, &s.principal(), InvoiceId(id)).await {
        Ok(_) => {
            audit(&state, &s, "invoice.resolve", "invoice", id).await;
            see_other(&format!("/dashboard/invoices/{id}?done=resolved"))
        }
        Err(e) => from_domain(&s, e),
    }
}

#[derive(Deserialize)]
pub struct RefundForm {
    idempotency_key: String,
    amount: String,
    destination: String,
    #[serde(default)]
    destination_tag: String,
}

/// A refund of a credited invoice (as `POST /v1/refunds`, with the form's own idempotency key:
/// a form sent twice makes one refund).
pub async fn refund(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    axum::extract::Form(f): axum::extract::Form<RefundForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageInvoices) {
        return r;
    }
    let who = s.principal();
    let inv = match service::get(&state, &who, InvoiceId(id)).await {
        Ok((inv, _)) => inv,
        Err(e) => return from_domain(&s, e),
    };
    let tag = Some(f.destination_tag.trim().to_owned()).filter(|t| !t.is_empty());
    let req = domain::refunds::types::CreateRefundRequest {
        invoice_id: Some(id),
        currency: inv.gate_id.clone(),
        amount: Some(f.amount.trim().to_owned()),
        destination: Some(f.destination.trim().to_owned()),
        destination_tag: tag.clone(),
        ..Default::default()
    };
    let raw = serde_json::json!({
        "invoice_id": id, "currency": inv.gate_id, "amount": f.amount.trim(),
        "destination": f.destination.trim(), "destination_tag": tag,
    });
    let key = format!("dashboard:{}", f.idempotency_key.trim());
    match domain::refunds::service::create(&state, &who, &key, &req, &raw).await {
        Ok(domain::refunds::service::Created::New(r, _) | domain::refunds::service::Created::Replayed(r, _)) => {
            audit(&state, &s, "refund.create", "refund", r.id).await;
            see_other("/dashboard/refunds")
        }
        Err(e) => from_domain(&s, e),
    }
}
