//! A merchant's own settings through the API (`GET`/`PATCH /v1/settings`, permissions
//! `settings:read`/`settings:write`): the invoice defaults every environment shares
//! (`base_currency`, `invoice_lifetime_secs`, `underpayment_tolerance_percent`). A change is
//! checked field by field (a 400 names the field, nothing is written) and recorded in the audit
//! log with the key that made it, in the same transaction. Other API processes serve the new
//! settings within `auth.cache_ttl_secs` (their merchant cache), as they stop a revoked key.
//!
//! Payout approval settings (auto-approve, delay, who bears fees) are not here on purpose: a key
//! that could switch approval off would take away the very check that stops a stolen key from
//! paying money out. They stay with the operator (`ops payouts settings`).

use chrono::Utc;
use entity::{Amount, merchant};
use rust_decimal::Decimal;
use sea_orm::{ActiveModelTrait, ActiveValue::Set};
use serde_json::{Value, json};

use crate::audit::{Entry, record};
use crate::domain_error::{DomainError, DomainResult};
use crate::keys::Principal;
use crate::merchants::{MerchantError, MerchantSettings, get_merchant};
use crate::state::AppState;

/// A change: only the fields given change.
#[derive(Debug, Default, Clone)]
pub struct SettingsPatch {
    pub base_currency: Option<String>,
    pub invoice_lifetime_secs: Option<i64>,
    /// A decimal string.
    pub underpayment_tolerance_percent: Option<String>,
    /// An e-mail address; `""` removes it.
    pub payer_reply_to: Option<String>,
}

/// `payer_reply_to` as given: `local@domain.tld` with the local part of 1 to 64 characters
/// `A-Z a-z 0-9 . _ % + -` and at least two domain labels of `A-Z a-z 0-9 -` (the OpenAPI
/// pattern says the same), at most 254 characters; `""` clears it.
pub fn check_reply_to(raw: &str) -> Result<Option<String>, String> {
    if raw.is_empty() {
        return Ok(None);
    }
    let bad =
        || "payer_reply_to: must be an e-mail address such as support@shop.example (or \"\" to remove it)".to_owned();
    let (local, domain) = raw.split_once('@').ok_or_else(bad)?;
    let local_ok =
        (1..=64).contains(&local.len()) && local.bytes().all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b));
    let labels: Vec<&str> = domain.split('.').collect();
    let domain_ok = labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if local_ok && domain_ok && raw.len() <= 254 { Ok(Some(raw.to_owned())) } else { Err(bad()) }
}

fn current(m: &merchant::Model) -> MerchantSettings {
    MerchantSettings {
        base_currency: m.base_currency.clone(),
        invoice_lifetime_secs: m.invoice_lifetime_secs,
        underpayment_tolerance_percent: m.underpayment_tolerance_percent.value(),
    }
}

/// The audit log's view of the settings.
fn audited(m: &merchant::Model) -> Value {
    json!({
        "base_currency": m.base_currency,
        "invoice_lifetime_secs": m.invoice_lifetime_secs,
        "underpayment_tolerance_percent": m.underpayment_tolerance_percent.value().to_string(),
        "payer_reply_to": m.payer_reply_to,
    })
}

fn missing(e: MerchantError) -> DomainError {
    match e {
        MerchantError::Db(e) => e.into(),
        MerchantError::NotFound(_) | MerchantError::KeyNotFound(_) | MerchantError::Invalid(_) => {
            DomainError::internal(e)
        }
    }
}

/// `patch` applied to `settings`, each field checked; the problems by field.
pub fn apply(mut settings: MerchantSettings, patch: &SettingsPatch) -> Result<MerchantSettings, Vec<String>> {
    let mut problems = Vec::new();
    if let Some(code) = &patch.base_currency {
        if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            settings.base_currency = code.clone();
        } else {
            problems.push("base_currency: must be a 3-letter upper-case fiat code (USD, EUR)".to_owned());
        }
    }
    if let Some(secs) = patch.invoice_lifetime_secs {
        if (60..=30 * 24 * 3600).contains(&secs) {
            settings.invoice_lifetime_secs = secs;
        } else {
            problems.push("invoice_lifetime_secs: must be from 60 to 2592000 (30 days)".to_owned());
        }
    }
    if let Some(raw) = &patch.underpayment_tolerance_percent {
        match raw.parse::<Decimal>() {
            Ok(p) if (Decimal::ZERO..=Decimal::from(50)).contains(&p) && p.scale() <= 2 && raw.len() <= 10 => {
                settings.underpayment_tolerance_percent = p.normalize();
            }
            _ => problems.push(
                "underpayment_tolerance_percent: must be a decimal string from 0 to 50, at most 2 decimal places"
                    .to_owned(),
            ),
        }
    }
    match problems.is_empty() {
        true => Ok(settings),
        false => Err(problems),
    }
}

