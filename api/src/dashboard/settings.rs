//! The merchant's settings (`domain::settings`, as `PATCH /v1/settings`), and the payout
//! settings the operator keeps (shown, not changed here).

use axum::Extension;
use axum::extract::{Form, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use domain::settings::{self, SettingsPatch};
use domain::users::roles::Capability;
use maud::html;
use serde::Deserialize;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, error_page, page as render, totp_field};
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
                h2 { "Payer e-mail" }
                label for="s-reply" { "Replies to payment-request e-mails go to (empty: the operator's sender address)" }
                input id="s-reply" name="payer_reply_to" type="email" value=(m.payer_reply_to.as_deref().unwrap_or("")) size="40" disabled[!edit];
                @if edit { p { button type="submit" { "Save" } } }
            }
            section.card {
                h2 { "Payouts (" (s.session.environment.as_str()) ", set by the operator)" }
                ul {
                    li { "New payouts start approved: " (if p.payout_auto_approve { "yes" } else { "no" }) }
                    li { "Payouts are approved " (if p.merchant_approves { "here, by an owner or admin with an authenticator code" } else { "by the operator" }) }
                    li { "Delay between approval and sending: " (p.payout_delay_secs) " s" }
                }
                @if p.merchant_approves {
                    form method="post" action="/dashboard/settings/payouts" {
                        (csrf(s))
                        label for="s-limit" { "Approve automatically payouts worth up to (" (m.base_currency) "; empty: every payout waits for approval)" }
                        input id="s-limit" name="auto_approve_limit" inputmode="decimal" size="12"
                            value=(p.auto_approve_limit.map(|a| a.0.normalize().to_string()).unwrap_or_default()) disabled[!edit];
                        @if edit {
                            (totp_field("s-limit-totp"))
                            p { button type="submit" { "Save the limit" } }
                        }
                    }
                }
            }
        },
    )
}

pub async fn page(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<DoneQuery>,
) -> Response {
    page_get(&state, &s, &q).await
}

#[derive(Deserialize)]
pub struct SettingsForm {
    base_currency: String,
    invoice_lifetime_secs: String,
    underpayment_tolerance_percent: String,
    #[serde(default)]
    payer_reply_to: String,
}

pub async fn save(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Form(f): Form<SettingsForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageSettings) {
        return r;
    }
    let Ok(lifetime) = f.invoice_lifetime_secs.trim().parse::<i64>() else {
        return super::view::error_page(
            Some(&s),
            StatusCode::BAD_REQUEST,
            "invoice_lifetime_secs: a whole number of seconds",
        );
    };
    let patch = SettingsPatch {
        base_currency: Some(f.base_currency.trim().to_owned()),
        invoice_lifetime_secs: Some(lifetime),
        underpayment_tolerance_percent: Some(f.underpayment_tolerance_percent.trim().to_owned()),
        payer_reply_to: Some(f.payer_reply_to.trim().to_owned()),
    };
    match settings::update(&state, &s.principal(), &patch).await {
        Ok(_) => {
            audit(&state, &s, "dashboard.settings", "merchant", s.user.merchant_id).await;
            see_other("/dashboard/settings?done=saved")
        }
        Err(e) => from_domain(&s, e),
    }
}

#[derive(Deserialize)]
pub struct LimitForm {
    auto_approve_limit: String,
    totp: String,
}

/// The merchant's own auto-approve limit (where the merchant approves its payouts): it loosens
/// a money control, so it takes a TOTP code and is kept out of the API keys' reach.
pub async fn save_limit(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Form(f): Form<LimitForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageSettings) {
        return r;
    }
    let raw = f.auto_approve_limit.trim();
    let limit = if raw.is_empty() {
        None
    } else {
        match raw.parse::<rust_decimal::Decimal>() {
            Ok(d) if d >= rust_decimal::Decimal::ZERO && d.scale() <= 8 => Some(d),
            _ => {
                return error_page(
                    Some(&s),
                    StatusCode::BAD_REQUEST,
                    "auto_approve_limit: a non-negative amount with at most 8 decimals, or empty",
                );
            }
        }
    };
    let who = s.principal();
    let mut p = match domain::payouts::service::settings(&state.db, who.merchant_id, who.environment).await {
        Ok(p) => p,
        Err(e) => return from_domain(&s, e.into()),
    };
    if !p.merchant_approves {
        return error_page(
            Some(&s),
            StatusCode::FORBIDDEN,
            "The operator approves this merchant's payouts: there is no limit to set. Nothing was changed.",
        );
    }
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    let before = p.auto_approve_limit.map(|a| a.0.to_string());
    p.auto_approve_limit = limit.map(entity::Amount::fiat);
    p.updated_at = chrono::Utc::now();
    if let Err(e) = domain::payouts::service::save_settings(&state.db, p).await {
        return from_domain(&s, e.into());
    }
    let entry = domain::audit::Entry::new(
        &domain::users::actor_of(&s.user),
        "payout.settings",
        "payout_settings",
        s.user.merchant_id,
    )
    .merchant(who.merchant_id, Some(who.environment))
    .change(
        Some(serde_json::json!({"auto_approve_limit": before})),
        Some(serde_json::json!({"auto_approve_limit": limit.map(|d| d.to_string())})),
    );
    if let Err(e) = domain::audit::record(&state.db, entry).await {
        tracing::error!(error = %e, "could not record a settings change in the audit log");
    }
    see_other("/dashboard/settings?done=saved")
}
