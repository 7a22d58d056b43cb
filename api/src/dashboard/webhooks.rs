//! Webhooks: the environment's endpoints (several, each with an event filter) and the delivery
//! log with each attempt. Adding, changing, rotating the secret of and removing an endpoint
//! take a TOTP code; sending a test event and redelivering (one delivery, or the failed ones of
//! a time range) do not move money and need only the role.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::events::EventKind;
use domain::users::roles::Capability;
use domain::webhooks::deliveries::{self, DeliveryFilter};
use domain::webhooks::endpoints::{EndpointChange, NewEndpoint};
use domain::webhooks::manage::{self, RedeliverRange};
use entity::{DeliveryId, DeliveryStatus};
use maud::{Markup, html};
use serde::Deserialize;
use uuid::Uuid;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, error_page, page, totp_field, ts};
use super::{Signed, from_domain, secret_box, see_other};
use crate::state::HttpState;

fn events_fieldset(checked: &[String]) -> Markup {
    html! {
        fieldset {
            legend { "Events (none checked: every event)" }
            @for k in EventKind::ALL {
                label { input type="checkbox" name="event" value=(k.as_str()) checked[checked.iter().any(|c| c == k.as_str())]; (k.as_str()) }
            }
        }
    }
}

pub async fn list(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<DoneQuery>,
) -> Response {
    let who = s.principal();
    let endpoints = match manage::list(&state, &who).await {
        Ok(e) => e,
        Err(e) => return from_domain(&s, e),
    };
    let (recent, total) = match deliveries::list(&state, &who, &DeliveryFilter::default(), (50, 0).into()).await {
        Ok(r) => (r.rows, r.total),
        Err(e) => return from_domain(&s, e),
    };
    let manage = s.can(Capability::ManageWebhooks);
    page(
        Some(&s),
        StatusCode::OK,
        "Webhooks",
        "/dashboard/webhooks",
        html! {
            (done_notice(&q))
            h2 { "Endpoints (" (s.session.environment.as_str()) ")" }
            @if endpoints.is_empty() { p.muted { "No endpoint yet: events are kept, and delivered to an endpoint added later only by redelivery." } }
            @for e in &endpoints {
                section.card id={ "endpoint-" (e.id) } {
                    p { code { (e.url) } @if e.disabled { " " strong { "(disabled)" } } }
                    @if let Some(d) = &e.description { p { (d) } }
                    p.muted { "Events: " @if e.enabled_events.is_empty() { "every event" } @else { (e.enabled_events.join(", ")) } }
                    @if let Some(t) = e.previous_secret_until { p.muted { "The previous secret also signs until " (ts(t)) "." } }
                    @if manage {
                        form.inline method="post" action={ "/dashboard/webhooks/" (e.id) "/test" } {
                            (csrf(&s))
                            button.secondary type="submit" { "Send a test event" }
                        }
                        form method="post" action={ "/dashboard/webhooks/" (e.id) "/change" } {
                            (csrf(&s))
                            label for={ "op-" (e.id) } { "Change" }
                            select id={ "op-" (e.id) } name="op" {
                                option value="rotate" { "Rotate the signing secret" }
                                @if e.disabled { option value="enable" { "Enable" } } @else { option value="disable" { "Disable" } }
                                option value="delete" { "Remove the endpoint" }
                            }
                            (totp_field(&format!("totp-{}", e.id)))
                            button.secondary type="submit" { "Apply" }
                        }
                    }
                }
            }
            @if manage {
                form.card method="post" action="/dashboard/webhooks" {
                    (csrf(&s))
                    h2 { "Add an endpoint" }
                    label for="w-url" { "URL" }
                    input id="w-url" name="url" type="url" required size="60";
                    label for="w-description" { "Description" }
                    input id="w-description" name="description" size="60";
                    (events_fieldset(&[]))
                    (totp_field("w-totp"))
                    p { button type="submit" id="add-endpoint" { "Add endpoint" } }
                }
            }
            h2 { "Deliveries (latest 50 of " (total) ")" }
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Created" } th scope="col" { "Event" } th scope="col" { "Status" } th scope="col" { "Attempts" } th scope="col" { "Last answer" } } }
                tbody {
                    @for d in &recent {
                        tr {
                            td { a href={ "/dashboard/webhooks/deliveries/" (d.id) } { (ts(d.created_at)) } }
                            td { code { (d.event_type) } }
                            td.status { (d.status.as_str()) }
                            td { (d.attempt_count) }
                            td { (d.last_status_code.map(|c| c.to_string()).or_else(|| d.last_error.clone()).unwrap_or_else(|| "—".into())) }
                        }
                    }
                }
            } }
            @if manage {
                form.card method="post" action="/dashboard/webhooks/redeliver" {
                    (csrf(&s))
                    h2 { "Redeliver a time range" }
                    p.muted { "Every failed delivery (dead or retrying) created in the range is sent again (at most 1000)." }
                    label for="r-from" { "From" }
                    input id="r-from" name="from" type="date" required;
                    label for="r-to" { "To (included)" }
                    input id="r-to" name="to" type="date" required;
                    p { button.secondary type="submit" { "Redeliver" } }
                }
            }
        },
    )
}

