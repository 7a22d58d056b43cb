//! Invoice rules: pricing, idempotency, address allocation, reading and cancel (the request's
//! own checks are `validate`'s).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use entity::{
    Amount, Environment, InvoiceId, InvoiceStatus, InvoiceTrigger, invoice, merchant, payment, settlement_conversion,
};
use rust_decimal::{Decimal, RoundingStrategy};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Select};
use uuid::Uuid;

use super::types::{CreateInvoiceRequest, PaymentRow};
use super::validate::{Checked, canonical_hash, check_structure, resolve_settlement};
use crate::addresses::Allocated;
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates;
use crate::keys::Principal;
use crate::owned::{self, Filter};
use crate::state::AppState;

/// Outcome of a create: a new invoice, or the original one for a replayed idempotency key.
pub enum Created {
    New(invoice::Model),
    Replayed(invoice::Model),
}

/// `fiat_amount` of `fiat` in `gate`'s asset at the current rate: `(crypto, rate)`. The crypto
/// amount is rounded **up** to the gate's precision, so the merchant receives at least the fiat
/// amount. 503 `rates_unavailable` without a fresh rate.
pub fn price_in(
    state: &AppState,
    env: Environment,
    gate: &gates::Gate,
    fiat_amount: Decimal,
    fiat: &str,
) -> DomainResult<(Decimal, Decimal)> {
    let rate = state.rates.get(env, gate.asset, fiat).ok_or_else(|| {
        DomainError::unavailable(
            ErrorCode::RatesUnavailable,
            format!("no fresh {}/{fiat} rate; fiat-priced invoices are refused until rates recover", gate.asset),
        )
    })?;
    let crypto = quote(fiat_amount, rate.rate, state.quote_decimals(env, gate))
        .ok_or_else(|| DomainError::internal("fiat conversion overflow"))?;
    Ok((crypto, rate.rate))
}

/// The crypto amount that pays `fiat_amount` at `rate` (fiat per unit), rounded **up** to
/// `decimals`: the smallest multiple of 10^-decimals whose value at `rate` is at least the fiat
/// price, so the merchant never receives less than it and the payer sees a figure they can
/// send. The division is exact to 28 digits; a quotient rounded down by it is corrected by one
/// step. `None` on overflow or a rate that is not positive.
pub fn quote(fiat_amount: Decimal, rate: Decimal, decimals: u32) -> Option<Decimal> {
    if rate <= Decimal::ZERO {
        return None;
    }
    let step = Decimal::new(1, decimals);
    let mut crypto =
        fiat_amount.checked_div(rate)?.round_dp_with_strategy(decimals, RoundingStrategy::ToPositiveInfinity);
    if crypto.checked_mul(rate)? < fiat_amount {
        crypto = crypto.checked_add(step)?;
    }
    Some(crypto.normalize())
}

/// Creates an invoice (see `Created`): the request checked and, for an idempotency key already
/// used, answered with the recorded invoice; then resolved and priced, given a deposit address
/// unless it is a draft, and written by the batched invoice writer.
pub async fn create(
    state: &AppState,
    who: &Principal,
    req: CreateInvoiceRequest,
    raw: &serde_json::Value,
) -> DomainResult<Created> {
    let checked = check_structure(&req)?;
    // Only an idempotent request is ever compared with a later one.
    let request_hash = req.idempotency_key.as_ref().map(|_| canonical_hash(raw));
    let env = who.environment;

    if let (Some(key), Some(hash)) = (&req.idempotency_key, &request_hash)
        && let Some(existing) = find_by_idempotency_key(state, who, key).await?
    {
        return replay_or_mismatch(existing, Some(hash));
    }

    let (gate, target) = resolve_gate_and_target(state, env, &req)?;
    let merchant = state.merchant(who.merchant_id).await?;
    let pricing = price(state, env, gate, &checked, &merchant.base_currency)?;

    let now = Utc::now();
    let address = match (gate, checked.is_deferred) {
        (Some(g), false) => Some(state.addresses.allocate(&state.db, env, g.family).await?),
        _ => None,
    };
    let resolved = Resolved { checked, gate, target, merchant, pricing };
    let model = new_model(state, who, &req, resolved, request_hash.clone(), address, now);
    let inserted = state.invoice_writer.insert(model.clone()).await?;
    if !inserted {
        let key = req.idempotency_key.as_deref().unwrap_or_default();
        let existing = find_by_idempotency_key(state, who, key)
            .await?
            .ok_or_else(|| DomainError::internal("idempotency conflict without a row"))?;
        return replay_or_mismatch(existing, request_hash.as_deref());
    }
    Ok(Created::New(model))
}

