//! What the checkout page shows and does: the payer's view of an invoice (only what a payer
//! needs: no merchant or internal ids, no metadata), the activation of a deferred invoice on
//! the gate the payer picks, and the test environment's simulated payments.

use chrono::{DateTime, Duration, Utc};
use entity::{Amount, Environment, InvoiceStatus, InvoiceTrigger, PaymentStatus, invoice, payment};
use rust_decimal::{Decimal, RoundingStrategy};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::uri::payment_uri;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::HttpState;
use domain::events::{self, EventKind};
use domain::gates::{self, Gate};
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

/// The test-mode buttons: the remaining amount, half of it, or one and a half times it.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Simulated {
    Full,
    Partial,
    Excess,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulateRequest {
    pub kind: Simulated,
}

pub(super) async fn load(state: &HttpState, id: Uuid) -> ApiResult<invoice::Model> {
    invoice::Entity::find_by_id(id).one(&state.db).await?.ok_or_else(|| ApiError::not_found("invoice"))
}

pub(super) async fn payments(state: &HttpState, id: Uuid) -> ApiResult<Vec<payment::Model>> {
    Ok(payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(id))
        .order_by_asc(payment::Column::DetectedAt)
        .all(&state.db)
        .await?)
}

/// Whether the payer may activate `inv` now, and with which trigger.
fn activation(inv: &invoice::Model, has_payments: bool, now: DateTime<Utc>) -> Option<InvoiceTrigger> {
    let open = inv.draft_expires_at.is_some_and(|t| t > now);
    match inv.status {
        InvoiceStatus::Draft if open => Some(InvoiceTrigger::Activate),
        InvoiceStatus::Expired if open && inv.is_deferred && inv.activation_count > 0 && !has_payments => {
            Some(InvoiceTrigger::Reactivate)
        }
        _ => None,
    }
}

/// The gates a payer can choose for `inv`: its own gate once it has one (a re-activation keeps
/// the address it was given), else every gate online in its environment that a fresh rate
/// prices within the gate's limits.
fn options(state: &HttpState, inv: &invoice::Model) -> Vec<(&'static Gate, Decimal)> {
    let fixed = inv.gate_id.as_deref().and_then(gates::find);
    let candidates: Vec<&'static Gate> = match fixed {
        Some(g) => vec![g],
        None => gates::GATES.iter().collect(),
    };
    candidates
        .into_iter()
        .filter(|g| state.ensure_online(inv.environment, g).is_ok())
        .filter_map(|g| price(state, inv, g).ok().map(|a| (g, a)))
        .filter(|(g, a)| state.check_amount_range(inv.environment, g, *a).is_ok())
        .collect()
}

/// The amount `inv` asks in `gate`: its fiat amount at today's rate, or its crypto amount.
fn price(state: &HttpState, inv: &invoice::Model, gate: &'static Gate) -> ApiResult<Decimal> {
    match (&inv.amount_fiat, &inv.fiat_currency) {
        (Some(f), Some(fiat)) => Ok(domain::invoices::service::price_in(state, inv.environment, gate, f.0, fiat)?.0),
        _ => inv.amount_requested.map(|a| a.0).ok_or_else(|| ApiError::internal("invoice without an amount")),
    }
}

