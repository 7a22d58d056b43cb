//! Refund request and response (spec 2.6, 4.9).

use entity::{payout, refund};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::invoices::types::ts;
use crate::payouts::types::CreatePayoutRequest;

/// `POST /v1/refunds` body. Bound violations are 422; malformed JSON, wrong types and a
/// malformed `invoice_id` are 400.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRefundRequest {
    /// The refunded invoice: the key's merchant and environment, with a credited payment.
    pub invoice_id: Option<Uuid>,
    /// Asset code (`USDT`) or gate id (`tron_usdt`) of the invoice's credited asset; at most 20 characters.
    pub currency: Option<String>,
    /// At most 64 characters; optional when the currency has one unambiguous network.
    pub network: Option<String>,
    /// Decimal string, at most 50 characters; at most what the invoice credited in this asset
    /// minus what its refunds already took.
    pub amount: Option<String>,
    /// Address on the gate's chain, at most 256 characters.
    pub destination: Option<String>,
    /// XRP destination tag (at most 256 characters).
    pub destination_tag: Option<String>,
    /// At most 1000 characters.
    pub description: Option<String>,
    /// At most 50 properties.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

impl CreateRefundRequest {
    /// The payout this refund asks for, as a payout request: the same fields and bounds, and no
    /// idempotency key of its own (the refund's key is the request's).
    pub fn as_payout_request(&self) -> CreatePayoutRequest {
        CreatePayoutRequest {
            currency: self.currency.clone(),
            network: self.network.clone(),
            amount: self.amount.clone(),
            destination: self.destination.clone(),
            destination_tag: self.destination_tag.clone(),
            description: self.description.clone(),
            metadata: self.metadata.clone(),
            idempotency_key: None,
        }
    }
}

/// A refund (spec 2.6). `network_fee`, `tx_hash`, `failure_reason` and `completed_at` come from
/// the linked payout: the estimate until it completes, then the actual on-chain fee.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RefundResponse {
    pub id: Uuid,
    pub invoice_id: Uuid,
    pub payout_id: Uuid,
    pub currency: String,
    pub network: String,
    pub amount: String,
    pub recipient_amount: String,
    pub merchant_debit_amount: String,
    pub refund_fee: String,
    /// `customer` or `merchant`.
    pub refund_fee_allocation: String,
    pub network_fee: String,
    pub configured_network_fee_amount: String,
    /// `customer` or `merchant`.
    pub network_fee_allocation: String,
    pub destination: String,
    pub destination_tag: Option<String>,
    /// `pending`, `processing`, `completed`, `failed` or `cancelled`, mirroring the payout.
    #[schema(value_type = entity::RefundStatus)]
    pub status: String,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    pub tx_hash: Option<String>,
    pub failure_reason: Option<String>,
    pub description: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Value>,
    pub completed_at: Option<String>,
    pub created_at: String,
}

fn amount(a: entity::Amount) -> String {
    a.0.normalize().to_string()
}

impl RefundResponse {
    pub fn new(r: &refund::Model, p: &payout::Model) -> Self {
        RefundResponse {
            id: r.id,
            invoice_id: r.invoice_id,
            payout_id: r.payout_id,
            currency: r.currency.clone(),
            network: r.network.clone(),
            amount: amount(r.amount),
            recipient_amount: amount(r.recipient_amount),
            merchant_debit_amount: amount(r.merchant_debit_amount),
            refund_fee: amount(r.refund_fee),
            refund_fee_allocation: r.refund_fee_allocation.as_str().into(),
            network_fee: amount(p.network_fee),
            configured_network_fee_amount: amount(r.configured_network_fee_amount),
            network_fee_allocation: r.network_fee_allocation.as_str().into(),
            destination: r.destination.clone(),
            destination_tag: r.destination_tag.clone(),
            status: r.status.as_str().into(),
            environment: r.environment.as_str().into(),
            tx_hash: p.tx_hash.clone(),
            failure_reason: p.failure_reason.clone(),
            description: r.description.clone(),
            metadata: r.metadata.clone(),
            completed_at: p.completed_at.map(ts),
            created_at: ts(r.created_at),
        }
    }
}
