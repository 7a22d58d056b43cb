use sea_orm::entity::prelude::*;

use crate::Environment;

/// A merchant's webhook endpoint in one environment. Secrets are stored encrypted with the
/// operator's webhook key (`domain::webhooks::secrets`), never in the clear.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub merchant_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub environment: Environment,
    pub url: String,
    pub secret_ciphertext: String,
    /// The secret before the last rotation; it keeps signing until `previous_secret_expires_at`.
    pub previous_secret_ciphertext: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
