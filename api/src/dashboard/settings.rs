//! The merchant's settings (`domain::settings`, as `PATCH /v1/settings`), and the payout
//! settings the operator keeps (shown, not changed here).

use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use domain::settings::{self, SettingsPatch};
use domain::users::roles::Capability;
use maud::html;
use serde::Deserialize;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, page as render};
use super::{Signed, audit, from_domain, see_other};
use crate::state::HttpState;

pub async fn page_get(state: &HttpState, s: &Signed, q: &DoneQuery) -> Response {
    let who = s.principal();
    let m = match settings::get(state, &who).await {
        Ok(m) => m,
        Err(e) => return from_domain(s, e),
    };
    let p = match domain::payouts::service::settings(&state.db, who.merchant_id, who.environment).await {
        Ok(p) => p,
        Err(e) => return from_domain(s, e.into()),
    };
    let edit = s.can(Capability::ManageSettings);
    render(
        Some(s),
        StatusCode::OK,
        "Settings",
        "/dashboard/settings",
        html! {
            (done_notice(q))
            form.card method="post" action="/dashboard/settings" {
                (csrf(s))
                h2 { "Invoices" }
                label for="s-base" { "Base currency (for reporting)" }
                input id="s-base" name="base_currency" value=(m.base_currency) size="6" disabled[!edit];
                label for="s-life" { "Invoice lifetime (seconds)" }
                input id="s-life" name="invoice_lifetime_secs" value=(m.invoice_lifetime_secs) inputmode="numeric" size="8" disabled[!edit];
                label for="s-tol" { "Underpayment tolerance (%)" }
                input id="s-tol" name="underpayment_tolerance_percent" value=(m.underpayment_tolerance_percent.value().normalize()) inputmode="decimal" size="6" disabled[!edit];
                @if edit { p { button type="submit" { "Save" } } }
            }
            section.card {
                h2 { "Payouts (" (s.session.environment.as_str()) ", set by the operator)" }
                ul {
                    li { "New payouts start approved: " (if p.payout_auto_approve { "yes" } else { "no" }) }
                    li { "Payouts are approved " (if p.merchant_approves { "here, by an owner or admin with an authenticator code" } else { "by the operator" }) }
                    li { "Delay between approval and sending: " (p.payout_delay_secs) " s" }
                }
            }
        },
    )
}

pub async fn page(State(state): State<HttpState>, Extension(s): Extension<Signed>, Query(q): Query<DoneQuery>) -> Response {
    page_get(&state, &s, &q).await
}

#[derive(Deserialize)]
pub struct SettingsForm {
    base_currency: String,
    invoice_lifetime_secs: String,
    underpayment_tolerance_percent: String,
}

pub async fn save(State(state): State<HttpState>, Extension(s): Extension<Signed>, Form(f): Form<SettingsForm>) -> Response {
    if let Err(r) = s.require(Capability::ManageSettings) {
        return r;
    }
    let Ok(lifetime) = f.invoice_lifetime_secs.trim().parse::<i64>() else {
        return super::view::error_page(Some(&s), StatusCode::BAD_REQUEST, "invoice_lifetime_secs: a whole number of seconds");
    };
    let patch = SettingsPatch {
        base_currency: Some(f.base_currency.trim().to_owned()),
        invoice_lifetime_secs: Some(lifetime),
        underpayment_tolerance_percent: Some(f.underpayment_tolerance_percent.trim().to_owned()),
    };
    match settings::update(&state, &s.principal(), &patch).await {
        Ok(_) => {
            audit(&state, &s, "dashboard.settings", "merchant", s.user.merchant_id).await;
            see_other("/dashboard/settings?done=saved")
        }
        Err(e) => from_domain(&s, e),
    }
}
