//! Server-side dashboard sessions. The cookie carries a 256-bit token; the row keeps its
//! SHA-256, the user, the environment shown (the test/live switch) and the session's CSRF
//! token. A session ends at `expires_at`, after `idle` without a request, when revoked (log
//! out, "log out everywhere", the member removed) or when its user is disabled.

use chrono::{DateTime, Duration, Utc};
use entity::{Environment, dashboard_session, dashboard_user};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter};
use uuid::Uuid;

use super::{UserError, new_token, token_hash};

/// A request's session is touched at most this often (one write per minute, not per request).
const TOUCH_EVERY_SECS: i64 = 60;

pub async fn create(
    db: &impl ConnectionTrait,
    user: &dashboard_user::Model,
    ttl: Duration,
    now: DateTime<Utc>,
) -> Result<(dashboard_session::Model, String), UserError> {
    let token = new_token();
    let row = dashboard_session::Model {
        id: Uuid::now_v7(),
        token_hash: token_hash(&token),
        user_id: user.id,
        merchant_id: user.merchant_id,
        environment: Environment::Test,
        csrf_token: new_token(),
        created_at: now,
        last_seen_at: now,
        expires_at: now + ttl,
        revoked_at: None,
    };
    Ok((row.into_active_model().insert(db).await?, token))
}

/// The live session a cookie's token names, with its active user; touched when last seen more
/// than a minute ago.
pub async fn find(
    db: &impl ConnectionTrait,
    token: &str,
    idle: Duration,
    now: DateTime<Utc>,
) -> Result<Option<(dashboard_session::Model, dashboard_user::Model)>, UserError> {
    let Some(s) = dashboard_session::Entity::find()
        .filter(dashboard_session::Column::TokenHash.eq(token_hash(token)))
        .filter(dashboard_session::Column::RevokedAt.is_null())
        .filter(dashboard_session::Column::ExpiresAt.gt(now))
        .filter(dashboard_session::Column::LastSeenAt.gt(now - idle))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let Some(user) = dashboard_user::Entity::find_by_id(s.user_id)
        .filter(dashboard_user::Column::DisabledAt.is_null())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    if now - s.last_seen_at > Duration::seconds(TOUCH_EVERY_SECS) {
        dashboard_session::Entity::update_many()
            .col_expr(dashboard_session::Column::LastSeenAt, Expr::value(now))
            .filter(dashboard_session::Column::Id.eq(s.id))
            .exec(db)
            .await?;
    }
    Ok(Some((s, user)))
}

pub async fn revoke(db: &impl ConnectionTrait, id: Uuid, now: DateTime<Utc>) -> Result<(), UserError> {
    dashboard_session::Entity::update_many()
        .col_expr(dashboard_session::Column::RevokedAt, Expr::value(Some(now)))
        .filter(dashboard_session::Column::Id.eq(id))
        .filter(dashboard_session::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    Ok(())
}

/// "Log out everywhere": every session of the user ends. Returns how many were live.
pub async fn revoke_all(db: &impl ConnectionTrait, user_id: Uuid, now: DateTime<Utc>) -> Result<u64, UserError> {
    let res = dashboard_session::Entity::update_many()
        .col_expr(dashboard_session::Column::RevokedAt, Expr::value(Some(now)))
        .filter(dashboard_session::Column::UserId.eq(user_id))
        .filter(dashboard_session::Column::RevokedAt.is_null())
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// The test/live switch.
pub async fn set_environment(db: &impl ConnectionTrait, id: Uuid, env: Environment) -> Result<(), UserError> {
    dashboard_session::Entity::update_many()
        .col_expr(dashboard_session::Column::Environment, Expr::value(env))
        .filter(dashboard_session::Column::Id.eq(id))
        .exec(db)
        .await?;
    Ok(())
}
