//! Signing in and out, accepting an invitation (password and TOTP enrolment), and the test/live
//! switch.

use axum::Extension;
use axum::extract::{Form, FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use chrono::{Duration, Utc};
use domain::users::{self, UserError, invitations, sessions, totp};
use entity::Environment;
use maud::{PreEscaped, html};
use serde::Deserialize;

use super::view::{self, notice, page};
use super::{FORM_COOKIE, SESSION_COOKIE, Signed, cookie, secret_box, see_other, set_cookie, user_error};
use crate::ratelimit::Class;
use crate::state::HttpState;

/// The double-submit token of the sign-in and invitation forms: the cookie's, or a new one
/// (then set on the response).
fn form_token(headers: &HeaderMap) -> (String, bool) {
    match cookie(headers, FORM_COOKIE).filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
        Some(t) => (t, false),
        None => (users::new_token(), true),
    }
}

fn with_form_cookie(state: &HttpState, mut r: Response, token: &str, fresh: bool) -> Response {
    if fresh {
        r.headers_mut().append(header::SET_COOKIE, set_cookie(state, FORM_COOKIE, token, 86_400));
    }
    r
}

#[derive(Deserialize)]
pub struct DoneQuery {
    pub done: Option<String>,
}

pub async fn login_page(State(state): State<HttpState>, headers: HeaderMap, Query(q): Query<DoneQuery>) -> Response {
    let (token, fresh) = form_token(&headers);
    let r = login_form(StatusCode::OK, &token, None, q.done.as_deref());
    with_form_cookie(&state, r, &token, fresh)
}

fn login_form(status: StatusCode, token: &str, error: Option<&str>, done: Option<&str>) -> Response {
    let joined = done == Some("joined");
    page(
        None,
        status,
        "Sign in",
        "",
        html! {
            div.auth {
                @if joined { p.notice role="status" { "Your account is ready. Sign in with your password and a code from your authenticator app." } }
                @if let Some(e) = error { p.error role="alert" { (e) } }
                form.card method="post" action="/dashboard/login" {
                    input type="hidden" name="_csrf" value=(token);
                    label for="email" { "E-mail" }
                    input id="email" name="email" type="email" autocomplete="username" required;
                    label for="password" { "Password" }
                    input id="password" name="password" type="password" autocomplete="current-password" required;
                    (view::totp_field("totp"))
                    p { button type="submit" { "Sign in" } }
                }
            }
        },
    )
}

#[derive(Deserialize)]
pub struct LoginForm {
    email: String,
    password: String,
    totp: String,
}

pub async fn login(State(state): State<HttpState>, req: Request) -> Response {
    let cfg = state.limiter.config().clone();
    let ip = crate::ratelimit::layer::client_key(&req, &cfg);
    let (token, _) = form_token(req.headers());
    let Ok(Form(f)) = Form::<LoginForm>::from_request(req, &state).await else {
        return login_form(StatusCode::BAD_REQUEST, &token, Some("Fill in e-mail, password and code."), None);
    };
    let account = f.email.trim().to_lowercase();
    let by_ip = state.limiter.check(Class::LoginIp, &ip, cfg.login_per_ip).await;
    let by_account = state.limiter.check(Class::LoginAccount, &account, cfg.login_per_account).await;
    if !by_ip.allowed || !by_account.allowed {
        let wait = by_ip.retry_after.max(by_account.retry_after).as_secs().max(1);
        let mut r = login_form(
            StatusCode::TOO_MANY_REQUESTS,
            &token,
            Some(&format!("Too many sign-in attempts. Try again in {wait} seconds.")),
            None,
        );
        r.headers_mut().insert(header::RETRY_AFTER, wait.into());
        return r;
    }
    let sbox = match secret_box(&state) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let now = Utc::now();
    let user = match users::authenticate(&state.db, &sbox, &f.email, &f.password, &f.totp, now).await {
        Ok(u) => u,
        Err(UserError::BadCredentials) => {
            return login_form(StatusCode::UNAUTHORIZED, &token, Some(&UserError::BadCredentials.to_string()), None);
        }
        Err(e) => return user_error(None, e),
    };
    let ttl = Duration::seconds(i64::try_from(state.config.dashboard.session_ttl_secs).unwrap_or(43_200));
    let (session, session_token) = match sessions::create(&state.db, &user, ttl, now).await {
        Ok(s) => s,
        Err(e) => return user_error(None, e),
    };
    let entry =
        domain::audit::Entry::new(&users::actor_of(&user), "dashboard_user.sign_in", "dashboard_session", session.id)
            .merchant(entity::MerchantId(user.merchant_id), None);
    if let Err(e) = domain::audit::record(&state.db, entry).await {
        tracing::error!(error = %e, "could not record a sign-in in the audit log");
    }
    let mut r = see_other("/dashboard");
    r.headers_mut().append(header::SET_COOKIE, set_cookie(&state, SESSION_COOKIE, &session_token, ttl.num_seconds()));
    r
}

