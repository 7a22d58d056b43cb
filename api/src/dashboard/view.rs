//! The dashboard's page frame (maud: every value is HTML-escaped unless marked otherwise).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use entity::Environment;
use maud::{DOCTYPE, Markup, html};

use super::{Signed, secure_headers};

/// The sections of the navigation: (path, label).
const NAV: [(&str, &str); 11] = [
    ("/dashboard", "Overview"),
    ("/dashboard/invoices", "Invoices"),
    ("/dashboard/payouts", "Payouts"),
    ("/dashboard/refunds", "Refunds"),
    ("/dashboard/balances", "Balances"),
    ("/dashboard/addresses", "Addresses"),
    ("/dashboard/keys", "API keys"),
    ("/dashboard/webhooks", "Webhooks"),
    ("/dashboard/exports", "Exports"),
    ("/dashboard/team", "Team"),
    ("/dashboard/settings", "Settings"),
];

/// A whole page. `current` marks the navigation entry (`aria-current`).
pub fn page(signed: Option<&Signed>, status: StatusCode, title: &str, current: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) " · paygate" }
                link rel="stylesheet" href="/dashboard/assets/dashboard.css";
            }
            body {
                @if let Some(s) = signed {
                    (top(s, current))
                    @if s.session.environment == Environment::Test {
                        p.banner role="note" { "Test mode: test data and sandbox chains only; no real funds move." }
                    }
                }
                main id="main" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    let mut r = (status, markup).into_response();
    secure_headers(r.headers_mut(), "no-store");
    r
}

fn top(s: &Signed, current: &str) -> Markup {
    let other = match s.session.environment {
        Environment::Test => Environment::Live,
        Environment::Live => Environment::Test,
    };
    html! {
        header.top {
            span.brand { (s.merchant_name) }
            nav.main aria-label="Dashboard" {
                ul {
                    @for (path, label) in NAV {
                        li { a href=(path) aria-current=[(path == current).then_some("page")] { (label) } }
                    }
                }
            }
            form.inline method="post" action="/dashboard/environment" {
                (csrf(s))
                input type="hidden" name="environment" value=(other.as_str());
                span { "Viewing " strong { (s.session.environment.as_str()) } " · " }
                button.secondary type="submit" { "Switch to " (other.as_str()) }
            }
            span.muted { (s.user.email) " (" (s.user.role) ")" }
            form.inline method="post" action="/dashboard/logout" {
                (csrf(s))
                button.secondary type="submit" { "Sign out" }
            }
        }
    }
}

/// The session's form token, for every form of a signed-in page.
pub fn csrf(s: &Signed) -> Markup {
    html! { input type="hidden" name="_csrf" value=(s.session.csrf_token); }
}

/// A TOTP code field (sensitive actions).
pub fn totp_field(id: &str) -> Markup {
    html! {
        label for=(id) { "Authenticator code" }
        input id=(id) name="totp" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9 ]{6,7}" required size="8";
    }
}

pub fn error_page(signed: Option<&Signed>, status: StatusCode, message: &str) -> Response {
    let title = match status {
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::NOT_FOUND => "Not found",
        StatusCode::UNAUTHORIZED => "Not signed in",
        StatusCode::TOO_MANY_REQUESTS => "Too many attempts",
        s if s.is_server_error() => "Something went wrong",
        _ => "That did not work",
    };
    page(
        signed,
        status,
        title,
        "",
        html! {
            p.error role="alert" { (message) }
            @if signed.is_some() { p { a href="/dashboard" { "Back to the overview" } } }
            @else { p { a href="/dashboard/login" { "Sign in" } } }
        },
    )
}

pub fn ts(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A short notice shown after an action (`?done=<code>`): fixed texts only, nothing reflected.
pub fn notice(done: Option<&str>) -> Markup {
    let text = match done {
        Some("cancelled") => "Cancelled.",
        Some("resolved") => "Resolved: the invoice is paid with what was received.",
        Some("approved") => "Approved.",
        Some("revoked") => "Revoked.",
        Some("saved") => "Saved.",
        Some("removed") => "Removed.",
        Some("role") => "Role changed.",
        Some("created") => "Created.",
        Some("signed-out-everywhere") => "Every other session has ended.",
        _ => return html! {},
    };
    html! { p.notice role="status" { (text) } }
}