/// The repeated `event` fields and the other fields of an endpoint form.
fn fields(body: &[u8]) -> (std::collections::HashMap<String, String>, Vec<String>) {
    let mut one = std::collections::HashMap::new();
    let mut events = Vec::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if k == "event" {
            events.push(v.into_owned());
        } else {
            one.insert(k.into_owned(), v.into_owned());
        }
    }
    (one, events)
}

fn secret_page(s: &Signed, title: &str, url: &str, secret: &str) -> Response {
    page(
        Some(s),
        StatusCode::CREATED,
        title,
        "/dashboard/webhooks",
        html! {
            p { "The signing secret of " code { (url) } ". Copy it now: it is shown only this once." }
            code.secret id="endpoint-secret" { (secret) }
            p { a href="/dashboard/webhooks" { "Back to the webhooks" } }
        },
    )
}

pub async fn create(State(state): State<HttpState>, Extension(s): Extension<Signed>, body: Bytes) -> Response {
    if let Err(r) = s.require(Capability::ManageWebhooks) {
        return r;
    }
    let (f, events) = fields(&body);
    let get = |k: &str| f.get(k).map(|v| v.trim().to_owned()).unwrap_or_default();
    if let Err(r) = s.second_factor(&state, &get("totp")).await {
        return r;
    }
    let sbox = match secret_box(&state) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let description = Some(get("description")).filter(|d| !d.is_empty());
    let new = NewEndpoint { url: get("url"), description, enabled_events: events };
    match manage::create(&state, &sbox, &s.principal(), &new).await {
        Ok((info, secret)) => secret_page(&s, "Endpoint added", &info.url, &secret),
        Err(e) => from_domain(&s, e),
    }
}

#[derive(Deserialize)]
pub struct ChangeForm {
    op: String,
    totp: String,
}

pub async fn change(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    axum::extract::Form(f): axum::extract::Form<ChangeForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageWebhooks) {
        return r;
    }
    let who = s.principal();
    // The endpoint must be the merchant's before a code is spent on it.
    if let Err(e) = manage::get(&state, &who, id).await {
        return from_domain(&s, e);
    }
    if !matches!(f.op.as_str(), "rotate" | "enable" | "disable" | "delete") {
        return error_page(Some(&s), StatusCode::BAD_REQUEST, "op: one of rotate, enable, disable, delete");
    }
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    let done = match f.op.as_str() {
        "rotate" => {
            let sbox = match secret_box(&state) {
                Ok(b) => b,
                Err(r) => return r,
            };
            return match manage::rotate_secret(&state, &sbox, &who, id).await {
                Ok((info, secret)) => secret_page(&s, "Secret rotated", &info.url, &secret),
                Err(e) => from_domain(&s, e),
            };
        }
        "delete" => manage::delete(&state, &who, id).await.map(|_| "removed"),
        on_off => {
            let change = EndpointChange { disabled: Some(on_off == "disable"), ..Default::default() };
            manage::update(&state, &who, id, &change).await.map(|_| "saved")
        }
    };
    match done {
        Ok(code) => see_other(&format!("/dashboard/webhooks?done={code}")),
        Err(e) => from_domain(&s, e),
    }
}

