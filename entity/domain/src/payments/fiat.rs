//! The fiat value of a credit, recorded when the credit is made and never recomputed: what a
//! bookkeeper needs to book a crypto receipt at its value on the day (the exports' "fiat value
//! at the time of credit").
//!
//! Which fiat and which rate ([`value_at_credit`]):
//! - an invoice priced in fiat and credited in the asset it was quoted in: its own fiat currency
//!   at the rate it locked (what the payer was asked to pay);
//! - any other credit (crypto-priced invoices, static-address deposits, a settlement
//!   conversion's target asset): the invoice's fiat currency if it has one, else the merchant's
//!   base currency, at the market rate published in `exchange_rates` that is still fresh at the
//!   moment of the credit;
//! - no fresh rate: nothing is recorded (the cells stay empty), never a stale or guessed value.
//!
//! [`record`] writes the three `credited_fiat_*` columns of payments their caller has just
//! stamped credited, in the caller's transaction, so a credit and its fiat value commit together.

use std::collections::HashMap;

use chrono::Utc;
use entity::{Amount, Environment, exchange_rate, invoice, merchant, payment};
use rust_decimal::Decimal;
use sea_orm::sea_query::{CaseStatement, Expr, SimpleExpr};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

/// A credit's value in fiat: its currency, the price of one unit of the credited asset, and
/// the credited amount times that price (rounded to cents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiatAtCredit {
    pub currency: String,
    pub rate: Amount,
    pub value: Amount,
}

/// The fiat value of `amount` of `gate` credited against `inv`, by the rules above. `base` is the
/// merchant's base currency; `market(asset, fiat)` the fresh market price, if any.
pub fn value_at_credit(
    inv: &invoice::Model,
    base: &str,
    gate: &str,
    amount: Decimal,
    market: impl Fn(&str, &str) -> Option<Decimal>,
) -> Option<FiatAtCredit> {
    let (currency, rate) = match (&inv.fiat_currency, inv.exchange_rate) {
        (Some(fiat), Some(locked)) if inv.gate_id.as_deref() == Some(gate) => (fiat.clone(), locked.0),
        _ => {
            let fiat =
                inv.fiat_currency.clone().or_else(|| inv.base_currency.clone()).unwrap_or_else(|| base.to_owned());
            let asset = crate::gates::find(gate)?.asset;
            let rate = market(asset, &fiat)?;
            (fiat, rate)
        }
    };
    let value = amount.checked_mul(rate)?;
    Some(FiatAtCredit { currency, rate: Amount::new(rate), value: Amount::fiat(value) })
}

/// The recorded fiat value of a credited payment, if one was recorded.
pub fn recorded(p: &payment::Model) -> Option<FiatAtCredit> {
    Some(FiatAtCredit {
        currency: p.credited_fiat_currency.clone()?,
        rate: p.credited_fiat_rate?,
        value: p.credited_fiat_value?,
    })
}

/// Rows per `UPDATE … CASE` statement.
pub const PAYMENTS_PER_STATEMENT: usize = 200;

/// A credit whose fiat value is to be recorded: the payment (id, environment), its invoice, and
/// the credited gate and amount.
#[derive(Debug, Clone, Copy)]
pub struct Credited<'a> {
    pub payment_id: Uuid,
    pub environment: Environment,
    pub invoice: &'a invoice::Model,
    pub gate: &'a str,
    pub amount: Decimal,
}

/// Records the fiat value of each of `credited`: payments the caller stamped credited in `txn`
/// (their `credited_gate_id` and `credited_amount` set), with their invoices. The values are
/// [`values`]; one update per 200 payments writes them.
pub async fn record<C: ConnectionTrait>(txn: &C, credited: &[(&payment::Model, &invoice::Model)]) -> Result<(), DbErr> {
    let credits: Vec<Credited<'_>> = credited
        .iter()
        .filter_map(|(p, inv)| {
            Some(Credited {
                payment_id: p.id,
                environment: p.environment,
                invoice: inv,
                gate: p.credited_gate_id.as_deref()?,
                amount: p.credited_amount?.0,
            })
        })
        .collect();
    let values: Vec<(Uuid, FiatAtCredit)> = values(txn, &credits).await?.into_iter().collect();
    for chunk in values.chunks(PAYMENTS_PER_STATEMENT) {
        let mut update = payment::Entity::update_many();
        for (col, expr) in columns(chunk.iter().map(|(id, v)| (*id, v))) {
            update = update.col_expr(col, expr);
        }
        update.filter(payment::Column::Id.is_in(chunk.iter().map(|(id, _)| *id))).exec(txn).await?;
    }
    Ok(())
}