/// The payer's view of invoice `id`, with its labels in `lang`.
pub async fn view(state: &HttpState, id: Uuid, lang: &str) -> ApiResult<CheckoutView> {
    let inv = load(state, id).await?;
    let pays = payments(state, id).await?;
    let merchant = state.merchant(inv.merchant_id).await?;
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

/// Activates a draft (or re-activates an unpaid, expired deferred invoice before its
/// `draft_expires_at`) on `gate_id`: the amount is locked (a fiat amount at today's rate), the
/// invoice gets its deposit address (a re-activation keeps the one it had) and a new
/// `expires_at`, moves to `pending` with a guarded update, and `invoice.activated` is written
/// in the same transaction.
///
/// The deposit address is taken only after the guarded update succeeded, in its transaction
/// (`AddressBook::allocate_in`): payers activating one draft at once take one address between
/// them, so a finite pool (live Solana) loses no entry to the losers, and nothing is taken when
/// the transaction rolls back. A request that finds the invoice already activated on the gate it
/// asks for (by a concurrent click, or a repeat) answers with that activation, so every caller
/// sees the same invoice and address; asking for another gate then is 409.
pub async fn activate(state: &HttpState, id: Uuid, req: ActivateRequest) -> ApiResult<invoice::Model> {
    let inv = load(state, id).await?;
    let now = Utc::now();
    let has_payments = payments(state, id).await?.iter().any(|p| p.status != PaymentStatus::Reversed);
    let Some(trigger) = activation(&inv, has_payments, now) else {
        if gates::find(&req.gate_id).is_some_and(|g| activated_on(&inv, g.id)) {
            return Ok(inv);
        }
        return Err(ApiError::conflict(
            ErrorCode::InvoiceNotActivatable,
            format!("an invoice that is {} cannot be activated", inv.status.as_str()),
        ));
    };
    let Some(next) = inv.status.on(trigger) else {
        return Err(ApiError::internal("activation without a transition"));
    };
    let gate = gates::find(&req.gate_id).ok_or_else(|| {
        ApiError::unprocessable(ErrorCode::UnsupportedCurrency, "gate_id", format!("unknown gate {:?}", req.gate_id))
    })?;
    if let Some(own) = inv.gate_id.as_deref()
        && own != gate.id
    {
        return Err(ApiError::unprocessable(
            ErrorCode::UnsupportedCurrency,
            "gate_id",
            format!("this invoice is payable with {own} only"),
        ));
    }
    state.ensure_online(inv.environment, gate)?;
    let amount = price(state, &inv, gate)?;
    state.check_amount_range(inv.environment, gate, amount)?;
    let merchant = state.merchant(inv.merchant_id).await?;
    let rate_of = |fiat: &str| state.rates.get(inv.environment, gate.asset, fiat).map(|r| r.rate);
    let fiat_value = |fiat: &str| -> Option<Amount> {
        if inv.fiat_currency.as_deref() == Some(fiat) {
            return inv.amount_fiat.map(|a| Amount::fiat(a.0));
        }
        rate_of(fiat).and_then(|r| amount.checked_mul(r)).map(Amount::fiat)
    };
    let exchange_rate = inv.fiat_currency.as_deref().and_then(rate_of).map(Amount::new);
    let txn = domain::db::begin_write(&state.db).await?;
    let mut update = invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::GateId, Expr::value(gate.id))
        .col_expr(invoice::Column::Currency, Expr::value(gate.asset))
        .col_expr(invoice::Column::Network, Expr::value(gate.network))
        .col_expr(invoice::Column::AmountRequested, Expr::value(Amount::new(amount)))
        .col_expr(invoice::Column::AmountUsd, Expr::value(fiat_value("USD")))
        .col_expr(invoice::Column::AmountInBaseCurrency, Expr::value(fiat_value(&merchant.base_currency)))
        .col_expr(invoice::Column::ExpiresAt, Expr::value(now + Duration::seconds(merchant.invoice_lifetime_secs)))
        .col_expr(invoice::Column::ActivatedAt, Expr::value(now))
        .col_expr(invoice::Column::ActivationCount, Expr::value(inv.activation_count + 1))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now));
    if let Some(r) = exchange_rate {
        update = update.col_expr(invoice::Column::ExchangeRate, Expr::value(r));
    }
    let moved = update
        .filter(invoice::Column::Id.eq(inv.id))
        .filter(invoice::Column::Status.eq(inv.status))
        .filter(invoice::Column::ActivationCount.eq(inv.activation_count))
        .exec_with_returning(&txn)
        .await?;
    let Some(mut after) = moved.into_iter().next() else {
        txn.rollback().await?;
        // Someone else moved the invoice since it was read: look again.
        let now_is = load(state, id).await?;
        if now_is.activation_count > inv.activation_count && activated_on(&now_is, gate.id) {
            return Ok(now_is);
        }
        return Err(ApiError::conflict(ErrorCode::InvoiceNotActivatable, "the invoice changed meanwhile; reload"));
    };
    // The guard held (the row is this transaction's until it ends): now the address, if the
    // invoice has none yet (a re-activation keeps its own).
    if after.deposit_address.is_none() || after.address_key.is_none() {
        let a = state.addresses.allocate_in(&txn, inv.environment, gate.family).await?;
        let addressed = invoice::Entity::update_many()
            .col_expr(invoice::Column::DepositAddress, Expr::value(a.address))
            .col_expr(invoice::Column::DepositAddressTag, Expr::value(a.tag))
            .col_expr(invoice::Column::AddressKey, Expr::value(a.key))
            .col_expr(invoice::Column::DerivationIndex, Expr::value(Some(a.index)))
            .filter(invoice::Column::Id.eq(inv.id))
            .exec_with_returning(&txn)
            .await?;
        after = addressed.into_iter().next().ok_or_else(|| ApiError::internal("activated invoice vanished"))?;
    }
    events::emit_invoice(&txn, EventKind::InvoiceActivated, &after, None).await?;
    txn.commit().await?;
    Ok(after)
}

