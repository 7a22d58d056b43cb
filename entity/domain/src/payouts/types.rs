//! Payout request and responses (spec 2.5, 4.5).

use entity::payout;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::invoices::types::ts;

/// `POST /v1/payouts`. Bound violations are 422; malformed JSON and wrong types are 400.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePayoutRequest {
    /// Asset code (`USDT`) or gate id (`tron_usdt`); at most 20 characters.
    pub currency: Option<String>,
    /// Disambiguates an asset on several networks (at most 64 characters).
    pub network: Option<String>,
    /// Decimal string, at most 50 characters.
    pub amount: Option<String>,
    /// Address on the gate's chain, at most 256 characters, checked with the chain's rules.
    pub destination: Option<String>,
    /// XRP destination tag (at most 256 characters).
    pub destination_tag: Option<String>,
    /// At most 1000 characters.
    pub description: Option<String>,
    /// At most 50 properties.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// At most 255 characters; a repeated key returns the existing payout.
    pub idempotency_key: Option<String>,
}

/// Create and cancel responses: the shorter field set of spec 2.5.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PayoutShort {
    pub id: Uuid,
    pub currency: String,
    pub network: String,
    pub amount: String,
    pub amount_in_base_currency: Option<String>,
    pub network_fee: String,
    pub fee_amount: String,
    pub destination: String,
    pub destination_tag: Option<String>,
    #[schema(value_type = entity::PayoutStatus)]
    pub status: String,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    pub tx_hash: Option<String>,
    pub idempotency_key: Option<String>,
    pub description: Option<String>,
    pub executable_at: Option<String>,
    pub completed_at: Option<String>,
    pub created_at: String,
}

/// Get (and list) responses: the full field set of spec 2.5.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PayoutFull {
    #[serde(flatten)]
    pub short: PayoutShort,
    pub recipient_amount: String,
    pub merchant_debit_amount: String,
    pub payout_fee_allocation: String,
    pub configured_network_fee_amount: String,
    pub network_fee_allocation: String,
    pub failure_reason: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
}

impl PayoutShort {
    pub fn from_model(p: &payout::Model) -> Self {
        PayoutShort {
            id: p.id,
            currency: p.currency.clone(),
            network: p.network.clone(),
            amount: p.amount.0.normalize().to_string(),
            amount_in_base_currency: p.amount_in_base_currency.map(|a| a.to_string()),
            network_fee: p.network_fee.0.normalize().to_string(),
            fee_amount: p.fee_amount.0.normalize().to_string(),
            destination: p.destination.clone(),
            destination_tag: p.destination_tag.clone(),
            status: p.status.as_str().into(),
            environment: p.environment.as_str().into(),
            tx_hash: p.tx_hash.clone(),
            idempotency_key: p.idempotency_key.clone(),
            description: p.description.clone(),
            executable_at: p.executable_at.map(ts),
            completed_at: p.completed_at.map(ts),
            created_at: ts(p.created_at),
        }
    }
}

impl PayoutFull {
    pub fn from_model(p: &payout::Model) -> Self {
        PayoutFull {
            short: PayoutShort::from_model(p),
            recipient_amount: p.recipient_amount.0.normalize().to_string(),
            merchant_debit_amount: p.merchant_debit_amount.0.normalize().to_string(),
            payout_fee_allocation: p.payout_fee_allocation.as_str().into(),
            configured_network_fee_amount: p.configured_network_fee_amount.0.normalize().to_string(),
            network_fee_allocation: p.network_fee_allocation.as_str().into(),
            failure_reason: p.failure_reason.clone(),
            metadata: p.metadata.clone(),
        }
    }
}
