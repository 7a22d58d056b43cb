use sea_orm::entity::prelude::*;

use crate::{Amount, Environment, InvoiceStatus};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "invoices")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    /// Gate id (`ethereum_usdt`); null for a draft whose payment method is not chosen yet.
    pub gate_id: Option<String>,
    pub currency: Option<String>,
    pub network: Option<String>,
    pub amount_requested: Option<Amount>,
    pub amount_paid: Amount,
    pub amount_usd: Option<Amount>,
    pub amount_fiat: Option<Amount>,
    pub fiat_currency: Option<String>,
    pub amount_in_base_currency: Option<Amount>,
    pub base_currency: Option<String>,
    /// Fiat price of one unit of the asset used to lock `amount_requested` (fiat-priced only).
    pub exchange_rate: Option<Amount>,
    pub status: InvoiceStatus,
    pub deposit_address: Option<String>,
    pub deposit_address_tag: Option<String>,
    /// `<family>:<address>:<tag>`, unique per environment: the scanner's lookup key.
    pub address_key: Option<String>,
    pub derivation_index: Option<i64>,
    pub description: Option<String>,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    /// SHA-256 of the canonical request body, to tell a replay from a mismatch.
    pub request_hash: Option<String>,
    pub metadata: Option<Json>,
    pub redirect_url: Option<String>,
    pub source: String,
    pub static_address_id: Option<Uuid>,
    pub expires_at: Option<DateTimeUtc>,
    pub paid_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub is_deferred: bool,
    pub draft_expires_at: Option<DateTimeUtc>,
    pub activated_at: Option<DateTimeUtc>,
    pub activation_count: i32,
    pub is_locked_fiat: bool,
    pub target_settlement_asset: String,
    pub settlement_target_currency: Option<String>,
    pub settlement_target_network: Option<String>,
    pub payer_email: Option<String>,
    pub sent_at: Option<DateTimeUtc>,
    pub cancelled_at: Option<DateTimeUtc>,
    /// When the payment request is due to be e-mailed to `payer_email` (set at creation; cleared
    /// once sent, or when the invoice no longer awaits payment).
    pub email_due_at: Option<DateTimeUtc>,
}

/// An invoice's payments are related from their side (`payment.rs`), so this table's module
/// knows none of the tables that point at it.
impl Model {
    /// A `pending` invoice of `merchant_id` in `environment`, created `now`, with everything else
    /// unset (no gate, amount, address or expiry; source `api`, settled as paid). Callers set
    /// what they know with struct update syntax: `Model { gate_id: …, ..Model::blank(…) }`.
    pub fn blank(id: Uuid, merchant_id: Uuid, environment: Environment, now: DateTimeUtc) -> Model {
        Model {
            id,
            merchant_id,
            environment,
            gate_id: None,
            currency: None,
            network: None,
            amount_requested: None,
            amount_paid: Amount::ZERO,
            amount_usd: None,
            amount_fiat: None,
            fiat_currency: None,
            amount_in_base_currency: None,
            base_currency: None,
            exchange_rate: None,
            status: InvoiceStatus::Pending,
            deposit_address: None,
            deposit_address_tag: None,
            address_key: None,
            derivation_index: None,
            description: None,
            external_id: None,
            idempotency_key: None,
            request_hash: None,
            metadata: None,
            redirect_url: None,
            source: "api".into(),
            static_address_id: None,
            expires_at: None,
            paid_at: None,
            created_at: now,
            updated_at: now,
            is_deferred: false,
            draft_expires_at: None,
            activated_at: None,
            activation_count: 0,
            is_locked_fiat: false,
            target_settlement_asset: "passthrough".into(),
            settlement_target_currency: None,
            settlement_target_network: None,
            payer_email: None,
            sent_at: None,
            cancelled_at: None,
            email_due_at: None,
        }
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
