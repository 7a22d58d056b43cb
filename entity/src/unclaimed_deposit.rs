use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, UnclaimedReason, UnclaimedStatus};

/// A transfer that reached an address of ours but credits no invoice, recorded once by the
/// deposit scanner (unique per gate, tx hash and output index) so the operator can refund it
/// by hand (`ops deposits unclaimed`, `ops deposits resolve`) once the tracker, which follows it
/// on its chain until it is final, saw it at the gate's confirmations.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "unclaimed_deposits")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    pub tx_hash: String,
    pub output_index: i64,
    /// `<family>:<address>:<tag>` of the receiver (the tag empty when there was none).
    pub address_key: String,
    pub amount: Amount,
    pub block_height: i64,
    pub reason: UnclaimedReason,
    pub seen_at: DateTimeUtc,
    pub status: UnclaimedStatus,
    /// Its depth on the chain at the last look (`checked_at`), counted as the chain's adapter
    /// counts a payment's.
    pub confirmations: i32,
    pub checked_at: Option<DateTimeUtc>,
    /// Set while the chain does not show it: the tip height of the first and of the last look
    /// that found it missing, and how many looks (at distinct tips) did.
    pub missing_since_height: Option<i64>,
    pub missing_last_height: Option<i64>,
    pub missing_checks: i32,
    /// Set by the operator once the money was returned or otherwise accounted for.
    pub resolved_at: Option<DateTimeUtc>,
    #[sea_orm(column_type = "Text", nullable)]
    pub resolution: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
