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
    /// Tip height at the first check that found the transaction missing (`None`: seen on the
    /// last check). Reset when it is seen again.
    pub missing_since_height: Option<i64>,
    /// Tip height at the last check that found it missing (a check counts once per new block).
    pub missing_last_height: Option<i64>,
    /// Checks, at distinct tip heights, that found it missing since `missing_since_height`.
    pub missing_checks: i32,
    /// When the tracker's job chain next looks at it; the sweeper re-enqueues only payments
    /// overdue past this by a margin.
    pub next_check_at: Option<DateTimeUtc>,
    /// The token of the payment's live tracker job chain: a scheduled recheck carrying another
    /// token was superseded and ends without doing anything.
    pub track_token: Option<Uuid>,
    /// Times the payment was revived after a reversal (its transfer back on chain); its events
    /// of each round are keyed apart.
    pub revivals: i32,
    /// The credit's value in fiat when it was made: the fiat currency (the invoice's when it was
    /// fiat-priced in the credited asset, else the merchant's base currency), the price of one
    /// unit of the credited asset then, and `credited_amount` × that rate. Stamped in the
    /// crediting transaction (`domain::payments::fiat`); `None` when no fresh rate was known.
    pub credited_fiat_currency: Option<String>,
    pub credited_fiat_rate: Option<Amount>,
    pub credited_fiat_value: Option<Amount>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(belongs_to = "super::invoice::Entity", from = "Column::InvoiceId", to = "super::invoice::Column::Id")]
    Invoice,
}

impl Related<super::invoice::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Invoice.def()
    }
}

/// An invoice has many payments (the reverse of [`Relation::Invoice`]).
impl Related<Entity> for super::invoice::Entity {
    fn to() -> RelationDef {
        Relation::Invoice.def().rev()
    }
}

impl Model {
    /// A transfer of `amount` to `invoice_id` seen `now` (tx `tx_hash`, output/log
    /// `output_index`), `confirming` with no confirmations, no block, nothing credited and no
    /// tracker state. Callers set what they know with struct update syntax:
    /// `Model { confirmations: …, ..Model::detected(…) }`.
    pub fn detected(
        invoice_id: Uuid,
        environment: Environment,
        gate_id: String,
        tx_hash: String,
        output_index: i64,
        amount: Amount,
        now: DateTimeUtc,
    ) -> Model {
        Model {
            id: Uuid::now_v7(),
            invoice_id,
            environment,
            gate_id,
            tx_hash,
            output_index,
            amount,
            confirmations: 0,
            required_confirmations: 0,
            status: PaymentStatus::Confirming,
            block_height: None,
            detected_at: now,
            confirmed_at: None,
            created_at: now,
            credited_gate_id: None,
            credited_amount: None,
            credited_at: None,
            reversed_at: None,
            checked_at: None,
            missing_since_height: None,
            missing_last_height: None,
            missing_checks: 0,
            next_check_at: None,
            track_token: None,
            revivals: 0,
            credited_fiat_currency: None,
            credited_fiat_rate: None,
            credited_fiat_value: None,
        }
    }
}

impl ActiveModelBehavior for ActiveModel {}
