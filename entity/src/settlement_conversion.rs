use sea_orm::entity::prelude::*;

use crate::{Amount, ConversionState, Environment};

/// The settlement conversion of one payment to an invoice whose `target_settlement_asset` is
/// another gate: the quote taken when the payment was detected and what became of it when the
/// payment was credited. One row per payment, created once (by the settlement converter).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "settlement_conversions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub payment_id: Uuid,
    pub invoice_id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    /// The paid gate.
    pub source_gate_id: String,
    /// The invoice's settlement target.
    pub target_gate_id: String,
    /// The paid amount (the payment's amount).
    pub source_amount: Amount,
    /// Target units per source unit, spread included; `None` when no quote was obtained.
    pub rate: Option<Amount>,
    pub target_gross_amount: Option<Amount>,
    pub fee_amount: Option<Amount>,
    /// Gross minus fee: what the target balance receives.
    pub net_amount: Option<Amount>,
    pub state: ConversionState,
    /// Why the paid asset was (or will be) credited instead: `quote_rejected`, `quote_expired`, ...
    pub failure_class: Option<String>,
    /// The venue that quoted (`sandbox`), and its reference for the quote.
    pub venue: String,
    pub venue_ref: Option<String>,
    pub quoted_at: Option<DateTimeUtc>,
    pub locked_until: Option<DateTimeUtc>,
    /// When the conversion was settled: executed, or given up with the paid asset credited.
    pub settled_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(belongs_to = "super::payment::Entity", from = "Column::PaymentId", to = "super::payment::Column::Id")]
    Payment,
}

impl Related<super::payment::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Payment.def()
    }
}

/// A payment has at most one conversion (the reverse of [`Relation::Payment`]).
impl Related<Entity> for super::payment::Entity {
    fn to() -> RelationDef {
        Relation::Payment.def().rev()
    }
}

impl ActiveModelBehavior for ActiveModel {}