/// `(target_settlement_asset, settlement_target_currency, settlement_target_network)`.
type SettlementTarget = (String, Option<String>, Option<String>);

/// The request's gate (none without `currency`) and settlement target. Refused: `network`
/// without `currency`, a conversion in the live environment when no venue is configured, and a
/// gate that takes no deposits in `env`.
fn resolve_gate_and_target(
    state: &AppState,
    env: Environment,
    req: &CreateInvoiceRequest,
) -> DomainResult<(Option<&'static gates::Gate>, SettlementTarget)> {
    let gate = req.currency.as_deref().map(|c| gates::resolve(c, req.network.as_deref())).transpose()?;
    if req.currency.is_none() && req.network.is_some() {
        return Err(DomainError::invalid_field("network", "only allowed with currency"));
    }
    let (target_asset, target_currency, target_network) = resolve_settlement(req)?;
    if target_asset != "passthrough" && env == Environment::Live && state.config.settlement.live_venue == "none" {
        let field = if req.target_settlement_asset.is_some() {
            "target_settlement_asset"
        } else {
            "settlement_target_currency"
        };
        return Err(DomainError::unprocessable(
            ErrorCode::UnsupportedCurrency,
            field,
            "settlement conversion is not available in the live environment (no conversion venue is configured); use passthrough",
        ));
    }
    if let Some(g) = gate {
        state.ensure_online(env, g)?;
    }
    Ok((gate, (target_asset, target_currency, target_network)))
}

/// An invoice's amounts: the crypto amount requested, the rate it was quoted at (fiat-priced
/// invoices), and its value in USD and in the merchant's base currency where known.
#[derive(Default)]
struct Pricing {
    amount_requested: Option<Amount>,
    exchange_rate: Option<Amount>,
    amount_usd: Option<Amount>,
    amount_in_base: Option<Amount>,
}

/// Prices the request: a fiat price must be in a currency `env` has rates for, and counts as
/// its USD or base-currency value when it is in that currency; with a gate, the crypto amount
/// (given, or quoted from the fiat price) must be within the gate's range, and the values not
/// yet known come from the current rates.
fn price(
    state: &AppState,
    env: Environment,
    gate: Option<&gates::Gate>,
    checked: &Checked,
    base_currency: &str,
) -> DomainResult<Pricing> {
    let mut p = Pricing::default();
    if let Some((fiat_amount, fiat)) = &checked.fiat {
        if !state.rates_fiats(env).iter().any(|f| f == fiat) {
            return Err(DomainError::unprocessable(
                ErrorCode::UnsupportedCurrency,
                "fiat_currency",
                format!("fiat currency {fiat:?} is not priced in the {env} environment"),
            ));
        }
        if fiat == "USD" {
            p.amount_usd = Some(Amount::fiat(*fiat_amount));
        }
        if fiat == base_currency {
            p.amount_in_base = Some(Amount::fiat(*fiat_amount));
        }
    }
    let Some(g) = gate else {
        return Ok(p);
    };
    let (crypto, rate) = crypto_amount(state, env, g, checked)?;
    p.exchange_rate = rate;
    state.check_amount_range(env, g, crypto)?;
    p.amount_requested = Some(Amount::new(crypto));
    if p.amount_usd.is_none() {
        p.amount_usd = state.rates.get(env, g.asset, "USD").and_then(|r| crypto.checked_mul(r.rate)).map(Amount::fiat);
    }
    if p.amount_in_base.is_none() {
        p.amount_in_base =
            state.rates.get(env, g.asset, base_currency).and_then(|r| crypto.checked_mul(r.rate)).map(Amount::fiat);
    }
    Ok(p)
}

/// The crypto amount on `gate`: the one given (at most the gate's decimals), or the fiat price
/// quoted at the current rate, with that rate.
fn crypto_amount(
    state: &AppState,
    env: Environment,
    gate: &gates::Gate,
    checked: &Checked,
) -> DomainResult<(Decimal, Option<Amount>)> {
    match (&checked.crypto_amount, &checked.fiat) {
        (Some(a), _) => {
            if a.scale() > gate.decimals {
                return Err(DomainError::invalid_field(
                    "amount",
                    format!("at most {} decimal places for the {} gate", gate.decimals, gate.id),
                ));
            }
            Ok((*a, None))
        }
        (None, Some((fiat_amount, fiat))) => {
            let (crypto, rate) = price_in(state, env, gate, *fiat_amount, fiat)?;
            Ok((crypto, Some(Amount::new(rate))))
        }
        (None, None) => Err(DomainError::internal("amount missing after validation")),
    }
}

