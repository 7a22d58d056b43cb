//! What a create-invoice request must satisfy before anything is priced or written: amounts,
//! structure and bounds (every problem named by field), the settlement target, and the
//! canonical hash that tells an idempotent replay from a mismatch.

use chrono::{Duration, Utc};
use entity::Amount;
use rust_decimal::Decimal;
use sha2::{Digest, Sha256};

use super::types::CreateInvoiceRequest;
use crate::domain_error::{DomainError, DomainResult, ErrorCode};
use crate::gates;

pub const MAX_METADATA_PROPERTIES: usize = 50;
const MAX_METADATA_BYTES: usize = 16 * 1024;
pub(super) const MAX_DRAFT_LIFETIME_DAYS: i64 = 90;

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
pub(super) struct Checked {
    pub(super) crypto_amount: Option<Decimal>,
    pub(super) fiat: Option<(Decimal, String)>,
    pub(super) is_deferred: bool,
    pub(super) draft_expires_at: Option<chrono::DateTime<Utc>>,
}

/// 400-class checks, all collected so the caller sees every problem at once.
pub(super) fn check_structure(req: &CreateInvoiceRequest) -> DomainResult<Checked> {
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

/// `(target_settlement_asset, settlement_target_currency, settlement_target_network)`.
pub(super) fn resolve_settlement(req: &CreateInvoiceRequest) -> DomainResult<(String, Option<String>, Option<String>)> {
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
        // `api::error` answers Unprocessable with 422 and Invalid with 400.
        use crate::domain_error::Kind;
        assert_eq!(r(Some("nope"), None, None).unwrap_err().kind, Kind::Unprocessable);
        assert_eq!(r(None, Some("USDT"), None).unwrap_err().kind, Kind::Unprocessable);
        assert_eq!(r(Some("bitcoin"), Some("USDT"), Some("tron")).unwrap_err().kind, Kind::Invalid);
    }
}
