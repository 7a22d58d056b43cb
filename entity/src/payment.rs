use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, PaymentStatus};

/// One on-chain transfer to an invoice's address. Unique per gate, tx hash and output/log index.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "payments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub invoice_id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    pub tx_hash: String,
    pub output_index: i64,
    pub amount: Amount,
    pub confirmations: i32,
    pub required_confirmations: i32,
    pub status: PaymentStatus,
    pub block_height: Option<i64>,
    pub detected_at: DateTimeUtc,
    pub confirmed_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    /// The gate the merchant's balance was credited in (the paid gate, or the conversion target).
    pub credited_gate_id: Option<String>,
    pub credited_amount: Option<Amount>,
    /// Set once, in the crediting transaction: a payment is credited exactly once.
    pub credited_at: Option<DateTimeUtc>,
    /// When the chain stopped showing the transfer (reorg, double spend, sandbox reversal).
    pub reversed_at: Option<DateTimeUtc>,
    /// Last time the tracker asked the chain about it (the sweeper re-queues stale ones).
    pub checked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(belongs_to = "super::invoice::Entity", from = "Column::InvoiceId", to = "super::invoice::Column::Id")]
    Invoice,
    #[sea_orm(has_one = "super::settlement_conversion::Entity")]
    SettlementConversion,
}

impl Related<super::invoice::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Invoice.def()
    }
}

impl Related<super::settlement_conversion::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::SettlementConversion.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
