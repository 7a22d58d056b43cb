use sea_orm::entity::prelude::*;

use crate::{Amount, Environment};

/// What one invoice credited to its merchant's balance in one asset, and how much of that has
/// been refunded (pending, processing or completed refunds). Written under the balance lock of
/// the same (merchant, environment, gate), so credits and refunds of one invoice serialize.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "invoice_credits")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub invoice_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub gate_id: String,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub credited: Amount,
    pub refunded: Amount,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