/// The caller's merchant's settings.
pub async fn get(state: &AppState, who: &Principal) -> DomainResult<merchant::Model> {
    get_merchant(&state.db, who.merchant_id).await.map_err(missing)
}

/// Applies `patch` (all or nothing) and records it in the audit log, actor `api_key:<id>`.
pub async fn update(state: &AppState, who: &Principal, patch: &SettingsPatch) -> DomainResult<merchant::Model> {
    let txn = crate::db::begin_write(&state.db).await?;
    let before = get_merchant(&txn, who.merchant_id).await.map_err(missing)?;
    let reply_to = patch.payer_reply_to.as_deref().map(check_reply_to);
    let settings = match (apply(current(&before), patch), &reply_to) {
        (Ok(s), None | Some(Ok(_))) => s,
        (applied, _) => {
            let mut problems = applied.err().unwrap_or_default();
            problems.extend(reply_to.and_then(Result::err));
            return Err(DomainError::validation(problems));
        }
    };
    let mut am: merchant::ActiveModel = before.clone().into();
    am.base_currency = Set(settings.base_currency);
    am.invoice_lifetime_secs = Set(settings.invoice_lifetime_secs);
    am.underpayment_tolerance_percent = Set(Amount::new(settings.underpayment_tolerance_percent));
    if let Some(Ok(r)) = reply_to {
        am.payer_reply_to = Set(r);
    }
    am.updated_at = Set(Utc::now());
    let after = am.update(&txn).await?;
    let entry = Entry::new(&who.actor(), "merchant.settings", "merchant", after.id)
        .merchant(who.merchant_id, Some(who.environment))
        .change(Some(audited(&before)), Some(audited(&after)));
    record(&txn, entry).await?;
    txn.commit().await?;
    // This process serves the new settings at once; other API processes within the merchant
    // cache's TTL (`auth.cache_ttl_secs`), as they do for a revoked key.
    state.merchants.put(after.id, std::sync::Arc::new(after.clone()));
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_to_address_is_checked_and_empty_clears_it() {
        assert_eq!(check_reply_to("support@shop.example").unwrap().as_deref(), Some("support@shop.example"));
        assert_eq!(check_reply_to("a.b+c@mail.shop-x.example").unwrap().as_deref(), Some("a.b+c@mail.shop-x.example"));
        assert_eq!(check_reply_to("").unwrap(), None);
        for bad in
            ["support", "@shop.example", "a@shop", "a@.example", "a b@shop.example", "a@shop..example", "a@b@c.de"]
        {
            assert!(check_reply_to(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_patch_changes_only_what_it_names_and_names_every_bad_field() {
        let base = MerchantSettings::default();
        let patch = SettingsPatch { invoice_lifetime_secs: Some(900), ..Default::default() };
        let s = apply(base.clone(), &patch).unwrap();
        assert_eq!((s.base_currency.as_str(), s.invoice_lifetime_secs), ("USD", 900));
        let patch = SettingsPatch { underpayment_tolerance_percent: Some("2.50".into()), ..Default::default() };
        assert_eq!(apply(base.clone(), &patch).unwrap().underpayment_tolerance_percent, Decimal::new(25, 1));
        let bad = SettingsPatch {
            base_currency: Some("usd".into()),
            invoice_lifetime_secs: Some(59),
            underpayment_tolerance_percent: Some("50.01".into()),
            payer_reply_to: None,
        };
        let problems = apply(base.clone(), &bad).unwrap_err();
        let fields: Vec<&str> = problems.iter().map(|p| p.split(':').next().unwrap()).collect();
        assert_eq!(fields, ["base_currency", "invoice_lifetime_secs", "underpayment_tolerance_percent"]);
        for odd in ["1.234", "-1", "abc", "1e2"] {
            let p = SettingsPatch { underpayment_tolerance_percent: Some(odd.into()), ..Default::default() };
            assert!(apply(base.clone(), &p).is_err(), "{odd}");
        }
    }
}
