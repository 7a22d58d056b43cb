//! Request and response shapes of the invoice resource (spec 2.2, 2.3, 4.1).

use chrono::{DateTime, SecondsFormat, Utc};
use entity::{InvoiceId, invoice, payment, settlement_conversion};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// `POST /v1/invoices` body. Unknown fields are rejected (400) so typos do not pass silently.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInvoiceRequest {
    /// Asset code (`BTC`, `USDT`) or gate id (`tron_usdt`). Optional only for a fiat-priced draft.
    pub currency: Option<String>,
    /// Network; inferred when the asset exists on one network only.
    pub network: Option<String>,
    /// Crypto amount as a decimal string. Give this or `amount_fiat` + `fiat_currency`.
    pub amount: Option<String>,
    /// Fiat amount as a decimal string; the crypto amount is locked at creation.
    pub amount_fiat: Option<String>,
    /// Fiat code (`USD`, `EUR`), required with `amount_fiat`.
    pub fiat_currency: Option<String>,
    /// At most 1000 characters.
    pub description: Option<String>,
    /// The merchant's own reference, at most 255 characters.
    pub external_id: Option<String>,
    /// 1 to 255 characters. Same key and body returns the original invoice.
    pub idempotency_key: Option<String>,
    /// At most 50 properties.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Absolute http(s) URL the checkout page sends the payer to after payment.
    pub redirect_url: Option<String>,
    /// Create a draft: the payer picks the payment method on the checkout page.
    pub is_deferred: Option<bool>,
    pub payer_email: Option<String>,
    /// Drafts only; default 7 days from now.
    pub draft_expires_at: Option<DateTime<Utc>>,
    /// `passthrough` (default: credit the paid asset) or a gate id to convert into.
    pub target_settlement_asset: Option<String>,
    /// Alternative to `target_settlement_asset`: asset code of the settlement target.
    pub settlement_target_currency: Option<String>,
    pub settlement_target_network: Option<String>,
}

/// Settlement conversion of a payment (spec 2.4).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SettlementConversion {
    pub target_currency: Option<String>,
    pub target_network: Option<String>,
    pub source_amount: Option<String>,
    pub target_gross_amount: Option<String>,
    pub fee_amount: Option<String>,
    pub net_amount: Option<String>,
    /// `not_required` (passthrough), `pending` (not quoted yet), `quoted`, `expired`, `failed`.
    pub quote_status: String,
    /// `not_required`, `pending`, `executed`, `failed` (the paid asset is or was credited).
    pub execution_status: String,
    /// Why the conversion did not happen: `quote_rejected`, `rate_unavailable`,
    /// `amount_too_small`, `venue_unavailable`, `quote_expired`, `execution_rejected`,
    /// `payment_reversed`.
    pub failure_class: Option<String>,
    pub quoted_at: Option<String>,
    pub locked_until: Option<String>,
}

/// A payment to an invoice (spec 2.3).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PaymentResponse {
    pub id: Uuid,
    pub tx_hash: String,
    pub amount: String,
    pub confirmations: i32,
    pub required_confirmations: i32,
    #[schema(value_type = entity::PaymentStatus)]
    pub status: String,
    pub detected_at: String,
    pub settlement_conversion: SettlementConversion,
}

/// An invoice (spec 2.2). Every field is present; `null` where it does not apply.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InvoiceResponse {
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub currency: Option<String>,
    pub network: Option<String>,
    pub amount_requested: Option<String>,
    pub amount_paid: String,
    pub amount_usd: Option<String>,
    pub amount_fiat: Option<String>,
    pub amount_in_base_currency: Option<String>,
    pub fiat_currency: Option<String>,
    #[schema(value_type = entity::InvoiceStatus)]
    pub status: String,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    pub deposit_address: Option<String>,
    pub deposit_address_tag: Option<String>,
    pub description: Option<String>,
    pub external_id: Option<String>,
    pub idempotency_key: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub redirect_url: Option<String>,
    pub source: String,
    pub static_address_id: Option<Uuid>,
    pub checkout_url: String,
    pub payments: Vec<PaymentResponse>,
    pub expires_at: Option<String>,
    pub paid_at: Option<String>,
    pub created_at: String,
    pub is_deferred: bool,
    pub draft_expires_at: Option<String>,
    pub activated_at: Option<String>,
    pub activation_count: i32,
    pub is_locked_fiat: bool,
    pub target_settlement_asset: String,
    pub settlement_target_currency: Option<String>,
    pub settlement_target_network: Option<String>,
    pub payer_email: Option<String>,
    pub sent_at: Option<String>,
}

