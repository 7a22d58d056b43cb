use sea_orm::entity::prelude::*;

use crate::Amount;

/// A transfer on a sandbox chain, included in block `block_height`. A reversed transfer is no
/// longer on the chain.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sandbox_transfers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub gate_id: String,
    pub tx_hash: String,
    pub output_index: i64,
    /// The receiving `<family>:<address>:<tag>` (the scanner's lookup key).
    pub address_key: String,
    pub amount: Amount,
    pub block_height: i64,
    pub reversed_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
