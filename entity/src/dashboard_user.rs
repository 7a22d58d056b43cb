use sea_orm::entity::prelude::*;

use crate::Role;

/// A person who signs in to a merchant's dashboard. The password is stored only as an argon2id
/// hash (PHC string); the TOTP secret only sealed with the operator's secret key.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "dashboard_users")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    /// Lowercased; one person, one merchant.
    #[sea_orm(unique)]
    pub email: String,
    pub role: Role,
    pub password_hash: String,
    pub totp_secret_ciphertext: String,
    /// The last TOTP time step accepted: a code of this step or an earlier one is refused.
    pub totp_last_step: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Removed from the team: cannot sign in, every session ended.
    pub disabled_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
