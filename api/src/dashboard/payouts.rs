//! Payouts: the list, a new payout, and the merchant's approval with a TOTP code (spec 3.2:
//! approved in the dashboard before execution, where the merchant's settings say the merchant
//! approves) and cancel.

use axum::Extension;
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::owned;
use domain::payouts::service::{self, Created, ListFilter};
use domain::payouts::types::CreatePayoutRequest;
use domain::users::roles::Capability;
use entity::{PayoutId, PayoutStatus};
use maud::html;
use serde::Deserialize;
use uuid::Uuid;

use super::view::{csrf, error_page, notice, page, totp_field, ts};
use super::{Signed, audit, from_domain, see_other};
use crate::state::HttpState;

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    done: Option<String>,
}

pub async fn list(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<ListQuery>,
) -> Response {
    let status = match q.status.as_deref().filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => match PayoutStatus::parse(v) {
            Some(st) => Some(st),
            None => {
                return error_page(
                    Some(&s),
                    StatusCode::BAD_REQUEST,
                    &format!("status: one of {}", PayoutStatus::WIRE_LIST),
                );
            }
        },
    };
    let who = s.principal();
    let (rows, total) = match owned::list(&state.db, &who, &ListFilter { status }, (100, 0)).await {
        Ok(r) => r,
        Err(e) => return from_domain(&s, e.into()),
    };
    let merchant_approves = match service::settings(&state.db, who.merchant_id, who.environment).await {
        Ok(st) => st.merchant_approves,
        Err(e) => return from_domain(&s, e.into()),
    };
    let manage = s.can(Capability::ManagePayouts);
    page(
        Some(&s),
        StatusCode::OK,
        "Payouts",
        "/dashboard/payouts",
        html! {
            (notice(q.done.as_deref()))
            @if !merchant_approves { p.muted { "Payouts waiting for approval are approved by the operator." } }
            form.filters method="get" action="/dashboard/payouts" {
                div { label for="f-status" { "Status" }
                    select id="f-status" name="status" {
                        option value="" { "Any" }
                        @for st in PayoutStatus::ALL { option value=(st.as_str()) selected[status == Some(*st)] { (st.as_str()) } }
                    } }
                div { button type="submit" { "Filter" } }
            }
            p.muted { (total) " payouts" }
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "Payout" } th scope="col" { "Created" } th scope="col" { "Status" } th.num scope="col" { "Amount" } th scope="col" { "Destination" } th scope="col" { "Actions" } } }
                tbody {
                    @for p in &rows {
                        tr id={ "payout-" (p.id) } {
                            td { code { (p.id) } }
                            td { (ts(p.created_at)) }
                            td.status { (p.status.as_str()) }
                            td.num { (p.amount.0.normalize()) " " (p.currency) }
                            td { code { (p.destination) } }
                            td {
                                @if manage && merchant_approves && p.status == PayoutStatus::PendingApproval {
                                    form method="post" action={ "/dashboard/payouts/" (p.id) "/approve" } {
                                        (csrf(&s))
                                        (totp_field(&format!("totp-{}", p.id)))
                                        button type="submit" { "Approve" }
                                    }
                                }
                                @if manage && matches!(p.status, PayoutStatus::PendingApproval | PayoutStatus::Approved) {
                                    form method="post" action={ "/dashboard/payouts/" (p.id) "/cancel" } {
                                        (csrf(&s))
                                        button.danger type="submit" { "Cancel" }
                                    }
                                }
                            }
                        }
                    }
                }
            } }
            @if manage {
                form.card method="post" action="/dashboard/payouts" {
                    (csrf(&s))
                    h2 { "New payout" }
                    label for="p-currency" { "Currency (asset code or gate id)" }
                    input id="p-currency" name="currency" required size="12";
                    label for="p-network" { "Network (when the asset is on several)" }
                    input id="p-network" name="network" size="12";
                    label for="p-amount" { "Amount" }
                    input id="p-amount" name="amount" required inputmode="decimal" size="20";
                    label for="p-destination" { "Destination address" }
                    input id="p-destination" name="destination" required size="60";
                    label for="p-tag" { "Destination tag (XRP)" }
                    input id="p-tag" name="destination_tag" size="12";
                    label for="p-description" { "Description" }
                    input id="p-description" name="description" size="60";
                    p { button type="submit" { "Create payout" } }
                }
            }
        },
    )
}

#[derive(Deserialize)]
pub struct CreateForm {
    currency: String,
    #[serde(default)]
    network: String,
    amount: String,
    destination: String,
    #[serde(default)]
    destination_tag: String,
    #[serde(default)]
    description: String,
}

fn given(s: &str) -> Option<String> {
    Some(s.trim().to_owned()).filter(|v| !v.is_empty())
}

pub async fn create(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Form(f): Form<CreateForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManagePayouts) {
        return r;
    }
    let req = CreatePayoutRequest {
        currency: given(&f.currency),
        network: given(&f.network),
        amount: given(&f.amount),
        destination: given(&f.destination),
        destination_tag: given(&f.destination_tag),
        description: given(&f.description),
        metadata: None,
        idempotency_key: None,
    };
    match service::create(&state, &s.principal(), &req).await {
        Ok(Created::New(p) | Created::Replayed(p)) => {
            audit(&state, &s, "payout.create", "payout", p.id).await;
            see_other("/dashboard/payouts?done=created")
        }
        Err(e) => from_domain(&s, e),
    }
}

#[derive(Deserialize)]
pub struct ApproveForm {
    totp: String,
}

pub async fn approve(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    Form(f): Form<ApproveForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManagePayouts) {
        return r;
    }
    // The payout must be the merchant's before a code is spent on it.
    if let Err(e) = service::get(&state, &s.principal(), PayoutId(id)).await {
        return from_domain(&s, e);
    }
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    match domain::payouts::approval::approve_by_merchant(&state, &s.principal(), PayoutId(id)).await {
        Ok(_) => {
            audit(&state, &s, "payout.approve", "payout", id).await;
            see_other("/dashboard/payouts?done=approved")
        }
        Err(e) => from_domain(&s, e),
    }
}

pub async fn cancel(State(state): State<HttpState>, Extension(s): Extension<Signed>, Path(id): Path<Uuid>) -> Response {
    if let Err(r) = s.require(Capability::ManagePayouts) {
        return r;
    }
    match service::cancel(&state, &s.principal(), PayoutId(id)).await {
        Ok(_) => {
            audit(&state, &s, "payout.cancel", "payout", id).await;
            see_other("/dashboard/payouts?done=cancelled")
        }
        Err(e) => from_domain(&s, e),
    }
}
