use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, SweepStatus};

/// A sweep: the operator's own funds moved from one deposit address to its hot wallet or cold
/// address, by the payout executor's process. Every transaction is stored signed here before it
/// is sent (the top-up's and the sweep's), so a restart sends the same bytes again, never new
/// ones. At most one open sweep per (gate, address): a partial unique index.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sweeps")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    /// The deposit address swept, and its derivation index (its key's).
    pub address: String,
    pub derivation_index: i64,
    /// The hot wallet or the cold address.
    pub destination: String,
    /// The balance read at planning, in the gate's asset.
    pub planned_amount: Amount,
    /// What the sweep transaction sends (set when it is signed).
    pub amount: Option<Amount>,
    pub status: SweepStatus,
    /// A token address's gas top-up: native coin from the hot wallet.
    pub topup_amount: Option<Amount>,
    pub topup_tx_hash: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub topup_signed_tx: Option<String>,
    pub tx_hash: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub signed_tx: Option<String>,
    /// The network fee paid, in the network's native coin (set at confirmation).
    pub fee: Option<Amount>,
    #[sea_orm(column_type = "Text", nullable)]
    pub failure_reason: Option<String>,
    /// Set on a native sweep returning what a token sweep's gas top-up left on its address: that
    /// token sweep.
    pub parent_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub confirmed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
