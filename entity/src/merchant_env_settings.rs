use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, FeeAllocation};

/// A merchant's settings that differ per environment (payout approval and fee allocation).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "merchant_env_settings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub merchant_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub environment: Environment,
    /// New payouts start `approved` instead of `pending_approval`.
    pub payout_auto_approve: bool,
    /// `executable_at` = approval time + this delay.
    pub payout_delay_secs: i64,
    pub payout_fee_allocation: FeeAllocation,
    pub network_fee_allocation: FeeAllocation,
    pub updated_at: DateTimeUtc,
    /// Who bears the configured refund fee.
    pub refund_fee_allocation: FeeAllocation,
    /// A payout `pending_approval` is approved by the merchant in the dashboard (an owner or
    /// admin, with a TOTP code) instead of by the operator.
    pub merchant_approves: bool,
    /// Where the merchant approves: a payout worth at most this much in the merchant's base
    /// currency (at the rate when it is created) starts `approved`. `None`: every payout waits.
    pub auto_approve_limit: Option<Amount>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
