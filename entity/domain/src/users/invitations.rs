//! One-time links to join a merchant's dashboard. Made by the operator (`ops merchants invite`)
//! or by a member allowed to manage the invitee's role. The link carries a 256-bit token; the
//! row keeps only its SHA-256. Accepting sets the password and enrols TOTP in one step, and
//! the invitation is taken with `UPDATE … WHERE accepted_at IS NULL`, so a link makes one
//! account however often it is posted.

use chrono::{DateTime, Duration, Utc};
use entity::{MerchantId, Role, dashboard_invitation, dashboard_user};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, SqlErr, TransactionTrait,
};
use uuid::Uuid;

use super::{UserError, new_token, normalize_email, passwords, token_hash, totp, totp_label};
use crate::audit;
use crate::webhooks::secrets::SecretBox;

/// Makes an invitation; the returned token goes into the link (`/dashboard/invite/<token>`).
pub async fn create(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    email: &str,
    role: Role,
    invited_by: &str,
    ttl: Duration,
    now: DateTime<Utc>,
) -> Result<(dashboard_invitation::Model, String), UserError> {
    let email = normalize_email(email)?;
    crate::merchants::get_merchant(db, merchant_id).await.map_err(|_| UserError::NotFound)?;
    let taken = dashboard_user::Entity::find().filter(dashboard_user::Column::Email.eq(&email)).one(db).await?;
    if taken.is_some() {
        return Err(UserError::EmailTaken(email));
    }
    let token = new_token();
    let row = dashboard_invitation::Model {
        id: Uuid::now_v7(),
        merchant_id: merchant_id.0,
        email,
        role,
        token_hash: token_hash(&token),
        invited_by: invited_by.to_owned(),
        created_at: now,
        expires_at: now + ttl,
        accepted_at: None,
        revoked_at: None,
    };
    let row = row.into_active_model().insert(db).await?;
    audit::record(
        db,
        audit::Entry::new(invited_by, "dashboard_invitation.create", "dashboard_invitation", row.id)
            .merchant(merchant_id, None)
            .change(
                None,
                Some(serde_json::json!({"email": row.email, "role": row.role, "expires_at": row.expires_at})),
            ),
    )
    .await?;
    Ok((row, token))
}

/// The invitation a link's token names, while it can still be accepted.
pub async fn open(
    db: &impl ConnectionTrait,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Option<dashboard_invitation::Model>, UserError> {
    Ok(dashboard_invitation::Entity::find()
        .filter(dashboard_invitation::Column::TokenHash.eq(token_hash(token)))
        .filter(dashboard_invitation::Column::AcceptedAt.is_null())
        .filter(dashboard_invitation::Column::RevokedAt.is_null())
        .filter(dashboard_invitation::Column::ExpiresAt.gt(now))
        .one(db)
        .await?)
}

/// Accepts an invitation: checks the password rule and that `code` is the current code of
/// `totp_secret` (the secret the enrolment page showed), then, in one transaction, takes the
/// invitation and creates the user.
pub async fn accept(
    db: &DatabaseConnection,
    sbox: &SecretBox,
    token: &str,
    password: &str,
    totp_secret: &str,
    code: &str,
    now: DateTime<Utc>,
) -> Result<dashboard_user::Model, UserError> {
    passwords::check_policy(password)?;
    let step = totp::matching_step(totp_secret, code, now).ok_or(UserError::BadCode)?;
    let inv = open(db, token, now).await?.ok_or(UserError::InvitationInvalid)?;
    let password_hash = passwords::hash(password).await?;
    let txn = db.begin().await?;
    let taken = dashboard_invitation::Entity::update_many()
        .col_expr(dashboard_invitation::Column::AcceptedAt, Expr::value(Some(now)))
        .filter(dashboard_invitation::Column::Id.eq(inv.id))
        .filter(dashboard_invitation::Column::AcceptedAt.is_null())
        .filter(dashboard_invitation::Column::RevokedAt.is_null())
        .exec(&txn)
        .await?;
    if taken.rows_affected != 1 {
        return Err(UserError::InvitationInvalid);
    }
    let id = Uuid::now_v7();
    let user = dashboard_user::Model {
        id,
        merchant_id: inv.merchant_id,
        email: inv.email.clone(),
        role: inv.role,
        password_hash,
        totp_secret_ciphertext: sbox.seal_labeled(&totp_label(id), totp_secret.trim()),
        totp_last_step: step,
        created_at: now,
        updated_at: now,
        disabled_at: None,
    };
    let user = match user.into_active_model().insert(&txn).await {
        Ok(u) => u,
        Err(e) if matches!(e.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
            return Err(UserError::EmailTaken(inv.email));
        }
        Err(e) => return Err(e.into()),
    };
    audit::record(
        &txn,
        audit::Entry::new(&super::actor_of(&user), "dashboard_user.join", "dashboard_user", user.id)
            .merchant(MerchantId(user.merchant_id), None)
            .change(None, Some(serde_json::json!({"email": user.email, "role": user.role, "invitation_id": inv.id}))),
    )
    .await?;
    txn.commit().await?;
    Ok(user)
}

/// The merchant's invitations not yet accepted, revoked or expired.
pub async fn pending(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    now: DateTime<Utc>,
) -> Result<Vec<dashboard_invitation::Model>, UserError> {
    Ok(dashboard_invitation::Entity::find()
        .filter(dashboard_invitation::Column::MerchantId.eq(merchant_id.0))
        .filter(dashboard_invitation::Column::AcceptedAt.is_null())
        .filter(dashboard_invitation::Column::RevokedAt.is_null())
        .filter(dashboard_invitation::Column::ExpiresAt.gt(now))
        .order_by_desc(dashboard_invitation::Column::CreatedAt)
        .all(db)
        .await?)
}

/// Revokes a pending invitation of the actor's merchant (one whose role the actor manages).
pub async fn revoke(
    db: &impl ConnectionTrait,
    actor: &dashboard_user::Model,
    id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), UserError> {
    let inv = dashboard_invitation::Entity::find_by_id(id)
        .filter(dashboard_invitation::Column::MerchantId.eq(actor.merchant_id))
        .one(db)
        .await?
        .ok_or(UserError::NotFound)?;
    if !super::roles::may_manage_member(actor.role, inv.role) {
        return Err(UserError::Forbidden);
    }
    let res = dashboard_invitation::Entity::update_many()
        .col_expr(dashboard_invitation::Column::RevokedAt, Expr::value(Some(now)))
        .filter(dashboard_invitation::Column::Id.eq(inv.id))
        .filter(dashboard_invitation::Column::AcceptedAt.is_null())
        .filter(dashboard_invitation::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    if res.rows_affected != 1 {
        return Err(UserError::NotFound);
    }
    audit::record(
        db,
        audit::Entry::new(&super::actor_of(actor), "dashboard_invitation.revoke", "dashboard_invitation", inv.id)
            .merchant(MerchantId(inv.merchant_id), None),
    )
    .await?;
    Ok(())
}