/// What a create request resolved to before the row is built.
struct Resolved {
    checked: Checked,
    gate: Option<&'static gates::Gate>,
    target: SettlementTarget,
    merchant: Arc<merchant::Model>,
    pricing: Pricing,
}

/// The new invoice row: a draft (`is_deferred`) without address or expiry until it is
/// activated, otherwise pending with its address and the merchant's invoice lifetime.
fn new_model(
    state: &AppState,
    who: &Principal,
    req: &CreateInvoiceRequest,
    r: Resolved,
    request_hash: Option<String>,
    address: Option<Allocated>,
    now: DateTime<Utc>,
) -> invoice::Model {
    let Resolved { checked, gate, target: (target_asset, target_currency, target_network), merchant, pricing } = r;
    let status = if checked.is_deferred { InvoiceStatus::Draft } else { InvoiceStatus::Pending };
    invoice::Model {
        id: Uuid::now_v7(),
        merchant_id: who.merchant_id.into(),
        environment: who.environment,
        gate_id: gate.map(|g| g.id.to_owned()),
        currency: gate.map(|g| g.asset.to_owned()),
        network: gate.map(|g| g.network.to_owned()),
        amount_requested: pricing.amount_requested,
        amount_paid: Amount::ZERO,
        amount_usd: pricing.amount_usd,
        amount_fiat: checked.fiat.as_ref().map(|(a, _)| Amount::new(*a)),
        fiat_currency: checked.fiat.as_ref().map(|(_, f)| f.clone()),
        amount_in_base_currency: pricing.amount_in_base,
        base_currency: Some(merchant.base_currency.clone()),
        exchange_rate: pricing.exchange_rate,
        status,
        deposit_address: address.as_ref().map(|a| a.address.clone()),
        deposit_address_tag: address.as_ref().and_then(|a| a.tag.clone()),
        address_key: address.as_ref().map(|a| a.key.clone()),
        derivation_index: address.as_ref().map(|a| a.index),
        description: req.description.clone(),
        external_id: req.external_id.clone(),
        idempotency_key: req.idempotency_key.clone(),
        request_hash,
        metadata: req.metadata.clone().map(serde_json::Value::Object),
        redirect_url: req.redirect_url.clone(),
        source: "api".into(),
        static_address_id: None,
        expires_at: (!checked.is_deferred).then(|| now + Duration::seconds(merchant.invoice_lifetime_secs)),
        paid_at: None,
        created_at: now,
        updated_at: now,
        is_deferred: checked.is_deferred,
        draft_expires_at: checked.is_deferred.then(|| {
            checked
                .draft_expires_at
                .unwrap_or(now + Duration::seconds(state.config.invoices.default_draft_lifetime_secs))
        }),
        activated_at: None,
        activation_count: 0,
        is_locked_fiat: checked.fiat.is_some(),
        target_settlement_asset: target_asset,
        settlement_target_currency: target_currency,
        settlement_target_network: target_network,
        payer_email: req.payer_email.clone(),
        sent_at: None,
        cancelled_at: None,
        // The mailer sends the payment request to the payer (workers' `mail`).
        email_due_at: req.payer_email.is_some().then_some(now),
    }
}

async fn find_by_idempotency_key(state: &AppState, who: &Principal, key: &str) -> DomainResult<Option<invoice::Model>> {
    Ok(who.rows::<invoice::Entity>().filter(invoice::Column::IdempotencyKey.eq(key)).one(&state.db).await?)
}

fn replay_or_mismatch(existing: invoice::Model, request_hash: Option<&str>) -> DomainResult<Created> {
    if request_hash.is_some() && existing.request_hash.as_deref() == request_hash {
        Ok(Created::Replayed(existing))
    } else {
        Err(DomainError::unprocessable(
            ErrorCode::IdempotencyKeyMismatch,
            "idempotency_key",
            "this idempotency_key was already used with a different request body",
        ))
    }
}

