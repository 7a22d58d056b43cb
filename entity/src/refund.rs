use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, FeeAllocation, RefundStatus};

/// A refund of (part of) an invoice's credit, carried out by its linked payout. Network fee,
/// tx hash, failure reason and completion time are the payout's.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "refunds")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub invoice_id: Uuid,
    pub payout_id: Uuid,
    pub gate_id: String,
    pub currency: String,
    pub network: String,
    pub amount: Amount,
    pub recipient_amount: Amount,
    pub merchant_debit_amount: Amount,
    pub refund_fee: Amount,
    pub refund_fee_allocation: FeeAllocation,
    pub configured_network_fee_amount: Amount,
    pub network_fee_allocation: FeeAllocation,
    pub destination: String,
    pub destination_tag: Option<String>,
    pub status: RefundStatus,
    pub idempotency_key: String,
    /// SHA-256 of the canonical request body: tells a replay from a key reused for another body.
    pub request_hash: String,
    pub description: Option<String>,
    pub metadata: Option<Json>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
