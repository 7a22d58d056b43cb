//! Team: members and their roles, pending invitations; invite, change a role, remove, revoke an
//! invitation. Each change needs a TOTP code, and nobody manages a role above their own
//! (`roles::may_manage_member`).

use axum::Extension;
use axum::extract::{Form, Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{Duration, Utc};
use domain::users::roles::{self, Capability};
use domain::users::{self, invitations};
use entity::{MerchantId, Role};
use maud::html;
use serde::Deserialize;
use uuid::Uuid;

use super::auth_pages::{DoneQuery, done_notice};
use super::view::{csrf, error_page, page as render, totp_field, ts};
use super::{Signed, see_other, user_error};
use crate::state::HttpState;

pub async fn page_get(state: &HttpState, s: &Signed, q: &DoneQuery) -> Response {
    let merchant = MerchantId(s.user.merchant_id);
    let members = match users::team(&state.db, merchant).await {
        Ok(m) => m,
        Err(e) => return user_error(Some(s), e.into()),
    };
    let pending = match invitations::pending(&state.db, merchant, Utc::now()).await {
        Ok(p) => p,
        Err(e) => return user_error(Some(s), e),
    };
    let manage = s.can(Capability::ManageTeam);
    let grantable: Vec<Role> =
        Role::ALL.iter().copied().filter(|r| roles::may_manage_member(s.user.role, *r)).collect();
    render(
        Some(s),
        StatusCode::OK,
        "Team",
        "/dashboard/team",
        html! {
            (done_notice(q))
            div.table-wrap tabindex="0" role="region" aria-label="Table (scrolls sideways)" { table {
                thead { tr { th scope="col" { "E-mail" } th scope="col" { "Role" } th scope="col" { "Since" } @if manage { th scope="col" { "Actions" } } } }
                tbody {
                    @for m in &members {
                        tr {
                            td { (m.email) }
                            td { (m.role) }
                            td { (ts(m.created_at)) }
                            @if manage {
                                td {
                                    @if m.id != s.user.id && roles::may_manage_member(s.user.role, m.role) {
                                        form method="post" action={ "/dashboard/team/" (m.id) "/role" } {
                                            (csrf(s))
                                            label for={ "role-" (m.id) } { "New role" }
                                            select id={ "role-" (m.id) } name="role" {
                                                @for r in &grantable { option value=(r.as_str()) selected[*r == m.role] { (r.as_str()) } }
                                            }
                                            (totp_field(&format!("role-totp-{}", m.id)))
                                            button.secondary type="submit" { "Change role" }
                                        }
                                        form method="post" action={ "/dashboard/team/" (m.id) "/remove" } {
                                            (csrf(s))
                                            (totp_field(&format!("remove-totp-{}", m.id)))
                                            button.danger type="submit" { "Remove" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            } }
            @if !pending.is_empty() {
                h2 { "Invitations" }
                ul {
                    @for i in &pending {
                        li {
                            (i.email) " as " (i.role) ", until " (ts(i.expires_at))
                            @if manage && roles::may_manage_member(s.user.role, i.role) {
                                form.inline method="post" action={ "/dashboard/team/invitations/" (i.id) "/revoke" } {
                                    (csrf(s))
                                    " " button.secondary type="submit" { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
            @if manage {
                form.card method="post" action="/dashboard/team/invite" {
                    (csrf(s))
                    h2 { "Invite someone" }
                    label for="i-email" { "E-mail" }
                    input id="i-email" name="email" type="email" required size="40";
                    label for="i-role" { "Role" }
                    select id="i-role" name="role" { @for r in &grantable { option value=(r.as_str()) { (r.as_str()) } } }
                    (totp_field("i-totp"))
                    p { button type="submit" { "Create invitation link" } }
                }
            }
            section.card {
                h2 { "What each role may do" }
                ul {
                    li { strong { "owner" } ": everything, including the team and other owners." }
                    li { strong { "admin" } ": everything except managing owners." }
                    li { strong { "developer" } ": sees everything; API keys, webhooks and exports; no money actions, settings or team." }
                    li { strong { "viewer" } ": sees everything and exports; changes nothing." }
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
pub struct InviteForm {
    email: String,
    role: String,
    totp: String,
}

pub async fn invite(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Form(f): Form<InviteForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageTeam) {
        return r;
    }
    let Some(role) = Role::parse(&f.role) else {
        return error_page(Some(&s), StatusCode::BAD_REQUEST, &format!("role: one of {}", Role::WIRE_LIST));
    };
    if !roles::may_manage_member(s.user.role, role) {
        return user_error(Some(&s), users::UserError::Forbidden);
    }
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    let ttl = Duration::seconds(i64::try_from(state.config.dashboard.invitation_ttl_secs).unwrap_or(604_800));
    let actor = users::actor_of(&s.user);
    match invitations::create(&state.db, MerchantId(s.user.merchant_id), &f.email, role, &actor, ttl, Utc::now()).await
    {
        Ok((inv, token)) => {
            let link = state
                .config
                .public_base_url
                .join(&format!("dashboard/invite/{token}"))
                .map(|u| u.to_string())
                .unwrap_or_default();
            render(
                Some(&s),
                StatusCode::CREATED,
                "Invitation created",
                "/dashboard/team",
                html! {
                    p { "Send this link to " strong { (inv.email) } " (" (inv.role) "). It works once, until " (ts(inv.expires_at)) ", and is shown only now:" }
                    code.secret id="invite-link" { (link) }
                    p { a href="/dashboard/team" { "Back to the team" } }
                },
            )
        }
        Err(e) => user_error(Some(&s), e),
    }
}

#[derive(Deserialize)]
pub struct RoleForm {
    role: String,
    totp: String,
}

pub async fn change_role(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    Form(f): Form<RoleForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageTeam) {
        return r;
    }
    let Some(role) = Role::parse(&f.role) else {
        return error_page(Some(&s), StatusCode::BAD_REQUEST, &format!("role: one of {}", Role::WIRE_LIST));
    };
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    match users::change_role(&state.db, &s.user, id, role).await {
        Ok(_) => see_other("/dashboard/team?done=role"),
        Err(e) => user_error(Some(&s), e),
    }
}

#[derive(Deserialize)]
pub struct CodeForm {
    totp: String,
}

pub async fn remove(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
    Form(f): Form<CodeForm>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageTeam) {
        return r;
    }
    if let Err(r) = s.second_factor(&state, &f.totp).await {
        return r;
    }
    match users::remove(&state.db, &s.user, id).await {
        Ok(()) => see_other("/dashboard/team?done=removed"),
        Err(e) => user_error(Some(&s), e),
    }
}

pub async fn revoke_invitation(
    State(state): State<HttpState>,
    Extension(s): Extension<Signed>,
    Path(id): Path<Uuid>,
) -> Response {
    if let Err(r) = s.require(Capability::ManageTeam) {
        return r;
    }
    match invitations::revoke(&state.db, &s.user, id, Utc::now()).await {
        Ok(()) => see_other("/dashboard/team?done=revoked"),
        Err(e) => user_error(Some(&s), e),
    }
}
