//! Invoice rules: validation, pricing, idempotency, address allocation, cancel.

use chrono::{Duration, Utc};
use entity::{Amount, Environment, InvoiceStatus, InvoiceTrigger, invoice, payment, settlement_conversion};
use rust_decimal::{Decimal, RoundingStrategy};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::types::{CreateInvoiceRequest, PaymentRow};
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates;
use crate::keys::Principal;
use crate::state::AppState;

pub const MAX_METADATA_PROPERTIES: usize = 50;
const MAX_METADATA_BYTES: usize = 16 * 1024;
const MAX_DRAFT_LIFETIME_DAYS: i64 = 90;

/// Outcome of a create: a new invoice, or the original one for a replayed idempotency key.
pub enum Created {
    New(invoice::Model),
    Replayed(invoice::Model),
}

/// Parses a positive decimal string as the API accepts it: plain notation, at most 50
/// characters, no sign, no exponent.
pub fn parse_amount(field: &str, s: &str) -> Result<Decimal, String> {
    if s.is_empty() || s.len() > 50 {
        return Err("must be a decimal string of 1 to 50 characters".into());
    }
    if !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') || s.starts_with('.') || s.ends_with('.') {
        return Err(format!("must be a plain positive decimal like \"12.50\", got {s:?}"));
    }
    let d = Amount::parse_exact(s).map_err(|e| format!("{field} {e}: {s:?}"))?.0;
    if d <= Decimal::ZERO {
        return Err("must be greater than zero".into());
    }
    Ok(d.normalize())
}

