use sea_orm::entity::prelude::*;

use crate::{Amount, Environment};

/// A permanent deposit address of one gate (spec 2.7). Each deposit to it creates an invoice
/// (`invoices.static_address_id`, `source = static_address`); `total_received` and
/// `invoice_count` sum those up.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "static_addresses")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    /// Gate id (`tron_usdt`).
    pub gate_id: String,
    /// Asset code (`USDT`).
    pub currency: String,
    pub network: String,
    pub address: String,
    /// XRP destination tag; null for every other chain.
    pub address_tag: Option<String>,
    /// `<family>:<address>:<tag>`, unique per environment: the scanner's lookup key, in the
    /// same format as `invoices.address_key`.
    pub address_key: String,
    pub derivation_index: i64,
    pub label: Option<String>,
    pub total_received: Amount,
    pub invoice_count: i32,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
