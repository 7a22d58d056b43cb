use sea_orm::entity::prelude::*;

use crate::{Amount, Environment};

/// The latest price of one unit of `currency` (an asset code, `BTC`) in `fiat_currency`, as the
/// environment's rates provider last gave it. Written by every process that fetches rates (the
/// API, the settlement converter) on each refresh; read when a credit records its fiat value.
/// Not served after `expires_at` (the provider's time plus `rates.<env>.max_age_secs`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "exchange_rates")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub environment: Environment,
    #[sea_orm(primary_key, auto_increment = false)]
    pub currency: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub fiat_currency: String,
    pub rate: Amount,
    pub source: String,
    pub updated_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
