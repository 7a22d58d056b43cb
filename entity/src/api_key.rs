use sea_orm::entity::prelude::*;

use crate::Environment;

/// An API key. Only the SHA-256 of the full key is stored; the key itself is shown once.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    /// Lowercase hex SHA-256 of the whole key string.
    #[sea_orm(unique)]
    pub key_hash: String,
    /// First characters of the key (`sk_test_1a2b3c4d`), for operators to recognise it.
    pub key_prefix: String,
    /// JSON array of permission names.
    pub permissions: Json,
    pub label: Option<String>,
    pub created_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
