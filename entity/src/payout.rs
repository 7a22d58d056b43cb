use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, FeeAllocation, PayoutStatus};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "payouts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    pub currency: String,
    pub network: String,
    /// The amount the merchant asked to pay out.
    pub amount: Amount,
    /// `amount` in the merchant's base currency at creation (null without a fresh rate).
    pub amount_in_base_currency: Option<Amount>,
    /// What the destination receives: `amount` less the fees allocated to the customer.
    pub recipient_amount: Amount,
    /// What leaves the merchant's balance: `amount` plus the fees allocated to the merchant.
    pub merchant_debit_amount: Amount,
    pub fee_amount: Amount,
    pub payout_fee_allocation: FeeAllocation,
    /// The estimate at creation; the actual fee once completed.
    pub network_fee: Amount,
    pub configured_network_fee_amount: Amount,
    pub network_fee_allocation: FeeAllocation,
    pub destination: String,
    pub destination_tag: Option<String>,
    pub status: PayoutStatus,
    pub tx_hash: Option<String>,
    pub idempotency_key: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Json>,
    pub failure_reason: Option<String>,
    pub executable_at: Option<DateTimeUtc>,
    pub approved_at: Option<DateTimeUtc>,
    pub completed_at: Option<DateTimeUtc>,
    pub cancelled_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The signed transaction, stored before it is broadcast (its hash is `tx_hash`).
    #[sea_orm(column_type = "Text", nullable)]
    pub signed_tx: Option<String>,
    pub queued_at: Option<DateTimeUtc>,
    /// When the chain accepted (or already knew) the transaction.
    pub broadcast_at: Option<DateTimeUtc>,
    /// When the executor last looked at it (the sweeper re-enqueues ones nobody checked).
    pub checked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl Model {
    /// A payout `id` of `merchant_id` in `environment`, created `now`: `pending_approval`, no
    /// gate, destination or amounts yet (zero, fees allocated to the merchant), nothing signed,
    /// sent or finished. Callers set what they know with struct update syntax:
    /// `Model { gate_id: …, amount: …, ..Model::blank(…) }`.
    pub fn blank(id: Uuid, merchant_id: Uuid, environment: Environment, now: DateTimeUtc) -> Model {
        Model {
            id,
            merchant_id,
            environment,
            gate_id: String::new(),
            currency: String::new(),
            network: String::new(),
            amount: Amount::ZERO,
            amount_in_base_currency: None,
            recipient_amount: Amount::ZERO,
            merchant_debit_amount: Amount::ZERO,
            fee_amount: Amount::ZERO,
            payout_fee_allocation: FeeAllocation::Merchant,
            network_fee: Amount::ZERO,
            configured_network_fee_amount: Amount::ZERO,
            network_fee_allocation: FeeAllocation::Merchant,
            destination: String::new(),
            destination_tag: None,
            status: PayoutStatus::PendingApproval,
            tx_hash: None,
            idempotency_key: None,
            description: None,
            metadata: None,
            failure_reason: None,
            executable_at: None,
            approved_at: None,
            completed_at: None,
            cancelled_at: None,
            created_at: now,
            updated_at: now,
            signed_tx: None,
            queued_at: None,
            broadcast_at: None,
            checked_at: None,
        }
    }
}

impl ActiveModelBehavior for ActiveModel {}