pub async fn logout(State(state): State<HttpState>, Extension(s): Extension<Signed>) -> Response {
    if let Err(e) = sessions::revoke(&state.db, s.session.id, Utc::now()).await {
        return user_error(Some(&s), e);
    }
    let mut r = see_other("/dashboard/login");
    r.headers_mut().append(header::SET_COOKIE, set_cookie(&state, SESSION_COOKIE, "", 0));
    r
}

/// "Log out everywhere": every session of this person ends, this one included.
pub async fn logout_everywhere(State(state): State<HttpState>, Extension(s): Extension<Signed>) -> Response {
    if let Err(e) = sessions::revoke_all(&state.db, s.user.id, Utc::now()).await {
        return user_error(Some(&s), e);
    }
    super::audit(&state, &s, "dashboard_user.sign_out_everywhere", "dashboard_user", s.user.id).await;
    let mut r = see_other("/dashboard/login");
    r.headers_mut().append(header::SET_COOKIE, set_cookie(&state, SESSION_COOKIE, "", 0));
    r
}

#[derive(Deserialize)]
pub struct EnvForm {
    environment: String,
}

pub async fn switch_environment(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Form(f): Form<EnvForm>,
) -> Response {
    let Some(env) = Environment::parse(&f.environment) else {
        return view::error_page(Some(&s), StatusCode::BAD_REQUEST, "environment must be test or live");
    };
    if let Err(e) = sessions::set_environment(&state.db, s.session.id, env).await {
        return user_error(Some(&s), e);
    }
    see_other("/dashboard")
}

pub async fn invite_page(State(state): State<HttpState>, headers: HeaderMap, Path(token): Path<String>) -> Response {
    let (form, fresh) = form_token(&headers);
    let inv = match invitations::open(&state.db, &token, Utc::now()).await {
        Ok(Some(i)) => i,
        Ok(None) => return user_error(None, UserError::InvitationInvalid),
        Err(e) => return user_error(None, e),
    };
    let secret = totp::new_secret();
    let r = invite_form(StatusCode::OK, &form, &token, &inv.email, &secret, None);
    with_form_cookie(&state, r, &form, fresh)
}

fn invite_form(
    status: StatusCode,
    form: &str,
    token: &str,
    email: &str,
    secret: &str,
    error: Option<&str>,
) -> Response {
    let url = totp::otpauth_url(secret, email).unwrap_or_default();
    let qr = crate::checkout::uri::qr_svg(&url).unwrap_or_default();
    let qr = qr.find("<svg").map_or("", |i| &qr[i..]).to_owned();
    page(
        None,
        status,
        "Join the dashboard",
        "",
        html! {
            div.auth {
                @if let Some(e) = error { p.error role="alert" { (e) } }
                p { "You are joining as " strong { (email) } "." }
                form.card method="post" action={ "/dashboard/invite/" (token) } {
                    input type="hidden" name="_csrf" value=(form);
                    input type="hidden" name="totp_secret" value=(secret);
                    h2 { "1. Choose a password" }
                    label for="password" { "Password (at least " (users::passwords::MIN_LEN) " characters)" }
                    input id="password" name="password" type="password" autocomplete="new-password" required minlength=(users::passwords::MIN_LEN);
                    label for="password_again" { "Password again" }
                    input id="password_again" name="password_again" type="password" autocomplete="new-password" required;
                    h2 { "2. Add the dashboard to your authenticator app" }
                    p { "Scan the code, or enter this key by hand:" }
                    figure.qr role="img" aria-label="QR code of the authenticator key" { (PreEscaped(qr)) }
                    p { code id="totp-secret" { (secret) } }
                    (view::totp_field("totp"))
                    p { button type="submit" { "Create my account" } }
                }
            }
        },
    )
}

#[derive(Deserialize)]
pub struct AcceptForm {
    password: String,
    password_again: String,
    totp_secret: String,
    totp: String,
}

pub async fn accept_invite(State(state): State<HttpState>, Path(token): Path<String>, req: Request) -> Response {
    let (form, _) = form_token(req.headers());
    let Ok(Form(f)) = Form::<AcceptForm>::from_request(req, &state).await else {
        return view::error_page(None, StatusCode::BAD_REQUEST, "Fill in every field.");
    };
    let inv = match invitations::open(&state.db, &token, Utc::now()).await {
        Ok(Some(i)) => i,
        Ok(None) => return user_error(None, UserError::InvitationInvalid),
        Err(e) => return user_error(None, e),
    };
    let again = |msg: &str| invite_form(StatusCode::BAD_REQUEST, &form, &token, &inv.email, &f.totp_secret, Some(msg));
    if f.password != f.password_again {
        return again("The two passwords differ.");
    }
    let sbox = match secret_box(&state) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match invitations::accept(&state.db, &sbox, &token, &f.password, &f.totp_secret, &f.totp, Utc::now()).await {
        Ok(_) => see_other("/dashboard/login?done=joined"),
        Err(e @ (UserError::WeakPassword(_) | UserError::BadCode)) => again(&e.to_string()),
        Err(e) => user_error(None, e),
    }
}

/// The notice after an action, for pages that take `?done=`.
pub fn done_notice(q: &DoneQuery) -> maud::Markup {
    notice(q.done.as_deref())
}