/// The fiat value of each of `credits` at this moment, by payment id (none where no fresh rate
/// gives one): one read of the fresh rates, and one of the merchants' base currencies where an
/// invoice does not name a fiat currency.
pub async fn values<C: ConnectionTrait>(
    txn: &C,
    credits: &[Credited<'_>],
) -> Result<HashMap<Uuid, FiatAtCredit>, DbErr> {
    if credits.is_empty() {
        return Ok(HashMap::new());
    }
    let now = Utc::now();
    let mut envs: Vec<Environment> = credits.iter().map(|c| c.environment).collect();
    envs.sort_by_key(|e| e.as_str());
    envs.dedup();
    let rates: HashMap<(Environment, String, String), Decimal> = exchange_rate::Entity::find()
        .filter(exchange_rate::Column::Environment.is_in(envs))
        .filter(exchange_rate::Column::ExpiresAt.gt(now))
        .all(txn)
        .await?
        .into_iter()
        .map(|r| ((r.environment, r.currency, r.fiat_currency), r.rate.0))
        .collect();
    if rates.is_empty() && credits.iter().all(|c| c.invoice.exchange_rate.is_none()) {
        return Ok(HashMap::new());
    }
    let mut merchants: Vec<Uuid> = credits
        .iter()
        .filter(|c| c.invoice.fiat_currency.is_none() && c.invoice.base_currency.is_none())
        .map(|c| c.invoice.merchant_id)
        .collect();
    merchants.sort();
    merchants.dedup();
    let bases: HashMap<Uuid, String> = if merchants.is_empty() {
        HashMap::new()
    } else {
        merchant::Entity::find()
            .filter(merchant::Column::Id.is_in(merchants))
            .all(txn)
            .await?
            .into_iter()
            .map(|m| (m.id, m.base_currency))
            .collect()
    };
    Ok(credits
        .iter()
        .filter_map(|c| {
            let base = bases.get(&c.invoice.merchant_id).map_or("USD", String::as_str);
            let market =
                |asset: &str, fiat: &str| rates.get(&(c.environment, asset.to_owned(), fiat.to_owned())).copied();
            value_at_credit(c.invoice, base, c.gate, c.amount, market).map(|v| (c.payment_id, v))
        })
        .collect())
}

/// The three `credited_fiat_*` columns of an update of payments, each set to its payment's
/// value in `values` (payment id and value; `CASE`, so keep a statement to 200 payments or so)
/// and left as it is for the others.
pub fn columns<'a>(values: impl IntoIterator<Item = (Uuid, &'a FiatAtCredit)>) -> [(payment::Column, SimpleExpr); 3] {
    let (mut currency, mut rate, mut value) = (CaseStatement::new(), CaseStatement::new(), CaseStatement::new());
    for (id, v) in values {
        currency = currency.case(payment::Column::Id.eq(id), Expr::value(v.currency.clone()));
        rate = rate.case(payment::Column::Id.eq(id), Expr::value(v.rate));
        value = value.case(payment::Column::Id.eq(id), Expr::value(v.value));
    }
    [
        (
            payment::Column::CreditedFiatCurrency,
            currency.finally(Expr::col(payment::Column::CreditedFiatCurrency)).into(),
        ),
        (payment::Column::CreditedFiatRate, rate.finally(Expr::col(payment::Column::CreditedFiatRate)).into()),
        (payment::Column::CreditedFiatValue, value.finally(Expr::col(payment::Column::CreditedFiatValue)).into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn invoice(fiat: Option<(&str, &str)>, gate: &str, base: Option<&str>) -> invoice::Model {
        let mut inv = invoice::Model::blank(Uuid::now_v7(), Uuid::now_v7(), Environment::Test, Utc::now());
        inv.gate_id = Some(gate.into());
        inv.fiat_currency = fiat.map(|(f, _)| f.to_owned());
        inv.exchange_rate = fiat.map(|(_, r)| Amount::new(d(r)));
        inv.base_currency = base.map(str::to_owned);
        inv
    }

    fn market(asset: &str, fiat: &str) -> Option<Decimal> {
        match (asset, fiat) {
            ("BTC", "USD") => Some(d("60000")),
            ("BTC", "EUR") => Some(d("55000")),
            ("USDT", "EUR") => Some(d("0.92")),
            _ => None,
        }
    }

    #[test]
    fn a_fiat_priced_invoice_credited_in_its_asset_keeps_the_rate_it_locked() {
        let inv = invoice(Some(("EUR", "54000")), "bitcoin", Some("USD"));
        let v = value_at_credit(&inv, "USD", "bitcoin", d("0.001"), market).unwrap();
        assert_eq!((v.currency.as_str(), v.rate.0, v.value.0.to_string()), ("EUR", d("54000"), "54.00".into()));
    }

    #[test]
    fn other_credits_take_the_market_rate_in_the_invoices_fiat_or_the_merchants_base() {
        // Crypto-priced invoice: its base currency (set at creation).
        let crypto = invoice(None, "bitcoin", Some("EUR"));
        let v = value_at_credit(&crypto, "USD", "bitcoin", d("0.0123"), market).unwrap();
        assert_eq!((v.currency.as_str(), v.rate.0, v.value.0.to_string()), ("EUR", d("55000"), "676.50".into()));
        // A static-address deposit's invoice names no fiat: the merchant's base currency.
        let deposit = invoice(None, "bitcoin", None);
        let v = value_at_credit(&deposit, "USD", "bitcoin", d("0.5"), market).unwrap();
        assert_eq!((v.currency.as_str(), v.value.0.to_string()), ("USD", "30000.00".into()));
        // A fiat-priced invoice converted into another asset: its fiat, that asset's market rate.
        let converted = invoice(Some(("EUR", "54000")), "bitcoin", Some("USD"));
        let v = value_at_credit(&converted, "USD", "tron_usdt", d("100"), market).unwrap();
        assert_eq!((v.currency.as_str(), v.rate.0, v.value.0.to_string()), ("EUR", d("0.92"), "92.00".into()));
    }

    #[test]
    fn without_a_fresh_rate_nothing_is_recorded() {
        let inv = invoice(None, "bitcoin", Some("GBP"));
        assert_eq!(value_at_credit(&inv, "USD", "bitcoin", d("1"), market), None);
        assert_eq!(value_at_credit(&inv, "USD", "no_such_gate", d("1"), market), None);
    }
}
