use sea_orm::entity::prelude::*;

use crate::Role;

/// A one-time link to join a merchant's dashboard. Only the SHA-256 of the link's token is
/// stored; the link is shown once, to whoever invited.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "dashboard_invitations")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub email: String,
    pub role: Role,
    #[sea_orm(unique)]
    pub token_hash: String,
    /// `operator` or `user:<id>`.
    pub invited_by: String,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub accepted_at: Option<DateTimeUtc>,
    pub revoked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