/// An invoice of the caller's merchant and environment; anything else is 404.
pub async fn get(state: &AppState, who: &Principal, id: InvoiceId) -> DomainResult<(invoice::Model, Vec<PaymentRow>)> {
    let inv = owned::get::<invoice::Entity>(&state.db, who, id).await?;
    let payments = payment::Entity::find()
        .find_also_related(settlement_conversion::Entity)
        .filter(payment::Column::InvoiceId.eq(inv.id))
        .order_by_asc(payment::Column::DetectedAt)
        .all(&state.db)
        .await?;
    Ok((inv, payments))
}

#[derive(Debug, Default)]
pub struct ListFilter {
    pub status: Option<InvoiceStatus>,
    pub currency: Option<String>,
    pub network: Option<String>,
    pub static_address_id: Option<Uuid>,
    /// The merchant's own reference (the API's and the dashboard's filter), and the dashboard's
    /// creation window (`created_from` inclusive, `created_to` exclusive).
    pub external_id: Option<String>,
    pub created_from: Option<chrono::DateTime<chrono::Utc>>,
    pub created_to: Option<chrono::DateTime<chrono::Utc>>,
}

impl Filter<invoice::Entity> for ListFilter {
    fn apply(&self, mut q: Select<invoice::Entity>) -> Select<invoice::Entity> {
        if let Some(s) = self.status {
            q = q.filter(invoice::Column::Status.eq(s));
        }
        if let Some(c) = &self.currency {
            q = q.filter(owned::currency_is(invoice::Column::GateId, invoice::Column::Currency, c));
        }
        if let Some(n) = &self.network {
            q = q.filter(invoice::Column::Network.eq(n.as_str()));
        }
        if let Some(a) = self.static_address_id {
            q = q.filter(invoice::Column::StaticAddressId.eq(a));
        }
        if let Some(e) = &self.external_id {
            q = q.filter(invoice::Column::ExternalId.eq(e.as_str()));
        }
        if let Some(t) = self.created_from {
            q = q.filter(invoice::Column::CreatedAt.gte(t));
        }
        if let Some(t) = self.created_to {
            q = q.filter(invoice::Column::CreatedAt.lt(t));
        }
        q
    }

    fn tally(&self) -> Option<crate::list_counts::Tally> {
        use crate::list_counts::{Key, List, Tally};
        let counted = self.static_address_id.is_none()
            && self.external_id.is_none()
            && self.created_from.is_none()
            && self.created_to.is_none();
        let (gate_id, currency) = self.currency.as_deref().map(owned::currency_key).unwrap_or_default();
        let key = Key {
            status: self.status.map(|s| sea_orm::ActiveEnum::to_value(&s)),
            gate_id,
            currency,
            network: self.network.clone(),
            kind: None,
        };
        counted.then(|| Tally::new(List::Invoices, key))
    }
}

/// Each of `rows` (a page of invoices) with its payments, oldest first.
pub async fn with_payments(
    db: &impl ConnectionTrait,
    rows: Vec<invoice::Model>,
) -> DomainResult<Vec<(invoice::Model, Vec<PaymentRow>)>> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut payments = if ids.is_empty() {
        Vec::new()
    } else {
        payment::Entity::find()
            .find_also_related(settlement_conversion::Entity)
            .filter(payment::Column::InvoiceId.is_in(ids))
            .order_by_asc(payment::Column::DetectedAt)
            .all(db)
            .await?
    };
    Ok(rows
        .into_iter()
        .map(|inv| {
            let mine: Vec<PaymentRow> = payments.extract_if(.., |(p, _)| p.invoice_id == inv.id).collect();
            (inv, mine)
        })
        .collect())
}

/// Cancels a `pending` invoice with a guarded update (`lifecycle::cancel`), so a payment racing
/// the cancel can never be overwritten: only one of them moves the invoice out of `pending`.
pub async fn cancel(
    state: &AppState,
    who: &Principal,
    id: InvoiceId,
) -> DomainResult<(invoice::Model, Vec<PaymentRow>)> {
    let (inv, _) = get(state, who, id).await?;
    if inv.status.on(InvoiceTrigger::Cancel).is_none() {
        return Err(not_cancellable(inv.status));
    }
    let moved = super::lifecycle::cancel(&state.db, &inv).await?;
    let (after, payments) = get(state, who, id).await?;
    if moved.is_none() {
        return Err(not_cancellable(after.status));
    }
    Ok((after, payments))
}