/// ISO 8601 UTC with millisecond precision and a `Z`.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A payment with its settlement conversion, if it has one.
pub type PaymentRow = (payment::Model, Option<settlement_conversion::Model>);

impl SettlementConversion {
    /// Spec 2.4 for a payment of `inv`. Passthrough (or a target equal to the paid gate):
    /// `not_required`. A converting payment the converter has not quoted yet (a moment after
    /// detection): `pending` for both statuses and only the target and source known.
    pub fn of(inv: &invoice::Model, p: &payment::Model, conv: Option<&settlement_conversion::Model>) -> Self {
        let amount = |a: Option<entity::Amount>| a.map(|v| v.to_string());
        let Some(target) = crate::settlement::converting_target(inv, p) else {
            return SettlementConversion {
                target_currency: None,
                target_network: None,
                source_amount: None,
                target_gross_amount: None,
                fee_amount: None,
                net_amount: None,
                quote_status: "not_required".into(),
                execution_status: "not_required".into(),
                failure_class: None,
                quoted_at: None,
                locked_until: None,
            };
        };
        SettlementConversion {
            target_currency: Some(target.asset.into()),
            target_network: Some(target.network.into()),
            source_amount: Some(p.amount.to_string()),
            target_gross_amount: conv.and_then(|c| amount(c.target_gross_amount)),
            fee_amount: conv.and_then(|c| amount(c.fee_amount)),
            net_amount: conv.and_then(|c| amount(c.net_amount)),
            quote_status: conv.map_or("pending", |c| c.state.quote_status()).into(),
            execution_status: conv.map_or("pending", |c| c.state.execution_status()).into(),
            failure_class: conv.and_then(|c| c.failure_class.clone()),
            quoted_at: conv.and_then(|c| c.quoted_at).map(ts),
            locked_until: conv.and_then(|c| c.locked_until).map(ts),
        }
    }
}

impl PaymentResponse {
    pub fn from_model(inv: &invoice::Model, (p, conv): &PaymentRow) -> Self {
        PaymentResponse {
            id: p.id,
            tx_hash: p.tx_hash.clone(),
            amount: p.amount.to_string(),
            confirmations: p.confirmations,
            required_confirmations: p.required_confirmations,
            status: p.status.as_str().to_owned(),
            detected_at: ts(p.detected_at),
            settlement_conversion: SettlementConversion::of(inv, p, conv.as_ref()),
        }
    }
}

impl InvoiceResponse {
    pub fn from_model(m: &invoice::Model, payments: &[PaymentRow], public_base_url: &url::Url) -> Self {
        let amount = |a: &Option<entity::Amount>| a.map(|v| v.to_string());
        InvoiceResponse {
            id: m.id,
            merchant_id: m.merchant_id,
            currency: m.currency.clone(),
            network: m.network.clone(),
            amount_requested: amount(&m.amount_requested),
            amount_paid: m.amount_paid.to_string(),
            amount_usd: amount(&m.amount_usd),
            amount_fiat: amount(&m.amount_fiat),
            amount_in_base_currency: amount(&m.amount_in_base_currency),
            fiat_currency: m.fiat_currency.clone(),
            status: m.status.as_str().to_owned(),
            environment: m.environment.as_str().to_owned(),
            deposit_address: m.deposit_address.clone(),
            deposit_address_tag: m.deposit_address_tag.clone(),
            description: m.description.clone(),
            external_id: m.external_id.clone(),
            idempotency_key: m.idempotency_key.clone(),
            metadata: m.metadata.clone(),
            redirect_url: m.redirect_url.clone(),
            source: m.source.clone(),
            static_address_id: m.static_address_id,
            checkout_url: checkout_url(public_base_url, m.id.into()),
            payments: payments.iter().map(|row| PaymentResponse::from_model(m, row)).collect(),
            expires_at: m.expires_at.map(ts),
            paid_at: m.paid_at.map(ts),
            created_at: ts(m.created_at),
            is_deferred: m.is_deferred,
            draft_expires_at: m.draft_expires_at.map(ts),
            activated_at: m.activated_at.map(ts),
            activation_count: m.activation_count,
            is_locked_fiat: m.is_locked_fiat,
            target_settlement_asset: m.target_settlement_asset.clone(),
            settlement_target_currency: m.settlement_target_currency.clone(),
            settlement_target_network: m.settlement_target_network.clone(),
            payer_email: m.payer_email.clone(),
            sent_at: m.sent_at.map(ts),
        }
    }
}

pub fn checkout_url(base: &url::Url, id: InvoiceId) -> String {
    format!("{}/checkout/{id}", base.as_str().trim_end_matches('/'))
}
