//! The printable receipt of a paid invoice (`GET /checkout/{id}/receipt`): server-rendered
//! HTML in the payer's language, no script, printable through the stylesheet's `@media print`.
//!
//! Safe to share: it shows only what the payer already knows (merchant name, description, the
//! amount in crypto and fiat, each credited transaction, the paid time and the invoice id), never
//! the invoice's metadata, external id, merchant ids or redirect URL. Every merchant-provided
//! string is HTML-escaped.

use chrono::{DateTime, Utc};
use entity::{InvoiceStatus, PaymentStatus, invoice, payment};
use rust_decimal::{Decimal, RoundingStrategy};

use domain::gates;
use domain::messages::{escape_html as escape, fill_in};

const TEMPLATE: &str = include_str!("assets/receipt.html");

/// What a receipt shows, read from the invoice and its payments.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub invoice_id: String,
    pub merchant_name: String,
    pub description: Option<String>,
    pub amount: Decimal,
    pub asset: String,
    /// The network's common name (`BNB Smart Chain`).
    pub network: String,
    pub fiat: Option<(Decimal, String)>,
    pub paid_at: Option<DateTime<Utc>>,
    /// (tx hash, amount, time) of each credited payment.
    pub transactions: Vec<(String, Decimal, DateTime<Utc>)>,
}

impl Receipt {
    /// The receipt of `inv`; `None` unless it is paid or overpaid.
    pub fn of(inv: &invoice::Model, merchant_name: &str, pays: &[payment::Model]) -> Option<Receipt> {
        if !matches!(inv.status, InvoiceStatus::Paid | InvoiceStatus::Overpaid) {
            return None;
        }
        let gate = inv.gate_id.as_deref().and_then(gates::find);
        Some(Receipt {
            invoice_id: inv.id.to_string(),
            merchant_name: merchant_name.to_owned(),
            description: inv.description.clone(),
            amount: inv.amount_paid.0,
            asset: gate.map_or_else(|| inv.currency.clone().unwrap_or_default(), |g| g.asset.to_owned()),
            network: gate.map_or_else(
                || inv.network.clone().map(|n| gates::network_name(&n).to_owned()).unwrap_or_default(),
                |g| g.network_name().to_owned(),
            ),
            fiat: inv.amount_fiat.zip(inv.fiat_currency.clone()).map(|(a, c)| (a.0, c)),
            paid_at: inv.paid_at,
            transactions: pays
                .iter()
                .filter(|p| p.status == PaymentStatus::Confirmed)
                .map(|p| (p.tx_hash.clone(), p.amount.0, p.confirmed_at.unwrap_or(p.detected_at)))
                .collect(),
        })
    }
}

/// Digits after the decimal point of a fiat currency (ISO 4217 minor units; 2 unless listed).
fn minor_units(currency: &str) -> u32 {
    match currency {
        "JPY" | "KRW" | "VND" | "CLP" | "ISK" | "UGX" | "XAF" | "XOF" | "PYG" => 0,
        "BHD" | "KWD" | "OMR" | "JOD" | "TND" => 3,
        _ => 2,
    }
}