/// Canonical JSON: keys sorted at every level, top-level nulls dropped (absent == null).
pub fn canonical_hash(raw: &serde_json::Value) -> String {
    fn write(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                    out.push(':');
                    write(&m[*k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut top = raw.clone();
    if let Some(m) = top.as_object_mut() {
        m.retain(|_, v| !v.is_null());
    }
    let mut s = String::new();
    write(&top, &mut s);
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn is_fiat_code(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())
}

fn valid_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(char::is_whitespace)
        && !domain.contains('@')
        && s.len() <= 320
}

/// The structurally valid request, before business rules.
struct Checked {
    crypto_amount: Option<Decimal>,
    fiat: Option<(Decimal, String)>,
    is_deferred: bool,
    draft_expires_at: Option<chrono::DateTime<Utc>>,
}

/// 400-class checks, all collected so the caller sees every problem at once.
fn check_structure(req: &CreateInvoiceRequest) -> DomainResult<Checked> {
    let mut p: Vec<String> = Vec::new();
    let is_deferred = req.is_deferred.unwrap_or(false);
    let mut crypto_amount = None;
    let mut fiat = None;
    match (&req.amount, &req.amount_fiat) {
        (Some(_), Some(_)) => p.push("amount: give either amount or amount_fiat with fiat_currency, not both".into()),
        (None, None) => p.push("amount: required (or amount_fiat with fiat_currency)".into()),
        (Some(a), None) => match parse_amount("amount", a) {
            Ok(d) => crypto_amount = Some(d),
            Err(e) => p.push(format!("amount: {e}")),
        },
        (None, Some(f)) => {
            let amount = parse_amount("amount_fiat", f).map_err(|e| p.push(format!("amount_fiat: {e}"))).ok();
            if let Some(a) = amount
                && a.scale() > 8
            {
                p.push("amount_fiat: at most 8 decimal places".into());
            }
            match req.fiat_currency.as_deref() {
                None => p.push("fiat_currency: required with amount_fiat".into()),
                Some(c) if !is_fiat_code(c) => {
                    p.push(format!("fiat_currency: must be a 3-letter upper-case code like \"USD\", got {c:?}"))
                }
                Some(c) => fiat = amount.map(|a| (a, c.to_owned())),
            }
        }
    }
    if req.fiat_currency.is_some() && req.amount_fiat.is_none() {
        p.push("fiat_currency: only allowed with amount_fiat".into());
    }
    if req.currency.is_none() && !(is_deferred && req.amount_fiat.is_some()) {
        p.push("currency: required (only a fiat-priced draft may leave it for the payer to choose)".into());
    }
    for (name, v, max) in [
        ("currency", &req.currency, 20),
        ("network", &req.network, 64),
        ("description", &req.description, 1000),
        ("external_id", &req.external_id, 255),
        ("target_settlement_asset", &req.target_settlement_asset, 32),
        ("settlement_target_currency", &req.settlement_target_currency, 20),
        ("settlement_target_network", &req.settlement_target_network, 64),
    ] {
        if let Some(s) = v {
            if s.chars().count() > max {
                p.push(format!("{name}: at most {max} characters"));
            } else if s.is_empty() && name != "description" {
                p.push(format!("{name}: must not be empty"));
            }
        }
    }
    if let Some(k) = &req.idempotency_key
        && (k.is_empty() || k.chars().count() > 255)
    {
        p.push("idempotency_key: must be 1 to 255 characters".into());
    }
    if let Some(m) = &req.metadata {
        if m.len() > MAX_METADATA_PROPERTIES {
            p.push(format!("metadata: at most {MAX_METADATA_PROPERTIES} properties, got {}", m.len()));
        } else if serde_json::to_vec(m).map(|v| v.len()).unwrap_or(usize::MAX) > MAX_METADATA_BYTES {
            p.push(format!("metadata: at most {MAX_METADATA_BYTES} bytes of JSON"));
        }
    }
    if let Some(u) = &req.redirect_url {
        match url::Url::parse(u) {
            Ok(parsed)
                if (parsed.scheme() == "https" || parsed.scheme() == "http")
                    && parsed.has_host()
                    && u.len() <= 2048 => {}
            _ => p.push("redirect_url: must be an absolute http(s) URL of at most 2048 characters".into()),
        }
    }
    if let Some(e) = &req.payer_email
        && !valid_email(e)
    {
        p.push("payer_email: must be an email address".into());
    }
    let now = Utc::now();
    if let Some(t) = req.draft_expires_at {
        if !is_deferred {
            p.push("draft_expires_at: only allowed with is_deferred: true".into());
        } else if t <= now {
            p.push("draft_expires_at: must be in the future".into());
        } else if t > now + Duration::days(MAX_DRAFT_LIFETIME_DAYS) {
            p.push(format!("draft_expires_at: at most {MAX_DRAFT_LIFETIME_DAYS} days ahead"));
        }
    }
    if p.is_empty() {
        Ok(Checked { crypto_amount, fiat, is_deferred, draft_expires_at: req.draft_expires_at })
    } else {
        Err(DomainError::validation(p))
    }
}

/// `fiat_amount` of `fiat` in `gate`'s asset at the current rate: `(crypto, rate)`. The crypto
/// amount is rounded **up** to the gate's precision, so the merchant receives at least the fiat
/// amount. 503 `rates_unavailable` without a fresh rate.
pub(crate) fn price_in(
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
    let crypto = fiat_amount
        .checked_div(rate.rate)
        .ok_or_else(|| DomainError::internal("fiat conversion overflow"))?
        .round_dp_with_strategy(gate.decimals, RoundingStrategy::ToPositiveInfinity)
        .normalize();
    Ok((crypto, rate.rate))
}

/// `(target_settlement_asset, settlement_target_currency, settlement_target_network)`.
fn resolve_settlement(req: &CreateInvoiceRequest) -> DomainResult<(String, Option<String>, Option<String>)> {
    let by_asset = match req.target_settlement_asset.as_deref() {
        None | Some("passthrough") => None,
        Some(id) => Some(gates::find(id).ok_or_else(|| {
            DomainError::unprocessable(
                ErrorCode::UnsupportedCurrency,
                "target_settlement_asset",
                format!("must be \"passthrough\" or a gate id, got {id:?}"),
            )
        })?),
    };
    let by_currency = match req.settlement_target_currency.as_deref() {
        None => {
            if req.settlement_target_network.is_some() {
                return Err(DomainError::invalid_field(
                    "settlement_target_network",
                    "only allowed with settlement_target_currency",
                ));
            }
            None
        }
        Some(c) => Some(gates::resolve(c, req.settlement_target_network.as_deref()).map_err(|e| {
            let field =
                if e.field() == "currency" { "settlement_target_currency" } else { "settlement_target_network" };
            DomainError::unprocessable(ErrorCode::UnsupportedCurrency, field, e.to_string())
        })?),
    };
    let target = match (by_asset, by_currency) {
        (Some(a), Some(b)) if a.id != b.id => {
            return Err(DomainError::invalid_field(
                "settlement_target_currency",
                format!("contradicts target_settlement_asset {:?}", a.id),
            ));
        }
        (Some(g), _) | (None, Some(g)) => Some(g),
        (None, None) => None,
    };
    Ok(match target {
        None => ("passthrough".into(), None, None),
        Some(g) => (g.id.into(), Some(g.asset.into()), Some(g.network.into())),
    })
}

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

    let gate = req.currency.as_deref().map(|c| gates::resolve(c, req.network.as_deref())).transpose()?;
    if req.currency.is_none() && req.network.is_some() {
        return Err(DomainError::invalid_field("network", "only allowed with currency"));
    }
    let (target_asset, target_currency, target_network) = resolve_settlement(&req)?;
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
    let merchant = state.merchant(who.merchant_id).await?;

    // Pricing.
    let mut amount_requested = None;
    let mut exchange_rate = None;
    let mut amount_usd = None;
    let mut amount_in_base = None;
    if let Some((fiat_amount, fiat)) = &checked.fiat {
        if !state.rates_fiats(env).iter().any(|f| f == fiat) {
            return Err(DomainError::unprocessable(
                ErrorCode::UnsupportedCurrency,
                "fiat_currency",
                format!("fiat currency {fiat:?} is not priced in the {env} environment"),
            ));
        }
        if fiat == "USD" {
            amount_usd = Some(Amount::fiat(*fiat_amount));
        }
        if *fiat == merchant.base_currency {
            amount_in_base = Some(Amount::fiat(*fiat_amount));
        }
    }
    if let Some(g) = gate {
        let crypto = match (&checked.crypto_amount, &checked.fiat) {
            (Some(a), _) => {
                if a.scale() > g.decimals {
                    return Err(DomainError::invalid_field(
                        "amount",
                        format!("at most {} decimal places for the {} gate", g.decimals, g.id),
                    ));
                }
                *a
            }
            (None, Some((fiat_amount, fiat))) => {
                let (crypto, rate) = price_in(state, env, g, *fiat_amount, fiat)?;
                exchange_rate = Some(Amount::new(rate));
                crypto
            }
            (None, None) => return Err(DomainError::internal("amount missing after validation")),
        };
        state.check_amount_range(env, g, crypto)?;
        amount_requested = Some(Amount::new(crypto));
        if amount_usd.is_none() {
            amount_usd =
                state.rates.get(env, g.asset, "USD").and_then(|r| crypto.checked_mul(r.rate)).map(Amount::fiat);
        }
        if amount_in_base.is_none() {
            amount_in_base = state
                .rates
                .get(env, g.asset, &merchant.base_currency)
                .and_then(|r| crypto.checked_mul(r.rate))
                .map(Amount::fiat);
        }
    }

    let now = Utc::now();
    let status = if checked.is_deferred { InvoiceStatus::Draft } else { InvoiceStatus::Pending };
    let address = match (gate, checked.is_deferred) {
        (Some(g), false) => Some(state.addresses.allocate(&state.db, env, g.family).await?),
        _ => None,
    };
    let model = invoice::Model {
        id: Uuid::now_v7(),
        merchant_id: who.merchant_id,
        environment: env,
        gate_id: gate.map(|g| g.id.to_owned()),
        currency: gate.map(|g| g.asset.to_owned()),
        network: gate.map(|g| g.network.to_owned()),
        amount_requested,
        amount_paid: Amount::ZERO,
        amount_usd,
        amount_fiat: checked.fiat.as_ref().map(|(a, _)| Amount::new(*a)),
        fiat_currency: checked.fiat.as_ref().map(|(_, f)| f.clone()),
        amount_in_base_currency: amount_in_base,
        base_currency: Some(merchant.base_currency.clone()),
        exchange_rate,
        status,
        deposit_address: address.as_ref().map(|a| a.address.clone()),
        deposit_address_tag: address.as_ref().and_then(|a| a.tag.clone()),
        address_key: address.as_ref().map(|a| a.key.clone()),
        derivation_index: address.as_ref().map(|a| a.index),
        description: req.description.clone(),
        external_id: req.external_id.clone(),
        idempotency_key: req.idempotency_key.clone(),
        request_hash: request_hash.clone(),
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
    };
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

async fn find_by_idempotency_key(state: &AppState, who: &Principal, key: &str) -> DomainResult<Option<invoice::Model>> {
    Ok(invoice::Entity::find()
        .filter(invoice::Column::MerchantId.eq(who.merchant_id))
        .filter(invoice::Column::Environment.eq(who.environment))
        .filter(invoice::Column::IdempotencyKey.eq(key))
        .one(&state.db)
        .await?)
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
pub async fn get(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<(invoice::Model, Vec<PaymentRow>)> {
    let inv = invoice::Entity::find_by_id(id)
        .filter(invoice::Column::MerchantId.eq(who.merchant_id))
        .filter(invoice::Column::Environment.eq(who.environment))
        .one(&state.db)
        .await?
        .ok_or_else(|| DomainError::not_found("invoice"))?;
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
}

pub async fn list(
    state: &AppState,
    who: &Principal,
    f: &ListFilter,
    limit: u64,
    offset: u64,
) -> DomainResult<(Vec<(invoice::Model, Vec<PaymentRow>)>, u64)> {
    let mut q = invoice::Entity::find()
        .filter(invoice::Column::MerchantId.eq(who.merchant_id))
        .filter(invoice::Column::Environment.eq(who.environment));
    if let Some(s) = f.status {
        q = q.filter(invoice::Column::Status.eq(s));
    }
    if let Some(c) = &f.currency {
        // An asset code (`USDT`) or a gate id (`tron_usdt`).
        q = match gates::find(c) {
            Some(g) => q.filter(invoice::Column::GateId.eq(g.id)),
            None => q.filter(invoice::Column::Currency.eq(c.to_ascii_uppercase())),
        };
    }
    if let Some(n) = &f.network {
        q = q.filter(invoice::Column::Network.eq(n.as_str()));
    }
    if let Some(a) = f.static_address_id {
        q = q.filter(invoice::Column::StaticAddressId.eq(a));
    }
    let (rows, total) =
        crate::db::newest_first(&state.db, q, (invoice::Column::CreatedAt, invoice::Column::Id), limit, offset).await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut payments = if ids.is_empty() {
        Vec::new()
    } else {
        payment::Entity::find()
            .find_also_related(settlement_conversion::Entity)
            .filter(payment::Column::InvoiceId.is_in(ids))
            .order_by_asc(payment::Column::DetectedAt)
            .all(&state.db)
            .await?
    };
    let out = rows
        .into_iter()
        .map(|inv| {
            let mine: Vec<PaymentRow> = payments.extract_if(.., |(p, _)| p.invoice_id == inv.id).collect();
            (inv, mine)
        })
        .collect();
    Ok((out, total))
}

/// Cancels a `pending` invoice with a guarded update, so a payment racing the cancel can never
/// be overwritten: only one of them moves the invoice out of `pending`.
pub async fn cancel(state: &AppState, who: &Principal, id: Uuid) -> DomainResult<(invoice::Model, Vec<PaymentRow>)> {
    let (inv, _) = get(state, who, id).await?;
    let Some(next) = inv.status.on(InvoiceTrigger::Cancel) else {
        return Err(not_cancellable(inv.status));
    };
    let now = Utc::now();
    let res = invoice::Entity::update_many()
        .col_expr(invoice::Column::Status, Expr::value(next.as_str()))
        .col_expr(invoice::Column::CancelledAt, Expr::value(now))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
        .filter(invoice::Column::Id.eq(id))
        .filter(invoice::Column::Status.eq(inv.status))
        .exec(&state.db)
        .await?;
    let (after, payments) = get(state, who, id).await?;
    if res.rows_affected == 0 {
        return Err(not_cancellable(after.status));
    }
    Ok((after, payments))
}

fn not_cancellable(status: InvoiceStatus) -> DomainError {
    DomainError::conflict(
        ErrorCode::InvoiceNotCancellable,
        format!("only pending invoices can be cancelled; this one is {}", status.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn amounts_are_plain_positive_decimals() {
        assert_eq!(parse_amount("amount", "12.50").unwrap().to_string(), "12.5");
        assert_eq!(parse_amount("amount", "0.000000000000000001").unwrap().to_string(), "0.000000000000000001");
        for bad in ["", "0", "0.0", "-1", "1e5", "1,5", " 1", ".5", "5.", "abc", "+1", &"1".repeat(51)] {
            assert!(parse_amount("amount", bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_amount("amount", &format!("5.{}", "0".repeat(48))).unwrap().to_string(), "5");
        // More significant digits than a Decimal holds: refused, never rounded.
        for too_precise in ["1.00000000000000000000000000001", "0.000000000000000000000000000001"] {
            let e = parse_amount("amount", too_precise).unwrap_err();
            assert!(e.contains("significant digits"), "{too_precise}: {e}");
        }
    }

    #[test]
    fn canonical_hash_ignores_key_order_and_nulls() {
        let a = json!({"currency": "BTC", "amount": "1", "metadata": {"b": 1, "a": 2}});
        let b = json!({"metadata": {"a": 2, "b": 1}, "amount": "1", "currency": "BTC", "description": null});
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        let c = json!({"currency": "BTC", "amount": "2"});
        assert_ne!(canonical_hash(&a), canonical_hash(&c));
    }

    #[test]
    fn structure_checks_name_fields() {
        let err = check_structure(&CreateInvoiceRequest::default()).err().unwrap();
        assert!(err.details.iter().any(|d| d.starts_with("amount:")));
        assert!(err.details.iter().any(|d| d.starts_with("currency:")));
        let req = CreateInvoiceRequest {
            currency: Some("BTC".into()),
            amount: Some("1".into()),
            amount_fiat: Some("5".into()),
            fiat_currency: Some("usd".into()),
            redirect_url: Some("ftp://x".into()),
            payer_email: Some("nope".into()),
            ..Default::default()
        };
        let details = check_structure(&req).err().unwrap().details;
        for f in ["amount:", "redirect_url:", "payer_email:"] {
            assert!(details.iter().any(|d| d.starts_with(f)), "{f} in {details:?}");
        }
        let draft = CreateInvoiceRequest {
            amount_fiat: Some("10".into()),
            fiat_currency: Some("EUR".into()),
            is_deferred: Some(true),
            ..Default::default()
        };
        assert!(check_structure(&draft).is_ok());
    }

    #[test]
    fn settlement_targets_resolve() {
        let r = |a: Option<&str>, c: Option<&str>, n: Option<&str>| {
            resolve_settlement(&CreateInvoiceRequest {
                target_settlement_asset: a.map(Into::into),
                settlement_target_currency: c.map(Into::into),
                settlement_target_network: n.map(Into::into),
                ..Default::default()
            })
        };
        assert_eq!(r(None, None, None).unwrap().0, "passthrough");
        assert_eq!(
            r(Some("tron_usdt"), None, None).unwrap(),
            ("tron_usdt".into(), Some("USDT".into()), Some("tron".into()))
        );
        assert_eq!(r(None, Some("USDC"), Some("solana")).unwrap().0, "solana_usdc");
        assert_eq!(crate::error::ApiError::from(r(Some("nope"), None, None).unwrap_err()).status.as_u16(), 422);
        assert_eq!(crate::error::ApiError::from(r(None, Some("USDT"), None).unwrap_err()).status.as_u16(), 422);
        assert_eq!(
            crate::error::ApiError::from(r(Some("bitcoin"), Some("USDT"), Some("tron")).unwrap_err()).status.as_u16(),
            400
        );
    }
}
