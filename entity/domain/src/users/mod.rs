//! The merchant dashboard's people: users with roles, one-time invitations, passwords
//! (argon2id), the TOTP second factor and server-side sessions. The HTTP face (the api crate's
//! `dashboard`) renders pages over these; `ops merchants invite` makes the first link.
//!
//! Every session lives in the database (any API process serves any session); only SHA-256
//! digests of invitation and session tokens are stored, the password only as its argon2id
//! hash, the TOTP secret only sealed (`SecretBox::seal_labeled`).

pub mod invitations;
pub mod passwords;
pub mod roles;
pub mod sessions;
pub mod totp;

use chrono::{DateTime, Utc};
use entity::{MerchantId, Role, dashboard_user};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::webhooks::secrets::SecretBox;

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("enter a valid e-mail address")]
    InvalidEmail,
    #[error("the password {0}")]
    WeakPassword(String),
    #[error("this invitation link is not valid: it was used, revoked or has expired")]
    InvitationInvalid,
    #[error("{0} already has a dashboard account")]
    EmailTaken(String),
    #[error("that code is not valid: enter the current code from your authenticator app")]
    BadCode,
    #[error("wrong e-mail address, password or code")]
    BadCredentials,
    #[error("your role does not allow this")]
    Forbidden,
    #[error("no such member")]
    NotFound,
    #[error("the merchant must keep at least one owner")]
    LastOwner,
    #[error("{0}")]
    Internal(String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// SHA-256 hex of a token (what invitation and session rows store).
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// 256 random bits, hex.
pub fn new_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// The label a user's TOTP secret is sealed under.
pub fn totp_label(user_id: Uuid) -> String {
    format!("dashboard-totp:{user_id}")
}

/// Lowercased and trimmed; refused unless it looks like `local@domain.tld`.
pub fn normalize_email(raw: &str) -> Result<String, UserError> {
    let e = raw.trim().to_lowercase();
    let ok = e.len() <= 254
        && !e.chars().any(|c| c.is_whitespace() || c.is_control())
        && e.split_once('@').is_some_and(|(l, d)| {
            !l.is_empty() && d.contains('.') && !d.starts_with('.') && !d.ends_with('.') && !d.contains('@')
        });
    if ok { Ok(e) } else { Err(UserError::InvalidEmail) }
}

/// The user's TOTP secret (base32), opened.
pub fn totp_secret(sbox: &SecretBox, user: &dashboard_user::Model) -> Result<String, UserError> {
    sbox.open_labeled(&totp_label(user.id), &user.totp_secret_ciphertext)
        .map_err(|_| UserError::Internal("the TOTP secret does not open with the configured key".into()))
}

/// Re-seals under the current key every TOTP secret that only a previous key opens (`ops
/// webhooks rotate-key`, with the endpoint secrets): after it, the previous key can leave
/// `webhooks.previous_secret_keys` without locking anyone out. Each row is updated only if its
/// ciphertext is still the one read. Returns (re-sealed, already current).
pub async fn reseal_totp(db: &impl ConnectionTrait, sbox: &SecretBox) -> Result<(u64, u64), UserError> {
    use crate::webhooks::secrets::OpenedWith;
    let (mut resealed, mut unchanged) = (0, 0);
    for u in dashboard_user::Entity::find().all(db).await? {
        let label = totp_label(u.id);
        let (secret, with) = sbox
            .open_labeled_with(&label, &u.totp_secret_ciphertext)
            .map_err(|_| UserError::Internal(format!("the TOTP key of user {} opens with no configured key", u.id)))?;
        if with == OpenedWith::Current {
            unchanged += 1;
            continue;
        }
        let n = dashboard_user::Entity::update_many()
            .col_expr(dashboard_user::Column::TotpSecretCiphertext, Expr::value(sbox.seal_labeled(&label, &secret)))
            .filter(dashboard_user::Column::Id.eq(u.id))
            .filter(dashboard_user::Column::TotpSecretCiphertext.eq(u.totp_secret_ciphertext.as_str()))
            .exec(db)
            .await?
            .rows_affected;
        resealed += n;
    }
    Ok((resealed, unchanged))
}

/// Checks a TOTP code for a sensitive action and takes its step (see `totp::consume`).
pub async fn second_factor(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    user: &dashboard_user::Model,
    code: &str,
    now: DateTime<Utc>,
) -> Result<(), UserError> {
    let secret = totp_secret(sbox, user)?;
    totp::consume(db, user, &secret, code, now).await
}

/// A signed-in person: password, then TOTP code. Unknown e-mail, wrong password and wrong code
/// all give the same answer.
pub async fn authenticate(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    email: &str,
    password: &str,
    code: &str,
    now: DateTime<Utc>,
) -> Result<dashboard_user::Model, UserError> {
    let Ok(email) = normalize_email(email) else {
        passwords::verify_nothing(password).await;
        return Err(UserError::BadCredentials);
    };
    let user = dashboard_user::Entity::find()
        .filter(dashboard_user::Column::Email.eq(&email))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .one(db)
        .await?;
    let Some(user) = user else {
        passwords::verify_nothing(password).await;
        return Err(UserError::BadCredentials);
    };
    if !passwords::verify(password, &user.password_hash).await {
        return Err(UserError::BadCredentials);
    }
    match second_factor(db, sbox, &user, code, now).await {
        Ok(()) => Ok(user),
        Err(UserError::BadCode) => Err(UserError::BadCredentials),
        Err(e) => Err(e),
    }
}

pub async fn get(db: &impl ConnectionTrait, id: Uuid) -> Result<Option<dashboard_user::Model>, DbErr> {
    dashboard_user::Entity::find_by_id(id).one(db).await
}

/// The merchant's active members, by e-mail.
pub async fn team(db: &impl ConnectionTrait, merchant_id: MerchantId) -> Result<Vec<dashboard_user::Model>, DbErr> {
    dashboard_user::Entity::find()
        .filter(dashboard_user::Column::MerchantId.eq(merchant_id.0))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .order_by_asc(dashboard_user::Column::Email)
        .all(db)
        .await
}

/// Loads a member of `merchant_id` that `actor` may manage.
async fn managed_member(
    db: &impl ConnectionTrait,
    actor: &dashboard_user::Model,
    member_id: Uuid,
) -> Result<dashboard_user::Model, UserError> {
    let m = dashboard_user::Entity::find_by_id(member_id)
        .filter(dashboard_user::Column::MerchantId.eq(actor.merchant_id))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .one(db)
        .await?
        .ok_or(UserError::NotFound)?;
    if !roles::may_manage_member(actor.role, m.role) {
        return Err(UserError::Forbidden);
    }
    Ok(m)
}

/// Refuses a change that would leave the merchant without an active owner.
async fn keeps_an_owner(db: &impl ConnectionTrait, member: &dashboard_user::Model) -> Result<(), UserError> {
    if member.role != Role::Owner {
        return Ok(());
    }
    let owners = dashboard_user::Entity::find()
        .filter(dashboard_user::Column::MerchantId.eq(member.merchant_id))
        .filter(dashboard_user::Column::Role.eq(Role::Owner))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .all(db)
        .await?;
    if owners.len() <= 1 { Err(UserError::LastOwner) } else { Ok(()) }
}

/// Changes a member's role (guarded on the role read, audited by the caller's transaction).
pub async fn change_role(
    db: &impl ConnectionTrait,
    actor: &dashboard_user::Model,
    member_id: Uuid,
    role: Role,
) -> Result<dashboard_user::Model, UserError> {
    let m = managed_member(db, actor, member_id).await?;
    if !roles::may_manage_member(actor.role, role) {
        return Err(UserError::Forbidden);
    }
    if role != Role::Owner {
        keeps_an_owner(db, &m).await?;
    }
    let res = dashboard_user::Entity::update_many()
        .col_expr(dashboard_user::Column::Role, Expr::value(role))
        .col_expr(dashboard_user::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(dashboard_user::Column::Id.eq(m.id))
        .filter(dashboard_user::Column::Role.eq(m.role))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .exec(db)
        .await?;
    if res.rows_affected != 1 {
        return Err(UserError::NotFound);
    }
    crate::audit::record(
        db,
        crate::audit::Entry::new(&actor_of(actor), "dashboard_user.role", "dashboard_user", m.id)
            .merchant(MerchantId(m.merchant_id), None)
            .change(Some(serde_json::json!({"role": m.role})), Some(serde_json::json!({"role": role}))),
    )
    .await?;
    get(db, m.id).await?.ok_or(UserError::NotFound)
}

/// Removes a member: disabled, every session ended.
pub async fn remove(
    db: &impl ConnectionTrait,
    actor: &dashboard_user::Model,
    member_id: Uuid,
) -> Result<(), UserError> {
    let m = managed_member(db, actor, member_id).await?;
    keeps_an_owner(db, &m).await?;
    let now = Utc::now();
    let res = dashboard_user::Entity::update_many()
        .col_expr(dashboard_user::Column::DisabledAt, Expr::value(Some(now)))
        .col_expr(dashboard_user::Column::UpdatedAt, Expr::value(now))
        .filter(dashboard_user::Column::Id.eq(m.id))
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .exec(db)
        .await?;
    if res.rows_affected != 1 {
        return Err(UserError::NotFound);
    }
    sessions::revoke_all(db, m.id, now).await?;
    crate::audit::record(
        db,
        crate::audit::Entry::new(&actor_of(actor), "dashboard_user.remove", "dashboard_user", m.id)
            .merchant(MerchantId(m.merchant_id), None)
            .change(Some(serde_json::json!({"email": m.email, "role": m.role})), None),
    )
    .await?;
    Ok(())
}

/// The audit log's actor for a dashboard user.
pub fn actor_of(user: &dashboard_user::Model) -> String {
    format!("user:{}", user.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_and_checked() {
        assert_eq!(normalize_email("  Ann@Example.COM ").unwrap(), "ann@example.com");
        for bad in ["", "ann", "ann@", "@example.com", "ann@example", "a b@example.com", "ann@.com", "a@b@c.com"] {
            assert!(normalize_email(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_are_stored_as_digests() {
        let t = new_token();
        assert_eq!(t.len(), 64);
        assert_eq!(token_hash(&t).len(), 64);
        assert_ne!(token_hash(&t), t);
    }
}