pub async fn test(State(state): State<HttpState>, Extension(s): Extension<Signed>, Path(id): Path<Uuid>) -> Response {
    if let Err(r) = s.require(Capability::ManageWebhooks) {
        return r;
    }
    match manage::send_test(&state, &s.principal(), id).await {
        Ok((_, delivery)) => see_other(&format!("/dashboard/webhooks/deliveries/{delivery}")),
        Err(e) => from_domain(&s, e),
    }
}

#[derive(Deserialize)]
pub struct RangeForm {
    from: String,
    to: String,
}

pub async fn redeliver_range(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    axum::extract::Form(f): axum::extract::Form<RangeForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageWebhooks) {
        return r;
    }
    let (from, to) = match (super::day_start(&f.from, "from"), super::day_start(&f.to, "to")) {
        (Ok(a), Ok(b)) => (a, b + chrono::Duration::days(1)),
        (Err(e), _) | (_, Err(e)) => return error_page(Some(&s), StatusCode::BAD_REQUEST, &e),
    };
    match manage::redeliver_range(&state, &s.principal(), &RedeliverRange { from, to, status: None }).await {
        Ok(r) => page(
            Some(&s),
            StatusCode::OK,
            "Redelivery",
            "/dashboard/webhooks",
            html! {
                p.notice role="status" { (r.redelivered.len()) " of " (r.matched) " failed deliveries are sent again." }
                p { a href="/dashboard/webhooks" { "Back to the webhooks" } }
            },
        ),
        Err(e) => from_domain(&s, e),
    }
}

pub async fn delivery(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
) -> Response {
    let (d, attempts) = match deliveries::get(&state, &s.principal(), DeliveryId(id)).await {
        Ok(r) => r,
        Err(e) => return from_domain(&s, e),
    };
    page(
        Some(&s),
        StatusCode::OK,
        "Webhook delivery",
        "/dashboard/webhooks",
        html! {
            p { "Event " code { (d.event_type) } " · status " strong.status id="delivery-status" { (d.status.as_str()) } " · created " (ts(d.created_at)) }
            h2 { "Attempts" }
            @if attempts.is_empty() { p.muted id="no-attempt" { "No attempt yet: the deliverer sends it within seconds." } }
            @else {
                div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table id="attempts" {
                    thead { tr { th scope="col" { "#" } th scope="col" { "Started" } th scope="col" { "Answer" } th.num scope="col" { "Latency" } th scope="col" { "Response (first bytes)" } } }
                    tbody {
                        @for a in &attempts {
                            tr {
                                td { (a.attempt_no) }
                                td { (ts(a.started_at)) }
                                td { @if let Some(c) = a.status_code { (c) } @else { (a.error.as_deref().unwrap_or("—")) } @if a.succeeded { " ✓" } }
                                td.num { (a.latency_ms) " ms" }
                                td { code { (a.response_body.as_deref().unwrap_or("")) } }
                            }
                        }
                    }
                } }
            }
            @if s.can(Capability::ManageWebhooks) && d.status != DeliveryStatus::Pending {
                form method="post" action={ "/dashboard/webhooks/deliveries/" (d.id) "/redeliver" } {
                    (csrf(&s))
                    p { button.secondary type="submit" { "Redeliver" } }
                }
            }
            p { a href="/dashboard/webhooks" { "Back to the webhooks" } }
        },
    )
}

pub async fn redeliver(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageWebhooks) {
        return r;
    }
    match deliveries::redeliver(&state, &s.principal(), DeliveryId(id)).await {
        Ok(_) => see_other(&format!("/dashboard/webhooks/deliveries/{id}")),
        Err(e) => from_domain(&s, e),
    }
}