/// Whether `inv` is a deferred invoice activated on `gate_id` and still waiting for payment
/// with its address: what an activation on that gate would have made of it.
fn activated_on(inv: &invoice::Model, gate_id: &str) -> bool {
    inv.is_deferred
        && inv.activation_count > 0
        && inv.status == InvoiceStatus::Pending
        && inv.gate_id.as_deref() == Some(gate_id)
        && inv.address_key.is_some()
}

/// Test environment only (404 in live, as if the route did not exist): a sandbox deposit of
/// the remaining amount, half of it, or one and a half times it, through the same helper as
/// `POST /v1/test/deposits`.
pub async fn simulate(state: &HttpState, id: Uuid, req: SimulateRequest) -> ApiResult<()> {
    let inv = load(state, id).await?;
    if inv.environment != Environment::Test {
        return Err(ApiError::not_found("route"));
    }
    let (Some(gate), Some(key), Some(requested)) =
        (inv.gate_id.as_deref().and_then(gates::find), inv.address_key.as_deref(), inv.amount_requested)
    else {
        return Err(ApiError::unprocessable(
            ErrorCode::ValidationError,
            "invoice",
            "choose a payment method first: the invoice has no deposit address yet",
        ));
    };
    let seen: Decimal =
        payments(state, id).await?.iter().filter(|p| p.status != PaymentStatus::Reversed).map(|p| p.amount.0).sum();
    let due = requested.0 - seen;
    let amount = match (req.kind, due > Decimal::ZERO) {
        (Simulated::Full, true) => due,
        (Simulated::Partial, true) => due / Decimal::TWO,
        (Simulated::Excess, true) => due * Decimal::new(15, 1),
        // Everything is paid (or on its way): an excess is another half of the amount.
        (Simulated::Excess, false) => requested.0 / Decimal::TWO,
        (Simulated::Full | Simulated::Partial, false) => Decimal::ZERO,
    }
    .round_dp_with_strategy(gate.decimals, RoundingStrategy::ToZero);
    if amount <= Decimal::ZERO {
        return Err(ApiError::unprocessable(ErrorCode::ValidationError, "kind", "nothing left to pay"));
    }
    domain::sandbox_payments::deposit_to(state, gate, key, amount, None).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(status: InvoiceStatus, count: i32, open: bool) -> invoice::Model {
        let now = Utc::now();
        invoice::Model {
            status,
            is_deferred: true,
            draft_expires_at: Some(if open { now + Duration::hours(1) } else { now - Duration::hours(1) }),
            activation_count: count,
            ..invoice::Model::blank(Uuid::nil(), Uuid::nil(), Environment::Test, now)
        }
    }

    #[test]
    fn who_may_activate() {
        let now = Utc::now();
        assert_eq!(activation(&draft(InvoiceStatus::Draft, 0, true), false, now), Some(InvoiceTrigger::Activate));
        assert_eq!(activation(&draft(InvoiceStatus::Draft, 0, false), false, now), None, "past draft_expires_at");
        let expired = draft(InvoiceStatus::Expired, 1, true);
        assert_eq!(activation(&expired, false, now), Some(InvoiceTrigger::Reactivate));
        assert_eq!(activation(&expired, true, now), None, "something was paid");
        assert_eq!(activation(&draft(InvoiceStatus::Expired, 1, false), false, now), None);
        assert_eq!(
            activation(&draft(InvoiceStatus::Expired, 0, true), false, now),
            None,
            "a draft that expired unopened"
        );
        for s in [InvoiceStatus::Pending, InvoiceStatus::Paid, InvoiceStatus::Cancelled, InvoiceStatus::Invalid] {
            assert_eq!(activation(&draft(s, 1, true), false, now), None, "{s:?}");
        }
        let mut not_deferred = draft(InvoiceStatus::Expired, 1, true);
        not_deferred.is_deferred = false;
        assert_eq!(activation(&not_deferred, false, now), None);
    }

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
