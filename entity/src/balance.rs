use sea_orm::entity::prelude::*;

use crate::{Amount, Environment};

/// One merchant's balance of one gate in one environment. Always equal, bucket by bucket, to the
/// sum of its ledger entries: both change only together, in one transaction (`domain::ledger`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "balances")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    pub available: Amount,
    pub pending: Amount,
    pub reserved: Amount,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
