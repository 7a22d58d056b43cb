use sea_orm::entity::prelude::*;

/// The next nonce of a hot wallet (`<network>:<address>`). Read and advanced under its row lock
/// in the transaction that stores a signed payout, so nonces are never reused or skipped.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "nonce_accounts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    pub next_nonce: i64,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
