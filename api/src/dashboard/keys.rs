//! API keys: the environment's keys, a new key with chosen permissions (never beyond what the
//! person's role allows; shown once), roll with an overlap, revoke. A live key needs a TOTP code.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use domain::api_keys;
use domain::keys::{Permission, Permissions};
use domain::users::roles::{self, Capability};
use entity::{ApiKeyId, Environment, api_key};
use maud::{Markup, html};
use uuid::Uuid;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, error_page, page, totp_field, ts};
use super::{Signed, from_domain, see_other};
use crate::state::HttpState;

fn key_table(s: &Signed, keys: &[api_key::Model]) -> Markup {
    let manage = s.can(Capability::ManageKeys);
    let now = Utc::now();
    html! {
        div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
            thead { tr { th scope="col" { "Key" } th scope="col" { "Label" } th scope="col" { "Permissions" } th scope="col" { "Created" } th scope="col" { "State" } @if manage { th scope="col" { "Actions" } } } }
            tbody {
                @for k in keys {
                    @let live = k.revoked_at.is_none_or(|t| t > now);
                    tr {
                        td { code { (k.key_prefix) "…" } }
                        td { (k.label.as_deref().unwrap_or("")) }
                        td { (Permissions::from_json(&k.permissions).to_json().as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default()) }
                        td { (ts(k.created_at)) }
                        td { @match k.revoked_at { None => "active", Some(t) if t > now => { "active until " (ts(t)) }, Some(t) => { "revoked " (ts(t)) } } }
                        @if manage {
                            td {
                                @if live {
                                    form method="post" action={ "/dashboard/keys/" (k.id) "/roll" } {
                                        (csrf(s))
                                        label for={ "overlap-" (k.id) } { "Old key works for" }
                                        select id={ "overlap-" (k.id) } name="overlap_secs" {
                                            option value="0" { "no overlap" }
                                            option value="3600" selected { "1 hour" }
                                            option value="86400" { "1 day" }
                                            option value="604800" { "7 days" }
                                        }
                                        @if k.environment == Environment::Live { (totp_field(&format!("roll-totp-{}", k.id))) }
                                        button.secondary type="submit" { "Roll" }
                                    }
                                    form method="post" action={ "/dashboard/keys/" (k.id) "/revoke" } {
                                        (csrf(s))
                                        button.danger type="submit" { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        } }
    }
}

pub async fn list(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Query(q): Query<DoneQuery>,
) -> Response {
    let keys = match api_keys::list(&state, &s.principal()).await {
        Ok(k) => k,
        Err(e) => return from_domain(&s, e),
    };
    let allowed = roles::key_permissions(s.user.role);
    let live = s.session.environment == Environment::Live;
    page(
        Some(&s),
        StatusCode::OK,
        "API keys",
        "/dashboard/keys",
        html! {
            (done_notice(&q))
            p { "Keys of the " strong { (s.session.environment.as_str()) } " environment. Send one as the " code { "X-API-Key" } " header." }
            (key_table(&s, &keys))
            @if s.can(Capability::ManageKeys) {
                form.card method="post" action="/dashboard/keys" {
                    (csrf(&s))
                    h2 { "New " (s.session.environment.as_str()) " key" }
                    label for="k-label" { "Label" }
                    input id="k-label" name="label" maxlength="100" size="40";
                    fieldset {
                        legend { "Permissions" }
                        @for p in &allowed {
                            label { input type="checkbox" name="permission" value=(p.as_str()) checked; (p.as_str()) }
                        }
                    }
                    @if live { (totp_field("k-totp")) }
                    p { button type="submit" id="create-key" { "Create key" } }
                }
            }
        },
    )
}

/// The form's repeated `permission` fields, its label and its TOTP code.
struct CreateForm {
    label: Option<String>,
    permissions: Vec<String>,
    totp: String,
}

fn parse_create(body: &[u8]) -> CreateForm {
    let mut f = CreateForm { label: None, permissions: Vec::new(), totp: String::new() };
    for (k, v) in url::form_urlencoded::parse(body) {
        match k.as_ref() {
            "label" => f.label = Some(v.trim().to_owned()).filter(|l| !l.is_empty()),
            "permission" => f.permissions.push(v.into_owned()),
            "totp" => f.totp = v.into_owned(),
            _ => {}
        }
    }
    f
}

pub async fn create(State(state): State<HttpState>, Extension(s): Extension<Signed>, body: Bytes) -> Response {
    if let Err(r) = s.require(Capability::ManageKeys) {
        return r;
    }
    let f = parse_create(&body);
    let mut named = Vec::new();
    for p in &f.permissions {
        match Permission::parse(p) {
            Some(p) => named.push(p),
            None => {
                return error_page(
                    Some(&s),
                    StatusCode::BAD_REQUEST,
                    &format!("permissions: unknown permission {p:?}"),
                );
            }
        }
    }
    if named.is_empty() {
        return error_page(Some(&s), StatusCode::BAD_REQUEST, "permissions: choose at least one");
    }
    if let Err(r) = live_second_factor(&state, &s, &f.totp).await {
        return r;
    }
    let perms: Permissions = named.into_iter().collect();
    match api_keys::create(&state, &s.principal(), perms, f.label.as_deref()).await {
        Ok((k, key)) => shown_once(&s, "Key created", &k, &key),
        Err(e) => from_domain(&s, e),
    }
}

/// A new key's page: the key string, shown this once.
fn shown_once(s: &Signed, title: &str, k: &api_key::Model, key: &str) -> Response {
    page(
        Some(s),
        StatusCode::CREATED,
        title,
        "/dashboard/keys",
        html! {
            p { "Copy the key now: it is shown only this once." }
            code.secret id="new-key" { (key) }
            p { "Label: " (k.label.as_deref().unwrap_or("—")) }
            p { a href="/dashboard/keys" { "Back to the keys" } }
        },
    )
}

/// Creating or rolling a live key needs a TOTP code.
async fn live_second_factor(state: &HttpState, s: &Signed, code: &str) -> Result<(), Response> {
    match s.session.environment {
        Environment::Live => s.second_factor(state, code).await,
        Environment::Test => Ok(()),
    }
}

#[derive(serde::Deserialize)]
pub struct RollForm {
    overlap_secs: String,
    #[serde(default)]
    totp: String,
}

pub async fn roll(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    axum::extract::Form(f): axum::extract::Form<RollForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageKeys) {
        return r;
    }
    let Ok(overlap) = f.overlap_secs.trim().parse::<i64>() else {
        return error_page(Some(&s), StatusCode::BAD_REQUEST, "overlap_secs: a whole number of seconds");
    };
    if let Err(r) = live_second_factor(&state, &s, &f.totp).await {
        return r;
    }
    match api_keys::roll(&state, &s.principal(), ApiKeyId(id), overlap).await {
        Ok((_, new, key)) => shown_once(&s, "Key rolled", &new, &key),
        Err(e) => from_domain(&s, e),
    }
}

pub async fn revoke(State(state): State<HttpState>, Extension(s): Extension<Signed>, Path(id): Path<Uuid>) -> Response {
    if let Err(r) = s.require(Capability::ManageKeys) {
        return r;
    }
    match api_keys::revoke(&state, &s.principal(), ApiKeyId(id)).await {
        Ok(_) => see_other("/dashboard/keys?done=revoked"),
        Err(e) => from_domain(&s, e),
    }
}
