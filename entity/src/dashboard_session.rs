use sea_orm::entity::prelude::*;

use crate::Environment;

/// A signed-in dashboard session, kept in the database so that any API process serves it.
/// The cookie holds a random token; only its SHA-256 is stored.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "dashboard_sessions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    #[sea_orm(unique)]
    pub token_hash: String,
    pub user_id: Uuid,
    pub merchant_id: Uuid,
    /// The environment the dashboard shows (the test/live switch).
    pub environment: Environment,
    /// The form token every state-changing request must carry (CSRF).
    pub csrf_token: String,
    pub created_at: DateTimeUtc,
    pub last_seen_at: DateTimeUtc,
    /// Absolute end; the idle timeout is counted from `last_seen_at`.
    pub expires_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
