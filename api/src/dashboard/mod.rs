//! The merchant dashboard (`/dashboard`): server-rendered pages for the people of a merchant,
//! over the same domain services as the API. No script at all, no external asset, a strict
//! Content-Security-Policy; forms post back to the dashboard.
//!
//! - Sign-in: e-mail, password (argon2id) and TOTP code; throttled per account and per client
//!   IP with the API's limiter (`[rate_limits] login_per_account`, `login_per_ip`).
//! - Sessions (`domain::users::sessions`) live in the database, so any API process serves any
//!   session. Cookie `paygate_session`: HttpOnly, SameSite=Strict, `Secure` outside development
//!   (`dashboard.secure_cookie`), path `/dashboard`.
//! - CSRF: every POST carries the session's form token (`_csrf`), checked in constant time by
//!   [`guard`] before any handler runs; the sign-in and invitation forms, which have no session
//!   yet, carry a double-submit token (cookie `paygate_form`). A cross-site POST
//!   (`Sec-Fetch-Site: cross-site`) is refused outright.
//! - Roles (`domain::users::roles`): a page shows only the actions the role allows, and each
//!   action checks again; a refused action changes nothing and answers a 403 page.
//! - Every change is in the audit log with `user:<id>` as actor.

// A refused step answers its page at once (`Result<_, Response>`): the error path is a whole
// rendered page, as large as the success path, and taken at most once per request.
#![allow(clippy::result_large_err)]

mod auth_pages;
mod exports;
mod invoices;
mod keys;
mod money;
mod overview;
mod payouts;
mod settings;
mod team;
pub mod view;
mod webhooks;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{Duration, Utc};
use domain::domain_error::{DomainError, Kind};
use domain::keys::{Permissions, Principal};
use domain::users::roles::{self, Capability};
use domain::users::{UserError, sessions};
use domain::webhooks::secrets::SecretBox;
use entity::{ApiKeyId, MerchantId, dashboard_session, dashboard_user};
use std::sync::Arc;
use subtle::ConstantTimeEq;

use crate::state::HttpState;

pub const SESSION_COOKIE: &str = "paygate_session";
pub const FORM_COOKIE: &str = "paygate_form";
const CSRF_FIELD: &str = "_csrf";
/// Forms are small; anything larger is refused before it is parsed.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// No script, no inline style, nothing external; forms post only to the dashboard itself.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

const STYLE: &str = include_str!("assets/dashboard.css");

pub fn router(state: HttpState) -> Router<HttpState> {
    Router::new()
        .route("/dashboard/assets/dashboard.css", get(|| async { style() }))
        .route("/dashboard/login", get(auth_pages::login_page).post(auth_pages::login))
        .route("/dashboard/logout", post(auth_pages::logout))
        .route("/dashboard/logout-everywhere", post(auth_pages::logout_everywhere))
        .route("/dashboard/invite/{token}", get(auth_pages::invite_page).post(auth_pages::accept_invite))
        .route("/dashboard/environment", post(auth_pages::switch_environment))
        .route("/dashboard", get(overview::page))
        .route("/dashboard/invoices", get(invoices::list))
        .route("/dashboard/invoices/{id}", get(invoices::detail))
        .route("/dashboard/invoices/{id}/cancel", post(invoices::cancel))
        .route("/dashboard/invoices/{id}/resolve", post(invoices::resolve))
        .route("/dashboard/invoices/{id}/refund", post(invoices::refund))
        .route("/dashboard/refunds", get(money::refunds))
        .route("/dashboard/balances", get(money::balances))
        .route("/dashboard/addresses", get(money::addresses))
        .route("/dashboard/payouts", get(payouts::list).post(payouts::create))
        .route("/dashboard/payouts/{id}/approve", post(payouts::approve))
        .route("/dashboard/payouts/{id}/cancel", post(payouts::cancel))
        .route("/dashboard/keys", get(keys::list).post(keys::create))
        .route("/dashboard/keys/{id}/revoke", post(keys::revoke))
        .route("/dashboard/keys/{id}/roll", post(keys::roll))
        .route("/dashboard/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/dashboard/webhooks/redeliver", post(webhooks::redeliver_range))
        .route("/dashboard/webhooks/{id}/change", post(webhooks::change))
        .route("/dashboard/webhooks/{id}/test", post(webhooks::test))
        .route("/dashboard/webhooks/deliveries/{id}", get(webhooks::delivery))
        .route("/dashboard/webhooks/deliveries/{id}/redeliver", post(webhooks::redeliver))
        .route("/dashboard/exports", get(exports::page_get))
        .route("/dashboard/exports/download", get(exports::download))
        .route("/dashboard/settings", get(settings::page).post(settings::save))
        .route("/dashboard/settings/payouts", post(settings::save_limit))
        .route("/dashboard/team", get(team::page))
        .route("/dashboard/team/invite", post(team::invite))
        .route("/dashboard/team/{id}/role", post(team::change_role))
        .route("/dashboard/team/{id}/remove", post(team::remove))
        .route("/dashboard/team/invitations/{id}/revoke", post(team::revoke_invitation))
        .fallback(|| async { view::error_page(None, StatusCode::NOT_FOUND, "There is no such page.") })
        .layer(axum::middleware::from_fn_with_state(state, guard))
}

