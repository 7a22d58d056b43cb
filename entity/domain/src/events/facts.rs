//! What an invoice event reads of its invoice: its `data` and its dedupe key need eleven of the
//! invoice's columns, so a move that hands the invoices it moved to their events (`RETURNING`)
//! reads those alone, by position, not whole rows.

use entity::{Amount, Environment, InvoiceStatus, invoice};
use sea_orm::{DbErr, QueryResult};
use serde_json::{Value, json};
use uuid::Uuid;

use super::amount;
use crate::invoices::types::ts;

/// The invoice as its events show it, after the change that caused them.
#[derive(Debug, Clone, PartialEq)]
pub struct InvoiceFacts {
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub external_id: Option<String>,
    pub currency: Option<String>,
    pub network: Option<String>,
    pub amount_requested: Option<Amount>,
    pub amount_paid: Amount,
    pub status: InvoiceStatus,
    pub activation_count: i32,
    pub paid_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl InvoiceFacts {
    /// The columns [`Self::from_row`] reads, in its order.
    pub const COLUMNS: [invoice::Column; 11] = [
        invoice::Column::Id,
        invoice::Column::MerchantId,
        invoice::Column::Environment,
        invoice::Column::ExternalId,
        invoice::Column::Currency,
        invoice::Column::Network,
        invoice::Column::AmountRequested,
        invoice::Column::AmountPaid,
        invoice::Column::Status,
        invoice::Column::ActivationCount,
        invoice::Column::PaidAt,
    ];

    /// A row of [`Self::COLUMNS`], in that order.
    pub fn from_row(row: &QueryResult) -> Result<Self, DbErr> {
        Ok(Self {
            id: row.try_get_by_index(0)?,
            merchant_id: row.try_get_by_index(1)?,
            environment: row.try_get_by_index(2)?,
            external_id: row.try_get_by_index(3)?,
            currency: row.try_get_by_index(4)?,
            network: row.try_get_by_index(5)?,
            amount_requested: row.try_get_by_index(6)?,
            amount_paid: row.try_get_by_index(7)?,
            status: row.try_get_by_index(8)?,
            activation_count: row.try_get_by_index(9)?,
            paid_at: row.try_get_by_index(10)?,
        })
    }

    /// `data` of every invoice event: the invoice as it is after the change, plus the payment
    /// that caused it where one did, else the invoice's `activation_count` (an event without a
    /// payment happens at most once per activation, so type + `invoice_id` + `activation_count`
    /// tell two expiries of a re-activated draft apart).
    pub fn data(&self, cause: Option<&entity::payment::Model>) -> Value {
        let mut d = json!({
            "invoice_id": self.id,
            "external_id": self.external_id,
            "currency": self.currency,
            "network": self.network,
            "environment": self.environment.as_str(),
            "amount_requested": amount(self.amount_requested),
            "amount_paid": amount(Some(self.amount_paid)),
            "status": self.status.as_str(),
        });
        match cause {
            Some(p) => {
                d["payment_id"] = json!(p.id);
                d["tx_hash"] = json!(p.tx_hash);
                d["payment_amount"] = amount(Some(p.amount));
            }
            None => d["activation_count"] = json!(self.activation_count),
        }
        if let Some(t) = self.paid_at {
            d["paid_at"] = json!(ts(t));
        }
        d
    }
}

impl From<&invoice::Model> for InvoiceFacts {
    fn from(inv: &invoice::Model) -> Self {
        Self {
            id: inv.id,
            merchant_id: inv.merchant_id,
            environment: inv.environment,
            external_id: inv.external_id.clone(),
            currency: inv.currency.clone(),
            network: inv.network.clone(),
            amount_requested: inv.amount_requested,
            amount_paid: inv.amount_paid,
            status: inv.status,
            activation_count: inv.activation_count,
            paid_at: inv.paid_at,
        }
    }
}