/// A fiat amount as a payer of `lang` writes it: "€49.90" in English, "49,90 €" in German,
/// French, Spanish and Portuguese (the server-side twin of the page's `Intl.NumberFormat`).
pub fn format_fiat(lang: &str, amount: Decimal, currency: &str) -> String {
    let digits = minor_units(currency);
    let fixed = format!(
        "{:.*}",
        digits as usize,
        amount.round_dp_with_strategy(digits, RoundingStrategy::MidpointAwayFromZero)
    );
    let (sign, fixed) = fixed.strip_prefix('-').map_or(("", fixed.as_str()), |f| ("-", f));
    let (int, frac) = fixed.split_once('.').unwrap_or((fixed, ""));
    let (group, point) = match lang {
        "en" => (",", "."),
        "fr" => ("\u{202f}", ","),
        _ => (".", ","),
    };
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push_str(group);
        }
        grouped.push(c);
    }
    let number = if frac.is_empty() { grouped } else { format!("{grouped}{point}{frac}") };
    let symbol = match currency {
        "EUR" => "€",
        "USD" => "$",
        "GBP" => "£",
        "JPY" => "¥",
        other => other,
    };
    let is_sign = symbol != currency;
    match (lang, is_sign) {
        ("en", true) => format!("{sign}{symbol}{number}"),
        ("en", false) => format!("{sign}{symbol}\u{a0}{number}"),
        _ => format!("{sign}{number}\u{a0}{symbol}"),
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// One `<div><dt>…</dt><dd>…</dd></div>` row; `value` is HTML already.
fn row(label: &str, value: &str) -> String {
    format!("<div><dt>{}</dt><dd>{value}</dd></div>\n", escape(label))
}

/// The receipt page in `lang`; `lang_switch` is the page's language links (HTML).
pub fn render(r: &Receipt, lang: &str, lang_switch: &str) -> String {
    let t = |key: &str| fill_in(lang, key, &[]);
    let mut rows = String::new();
    rows.push_str(&row(&t("receipt_merchant"), &escape(&r.merchant_name)));
    if let Some(d) = r.description.as_deref().filter(|d| !d.is_empty()) {
        rows.push_str(&row(&t("receipt_description"), &escape(d)));
    }
    rows.push_str(&row(
        &t("receipt_amount"),
        &format!("<strong>{} {}</strong>", escape(&r.amount.normalize().to_string()), escape(&r.asset)),
    ));
    rows.push_str(&row(&t("receipt_network"), &escape(&r.network)));
    if let Some((amount, currency)) = &r.fiat {
        rows.push_str(&row(&t("receipt_fiat"), &escape(&format_fiat(lang, *amount, currency))));
    }
    if let Some(at) = r.paid_at {
        rows.push_str(&row(&t("receipt_paid_at"), &escape(&time(at))));
    }
    rows.push_str(&row(&t("receipt_invoice"), &format!("<code>{}</code>", escape(&r.invoice_id))));
    let mut txs = String::new();
    for (hash, amount, at) in &r.transactions {
        txs.push_str(&format!(
            "<tr><td><code>{}</code></td><td>{} {}</td><td>{}</td></tr>\n",
            escape(hash),
            escape(&amount.normalize().to_string()),
            escape(&r.asset),
            escape(&time(*at)),
        ));
    }
    super::fill(
        TEMPLATE,
        &[
            ("LANG", lang),
            ("LANG_SWITCH", lang_switch),
            ("TITLE", &escape(&t("receipt_title"))),
            ("HEADING", &escape(&fill_in(lang, "pay_to", &[("merchant", &r.merchant_name)]))),
            ("ROWS", &rows),
            ("TX_TITLE", &escape(&t("receipt_transactions"))),
            ("TX_HASH", &escape(&t("receipt_tx_hash"))),
            ("TX_AMOUNT", &escape(&t("receipt_tx_amount"))),
            ("TX_TIME", &escape(&t("receipt_tx_time"))),
            ("TX_ROWS", &txs),
            ("PRINT_HINT", &escape(&t("receipt_print_hint"))),
            ("BACK", &escape(&t("receipt_back"))),
            ("BACK_HREF", &escape(&format!("/checkout/{}?lang={lang}", r.invoice_id))),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn receipt(description: &str) -> Receipt {
        Receipt {
            invoice_id: "0195b5a4-0000-7000-8000-000000000001".into(),
            merchant_name: "Acme <b>& Co</b>".into(),
            description: Some(description.into()),
            amount: Decimal::from_str("52.31").unwrap(),
            asset: "USDT".into(),
            network: "BNB Smart Chain".into(),
            fiat: Some((Decimal::from_str("49.9").unwrap(), "EUR".into())),
            paid_at: Some(DateTime::from_str("2026-11-27T17:40:00Z").unwrap()),
            transactions: vec![(
                "0xabc".into(),
                Decimal::from_str("52.31").unwrap(),
                DateTime::from_str("2026-11-27T17:39:00Z").unwrap(),
            )],
        }
    }

    #[test]
    fn fiat_in_each_locale() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        assert_eq!(format_fiat("en", d("49.9"), "EUR"), "€49.90");
        assert_eq!(format_fiat("de", d("49.9"), "EUR"), "49,90\u{a0}€");
        assert_eq!(format_fiat("en", d("1234567.5"), "USD"), "$1,234,567.50");
        assert_eq!(format_fiat("de", d("1234.5"), "USD"), "1.234,50\u{a0}$");
        assert_eq!(format_fiat("en", d("1500"), "JPY"), "¥1,500");
        assert_eq!(format_fiat("en", d("10"), "CHF"), "CHF\u{a0}10.00");
        assert_eq!(format_fiat("fr", d("1000.005"), "EUR"), "1\u{202f}000,01\u{a0}€");
    }

    #[test]
    fn merchant_strings_are_escaped() {
        let html = render(&receipt("<script>alert(1)</script> \"quoted\""), "en", "");
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot;"), "{html}");
        assert!(html.contains("Acme &lt;b&gt;&amp; Co&lt;/b&gt;"), "{html}");
        assert!(!html.contains("<script"), "no script at all on the receipt");
        assert!(html.contains("52.31 USDT") && html.contains("BNB Smart Chain") && html.contains("€49.90"));
        assert!(html.contains("0xabc") && html.contains("2026-11-27 17:40:00 UTC"));
        assert!(!html.contains("{{"), "every placeholder filled");
    }

    #[test]
    fn in_german() {
        let html = render(&receipt("Bestellung"), "de", "");
        assert!(html.contains("<html lang=\"de\">"));
        assert!(html.contains("Zahlungsbeleg") && html.contains("49,90\u{a0}€"), "{html}");
    }
}
