//! What the checkout page shows: the payer's view of an invoice (only what a payer needs: no
//! merchant or internal ids, no metadata), read here. What the page does (the activation of a
//! deferred invoice on the gate the payer picks, the test environment's simulated payments) is
//! `domain::invoices::checkout`'s: this module only calls it, and writes no rows.

use chrono::Utc;
use entity::{Environment, InvoiceStatus, PaymentStatus, invoice, payment};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::uri::payment_uri;
use crate::error::ApiResult;
use crate::state::HttpState;
use domain::gates::{self, Gate};
pub use domain::invoices::checkout::Simulated;
use domain::invoices::checkout::{self, activation, options};
use domain::invoices::types::ts;

/// The payer's view of an invoice (`GET /checkout/{id}/state`).
#[derive(Debug, Clone, Serialize)]
pub struct CheckoutView {
    pub status: &'static str,
    pub test_mode: bool,
    /// Whom the payer pays.
    pub merchant_name: String,
    pub description: Option<String>,
    /// The chosen gate (null on a draft that has none yet).
    pub gate: Option<GateView>,
    pub amount: Option<String>,
    /// Confirmed so far.
    pub amount_paid: String,
    /// Still to pay (requested − confirmed), once something was paid and it is short.
    pub amount_remaining: Option<String>,
    pub amount_fiat: Option<String>,
    pub fiat_currency: Option<String>,
    pub address: Option<String>,
    pub address_tag: Option<String>,
    pub payment_uri: Option<String>,
    pub expires_at: Option<String>,
    pub paid_at: Option<String>,
    pub draft_expires_at: Option<String>,
    pub payments: Vec<PaymentView>,
    /// Where the payer goes after paying.
    pub redirect_url: Option<String>,
    /// A draft (or an unpaid, expired deferred invoice before `draft_expires_at`): the payer can
    /// (re)activate it with one of `options`.
    pub can_activate: bool,
    pub options: Vec<OptionView>,
    /// The server's clock, so the countdown does not trust the payer's.
    pub now: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateView {
    pub id: &'static str,
    pub asset: &'static str,
    pub name: &'static str,
    pub network: &'static str,
    /// The network's common name (`BNB Smart Chain`).
    pub network_name: &'static str,
    /// The token standard (`BEP-20`); null for a native asset.
    pub token_standard: Option<&'static str>,
    /// What the payer reads, in the page's language: "USDT on BNB Smart Chain (BEP-20)".
    pub label: String,
}

impl GateView {
    pub fn new(g: &'static Gate, lang: &str) -> Self {
        GateView {
            id: g.id,
            asset: g.asset,
            name: g.name,
            network: g.network,
            network_name: g.network_name(),
            token_standard: g.token_standard(),
            label: gate_label(g, lang),
        }
    }
}

/// "USDT on BNB Smart Chain (BEP-20)" in `lang`: `Gate::label` in English, else the
/// catalogue's `method_label` template plus the token standard in parentheses.
pub fn gate_label(g: &'static Gate, lang: &str) -> String {
    if lang == "en" {
        return g.label();
    }
    let base = domain::messages::fill_in(lang, "method_label", &[("asset", g.asset), ("network", g.network_name())]);
    match g.token_standard() {
        Some(std) => format!("{base} ({std})"),
        None => base,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PaymentView {
    pub amount: String,
    pub status: &'static str,
    pub confirmations: i32,
    pub required_confirmations: i32,
}

/// A payment method a draft can be activated with, priced now.
#[derive(Debug, Clone, Serialize)]
pub struct OptionView {
    pub gate: GateView,
    pub amount: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivateRequest {
    pub gate_id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulateRequest {
    pub kind: Simulated,
}

pub(super) async fn load(state: &HttpState, id: Uuid) -> ApiResult<invoice::Model> {
    Ok(checkout::load(state, id.into()).await?)
}

pub(super) async fn payments(state: &HttpState, id: Uuid) -> ApiResult<Vec<payment::Model>> {
    Ok(checkout::payments(state, id.into()).await?)
}

/// The payer's view of invoice `id`, with its labels in `lang`.
pub async fn view(state: &HttpState, id: Uuid, lang: &str) -> ApiResult<CheckoutView> {
    let inv = load(state, id).await?;
    let pays = payments(state, id).await?;
    let merchant = state.merchant(inv.merchant_id.into()).await?;
    let now = Utc::now();
    let gate = inv.gate_id.as_deref().and_then(gates::find);
    let live: Vec<&payment::Model> = pays.iter().filter(|p| p.status != PaymentStatus::Reversed).collect();
    let can_activate = activation(&inv, !live.is_empty(), now).is_some();
    let requested = inv.amount_requested.map(|a| a.0);
    let paid = inv.amount_paid.0;
    let remaining = requested.map(|r| r - paid).filter(|r| *r > Decimal::ZERO && paid > Decimal::ZERO);
    // The address is shown only while the invoice takes payments.
    let has_address = inv.deposit_address.is_some()
        && matches!(inv.status, InvoiceStatus::Pending | InvoiceStatus::Confirming | InvoiceStatus::Underpaid);
    let uri = match (gate, &inv.deposit_address, requested) {
        (Some(g), Some(addr), Some(r)) if has_address => {
            let due = remaining.unwrap_or(r);
            Some(payment_uri(g, addr, inv.deposit_address_tag.as_deref(), due))
        }
        _ => None,
    };
    let text = |d: Decimal| d.normalize().to_string();
    Ok(CheckoutView {
        status: inv.status.as_str(),
        test_mode: inv.environment == Environment::Test,
        merchant_name: merchant.name.clone(),
        description: inv.description.clone(),
        gate: gate.map(|g| GateView::new(g, lang)),
        amount: requested.map(text),
        amount_paid: text(paid),
        amount_remaining: remaining.map(text),
        // The exact decimal: the page formats it with the currency's minor units and the payer's locale.
        amount_fiat: inv.amount_fiat.map(|a| a.0.normalize().to_string()),
        fiat_currency: inv.fiat_currency.clone(),
        address: inv.deposit_address.clone().filter(|_| has_address),
        address_tag: inv.deposit_address_tag.clone().filter(|_| has_address),
        payment_uri: uri,
        expires_at: inv.expires_at.map(ts),
        paid_at: inv.paid_at.map(ts),
        draft_expires_at: inv.draft_expires_at.map(ts),
        payments: live
            .iter()
            .map(|p| PaymentView {
                amount: text(p.amount.0),
                status: match p.status {
                    PaymentStatus::Confirming => "confirming",
                    PaymentStatus::Confirmed => "confirmed",
                    PaymentStatus::Reversed => "reversed",
                },
                confirmations: p.confirmations.min(p.required_confirmations),
                required_confirmations: p.required_confirmations,
            })
            .collect(),
        redirect_url: inv.redirect_url.clone(),
        can_activate,
        options: if can_activate {
            options(state, &inv)
                .into_iter()
                .map(|(g, a)| OptionView { gate: GateView::new(g, lang), amount: text(a) })
                .collect()
        } else {
            Vec::new()
        },
        now: ts(now),
    })
}

/// Activates a draft (or re-activates an expired deferred invoice) on the gate the payer
/// picked: `domain::invoices::checkout::activate`.
pub async fn activate(state: &HttpState, id: Uuid, req: ActivateRequest) -> ApiResult<invoice::Model> {
    Ok(checkout::activate(state, id.into(), &req.gate_id).await?)
}

/// Test environment only (404 in live, as if the route did not exist): a sandbox deposit of
/// the remaining amount, half of it, or one and a half times it, through the same domain
/// function as `POST /v1/test/deposits` (`domain::invoices::checkout::simulate`).
pub async fn simulate(state: &HttpState, id: Uuid, req: SimulateRequest) -> ApiResult<()> {
    checkout::simulate(state, id.into(), req.kind).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_in_each_language() {
        let bsc_usdt = gates::find("bsc_usdt").unwrap();
        let base = gates::find("base").unwrap();
        assert_eq!(gate_label(bsc_usdt, "en"), "USDT on BNB Smart Chain (BEP-20)");
        assert_eq!(gate_label(base, "en"), "ETH on Base");
        assert_eq!(gate_label(bsc_usdt, "de"), "USDT auf BNB Smart Chain (BEP-20)");
        assert_eq!(gate_label(base, "fr"), "ETH sur Base");
        let v = GateView::new(bsc_usdt, "en");
        assert_eq!((v.network_name, v.token_standard), ("BNB Smart Chain", Some("BEP-20")));
    }
}