/// Resolves an invoice by hand: the merchant accepts what was received as payment in full (an
/// `underpaid` or `overpaid` invoice, or an `expired` or `cancelled` one that took late
/// deposits) and it becomes `paid`, announced by `invoice.resolved` in the same transaction.
/// Balances do not move: every confirmed deposit was credited already; an overpaid surplus stays
/// on the balance, to be refunded with a refund if the merchant wishes.
pub async fn resolve(
    state: &AppState,
    who: &Principal,
    id: InvoiceId,
) -> DomainResult<(invoice::Model, Vec<PaymentRow>)> {
    let (inv, _) = get(state, who, id).await?;
    let refuse = |inv: &invoice::Model| {
        let why = match inv.status.on(InvoiceTrigger::Resolve) {
            Some(_) => "nothing was received on it".to_owned(),
            None => format!("it is {}", inv.status.as_str()),
        };
        DomainError::conflict(
            ErrorCode::InvoiceNotResolvable,
            format!(
                "only underpaid or overpaid invoices, or expired or cancelled ones that received deposits, can be resolved; {why}"
            ),
        )
    };
    if inv.status.on(InvoiceTrigger::Resolve).is_none() || inv.amount_paid.0 <= Decimal::ZERO {
        return Err(refuse(&inv));
    }
    let txn = crate::db::begin_write(&state.db).await?;
    let Some(after) = super::lifecycle::resolve(&txn, &inv).await? else {
        txn.rollback().await?;
        let (now, _) = get(state, who, id).await?;
        return Err(match now.amount_paid == inv.amount_paid && now.status == inv.status {
            true => refuse(&now),
            false => DomainError::conflict(
                ErrorCode::InvoiceNotResolvable,
                format!(
                    "the invoice changed meanwhile (now {}, {} received): look at it again",
                    now.status.as_str(),
                    now.amount_paid.0
                ),
            ),
        });
    };
    crate::events::emit_invoice(&txn, crate::events::EventKind::InvoiceResolved, &after, None).await?;
    txn.commit().await?;
    get(state, who, id).await
}

fn not_cancellable(status: InvoiceStatus) -> DomainError {
    DomainError::conflict(
        ErrorCode::InvoiceNotCancellable,
        format!("only pending invoices can be cancelled; this one is {}", status.as_str()),
    )
}

#[cfg(test)]
mod quote_tests {
    use proptest::prelude::*;
    use rust_decimal::Decimal;

    use super::quote;
    use crate::gates::GATES;

    proptest! {
        /// Every gate: the rounded quote × rate is at least the fiat price, and one precision
        /// step less would be below it; the quote has at most the gate's quote decimals.
        #[test]
        fn a_fiat_quote_is_the_smallest_sendable_figure_that_pays_the_price(
            gate in 0..GATES.len(),
            fiat_cents in 1i64..10_000_000_000,
            rate_mantissa in 1i64..10_000_000_000_000,
            rate_scale in 0u32..=10,
        ) {
            let g = &GATES[gate];
            let decimals = g.default_quote_decimals();
            let fiat = Decimal::new(fiat_cents, 2);
            let rate = Decimal::new(rate_mantissa, rate_scale);
            let q = quote(fiat, rate, decimals).unwrap();
            let step = Decimal::new(1, decimals);
            prop_assert!(q * rate >= fiat, "{}: {q} at {rate} is below {fiat}", g.id);
            prop_assert!((q - step) * rate < fiat, "{}: {q} at {rate} is a step or more above {fiat}", g.id);
            prop_assert!(q.scale() <= decimals, "{}: {q} has more than {decimals} decimals", g.id);
        }
    }

    /// The checkout example: a 49.90 EUR order.
    #[test]
    fn a_49_90_eur_order_is_quoted_in_figures_people_send() {
        let eur = |s: &str| s.parse::<Decimal>().unwrap();
        let price = eur("49.90");
        assert_eq!(quote(price, eur("0.9"), 2).unwrap().to_string(), "55.45"); // USDT: 55.4444… up
        assert_eq!(quote(price, eur("2700"), 6).unwrap().to_string(), "0.018482"); // ETH
        assert_eq!(quote(price, eur("540"), 6).unwrap().to_string(), "0.092408"); // BNB
        assert_eq!(quote(price, eur("49.90"), 2).unwrap().to_string(), "1"); // exact: no step added
        assert_eq!(quote(price, Decimal::ZERO, 2), None);
    }
}
