use sea_orm::entity::prelude::*;

use crate::Amount;

/// A transaction sent on a sandbox chain (test environment payouts), included in block
/// `block_height`. The hash is the key: sending the same signed transaction twice is one
/// transaction, as on a real chain.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sandbox_broadcasts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub tx_hash: String,
    pub gate_id: String,
    pub destination: String,
    pub destination_tag: Option<String>,
    pub amount: Amount,
    /// The network fee the transaction paid.
    pub fee: Amount,
    /// What the transaction carries as a memo: the payout id.
    pub reference: String,
    pub block_height: i64,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