fn style() -> Response {
    let mut r = ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response();
    secure_headers(r.headers_mut(), "public, max-age=300");
    r
}

pub(crate) fn secure_headers(h: &mut HeaderMap, cache: &'static str) {
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
}

/// The signed-in person of a request (put there by [`guard`]).
#[derive(Clone)]
pub struct Signed {
    pub session: dashboard_session::Model,
    pub user: dashboard_user::Model,
    pub merchant_name: String,
}

impl Signed {
    /// The caller the domain's services see: the user's merchant, the environment the session
    /// shows, the permissions the user's role allows (the bound for keys they create), and the
    /// user as the audit log's actor.
    pub fn principal(&self) -> Principal {
        Principal {
            key_id: ApiKeyId(uuid::Uuid::nil()),
            merchant_id: MerchantId(self.user.merchant_id),
            environment: self.session.environment,
            permissions: roles::key_permissions(self.user.role).into_iter().collect::<Permissions>(),
            user_id: Some(self.user.id),
        }
    }

    pub fn can(&self, cap: Capability) -> bool {
        roles::allows(self.user.role, cap)
    }

    /// Takes a TOTP code for a sensitive action (`users::second_factor`: the current code, once);
    /// the page that refuses it otherwise.
    pub async fn second_factor(&self, state: &HttpState, code: &str) -> Result<(), Response> {
        let sbox = secret_box(state)?;
        domain::users::second_factor(&state.db, &sbox, &self.user, code, Utc::now())
            .await
            .map_err(|e| user_error(Some(self), e))
    }

    /// 403 page unless the role allows `cap`.
    pub fn require(&self, cap: Capability) -> Result<(), Response> {
        if self.can(cap) {
            Ok(())
        } else {
            Err(view::error_page(
                Some(self),
                StatusCode::FORBIDDEN,
                &format!("Your role ({}) does not allow this. Nothing was changed.", self.user.role),
            ))
        }
    }
}

/// The key that seals TOTP secrets (the operator's webhook secrets key).
pub(crate) fn secret_box(state: &HttpState) -> Result<Arc<SecretBox>, Response> {
    state.secrets.clone().ok_or_else(|| {
        view::error_page(
            None,
            StatusCode::SERVICE_UNAVAILABLE,
            "The dashboard is not available: the operator has not configured the secrets key \
             (webhooks.secret_key).",
        )
    })
}

pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

