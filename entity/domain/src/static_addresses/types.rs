//! Request and response shapes of the static address resource (spec 2.7, 4.12).

use entity::static_address;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::invoices::types::ts;

/// `POST /v1/addresses` body. Unknown fields are rejected (400) so typos do not pass silently.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateStaticAddressRequest {
    /// Asset code (`BTC`, `USDT`) or gate id (`tron_usdt`). Required.
    pub currency: Option<String>,
    /// Network; inferred when the asset exists on one network only.
    pub network: Option<String>,
    /// The merchant's own name for the address (a customer id, a wallet top-up purpose), at
    /// most 255 characters.
    pub label: Option<String>,
}

/// A static deposit address (spec 2.7, plus `network`). Every field is present; `null` where it
/// does not apply.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StaticAddressResponse {
    pub id: Uuid,
    pub merchant_id: Uuid,
    /// Asset code (`USDT`).
    pub currency: String,
    pub network: String,
    /// `live` or `test`.
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    pub gate_id: String,
    pub address: String,
    /// XRP destination tag; `null` for every other chain.
    pub address_tag: Option<String>,
    pub label: Option<String>,
    /// Decimal string: the sum of the confirmed deposits credited through this address.
    pub total_received: String,
    /// Invoices auto-created from deposits to this address.
    pub invoice_count: i32,
    pub created_at: String,
}

impl StaticAddressResponse {
    pub fn from_model(m: &static_address::Model) -> Self {
        StaticAddressResponse {
            id: m.id,
            merchant_id: m.merchant_id,
            currency: m.currency.clone(),
            network: m.network.clone(),
            environment: m.environment.as_str().to_owned(),
            gate_id: m.gate_id.clone(),
            address: m.address.clone(),
            address_tag: m.address_tag.clone(),
            label: m.label.clone(),
            total_received: m.total_received.to_string(),
            invoice_count: m.invoice_count,
            created_at: ts(m.created_at),
        }
    }
}
