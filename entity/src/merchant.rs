use sea_orm::entity::prelude::*;

use crate::Amount;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "merchants")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    /// Fiat code used for `amount_in_base_currency` (e.g. `USD`).
    pub base_currency: String,
    /// Payment window of a new invoice, in seconds.
    pub invoice_lifetime_secs: i64,
    /// Underpayment/overpayment tolerance as a percentage of the requested amount (0 = exact).
    pub underpayment_tolerance_percent: Amount,
    /// Per API key limits overriding `[rate_limits]` (requests per the class's period);
    /// `None`: the configured limit.
    pub rate_limit_reads: Option<i32>,
    pub rate_limit_writes: Option<i32>,
    /// Per merchant limit of `/v1/test/*`.
    pub rate_limit_test_helpers: Option<i32>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Where a payer's reply to the payment-request e-mail goes (its `Reply-To`): the
    /// merchant's support address. `None`: replies go to the operator's sender address.
    pub payer_reply_to: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