pub(crate) fn set_cookie(state: &HttpState, name: &str, value: &str, max_age_secs: i64) -> HeaderValue {
    let secure = if state.config.dashboard.secure_cookie(&state.config.public_base_url) { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/dashboard; HttpOnly; SameSite=Strict; Max-Age={max_age_secs}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn public_path(path: &str) -> bool {
    path == "/dashboard/login" || path.starts_with("/dashboard/invite/") || path.starts_with("/dashboard/assets/")
}

/// The form's CSRF token: the `_csrf` field of a urlencoded body.
fn form_token(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body).find(|(k, _)| k == CSRF_FIELD).map(|(_, v)| v.into_owned())
}

fn same(a: &str, b: &str) -> bool {
    !a.is_empty() && a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Sessions and CSRF for every dashboard route. A GET without a session is sent to the sign-in
/// page; a POST without a session, or without the right form token, is refused (403) before
/// its handler runs, so nothing changes.
pub async fn guard(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let is_post = req.method() == Method::POST;
    if is_post && req.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("cross-site") {
        return view::error_page(None, StatusCode::FORBIDDEN, "Cross-site form posts are refused.");
    }
    if public_path(&path) {
        if !is_post {
            return next.run(req).await;
        }
        let (parts, body) = req.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
            return view::error_page(None, StatusCode::PAYLOAD_TOO_LARGE, "The form is too large.");
        };
        let expected = cookie(&parts.headers, FORM_COOKIE).unwrap_or_default();
        if !form_token(&bytes).is_some_and(|t| same(&t, &expected)) {
            return view::error_page(
                None,
                StatusCode::FORBIDDEN,
                "This form has expired or did not come from this site. Reload the page and try again.",
            );
        }
        return next.run(Request::from_parts(parts, Body::from(bytes))).await;
    }
    let token = cookie(req.headers(), SESSION_COOKIE);
    let idle = Duration::seconds(i64::try_from(state.config.dashboard.idle_timeout_secs).unwrap_or(3600));
    let found = match token {
        Some(t) => sessions::find(&state.db, &t, idle, Utc::now()).await,
        None => Ok(None),
    };
    let (session, user) = match found {
        Ok(Some(s)) => s,
        Ok(None) if is_post => {
            return view::error_page(
                None,
                StatusCode::FORBIDDEN,
                "You are not signed in (or your session ended). Nothing was changed.",
            );
        }
        Ok(None) => return Redirect::to("/dashboard/login").into_response(),
        Err(e) => return user_error(None, e),
    };
    let merchant_name = match state.merchant(MerchantId(user.merchant_id)).await {
        Ok(m) => m.name.clone(),
        Err(e) => return domain_error(None, e.into()),
    };
    let signed = Signed { session, user, merchant_name };
    let mut req = req;
    if is_post {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
            return view::error_page(Some(&signed), StatusCode::PAYLOAD_TOO_LARGE, "The form is too large.");
        };
        if !form_token(&bytes).is_some_and(|t| same(&t, &signed.session.csrf_token)) {
            return view::error_page(
                Some(&signed),
                StatusCode::FORBIDDEN,
                "This form has expired or did not come from this site (CSRF check). Nothing was changed.",
            );
        }
        req = Request::from_parts(parts, Body::from(bytes));
    }
    req.extensions_mut().insert(signed);
    next.run(req).await
}

/// A domain error as a page (its status, its message and details).
pub(crate) fn domain_error(signed: Option<&Signed>, e: crate::error::ApiError) -> Response {
    if e.status == StatusCode::INTERNAL_SERVER_ERROR {
        return view::error_page(signed, e.status, "Something went wrong on our side. Nothing was changed.");
    }
    let mut msg = e.message.clone();
    if !e.details.is_empty() {
        msg = format!("{msg} ({})", e.details.join("; "));
    }
    view::error_page(signed, e.status, &msg)
}

pub(crate) fn from_domain(signed: &Signed, e: DomainError) -> Response {
    let status = match e.kind {
        Kind::Internal => return domain_error(Some(signed), crate::error::ApiError::internal(e.message)),
        _ => crate::error::ApiError::from(e),
    };
    domain_error(Some(signed), status)
}

pub(crate) fn user_error(signed: Option<&Signed>, e: UserError) -> Response {
    let status = match &e {
        UserError::InvalidEmail | UserError::WeakPassword(_) | UserError::BadCode => StatusCode::BAD_REQUEST,
        UserError::BadCredentials => StatusCode::UNAUTHORIZED,
        UserError::InvitationInvalid | UserError::NotFound => StatusCode::NOT_FOUND,
        UserError::EmailTaken(_) | UserError::LastOwner => StatusCode::CONFLICT,
        UserError::Forbidden => StatusCode::FORBIDDEN,
        UserError::Internal(m) => {
            tracing::error!(error = %m, "dashboard");
            return view::error_page(
                signed,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong on our side. Nothing was changed.",
            );
        }
        UserError::Db(d) => {
            tracing::error!(error = %d, "dashboard database error");
            return view::error_page(
                signed,
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong on our side. Nothing was changed.",
            );
        }
    };
    view::error_page(signed, status, &e.to_string())
}

/// Records a dashboard action in the audit log (actions whose service does not record one).
pub(crate) async fn audit(
    state: &HttpState,
    signed: &Signed,
    action: &'static str,
    target_type: &'static str,
    target_id: impl ToString,
) {
    let entry = domain::audit::Entry::new(&domain::users::actor_of(&signed.user), action, target_type, target_id)
        .merchant(MerchantId(signed.user.merchant_id), Some(signed.session.environment));
    if let Err(e) = domain::audit::record(&state.db, entry).await {
        tracing::error!(error = %e, action, "could not record a dashboard action in the audit log");
    }
}

/// A form's `YYYY-MM-DD` as that day's first instant (UTC); the problem named by `field`.
pub(crate) fn day_start(s: &str, field: &str) -> Result<chrono::DateTime<Utc>, String> {
    chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc())
        .map_err(|_| format!("{field}: use a date like 2026-01-31"))
}

/// 303 to `to` (after a POST).
pub(crate) fn see_other(to: &str) -> Response {
    Redirect::to(to).into_response()
}
