//! The fiat value at the time of credit: every credit records, in its own transaction, the
//! fiat currency, rate and value of that moment (`domain::payments::fiat`), from the rates the
//! API publishes to `exchange_rates`; exports read what was recorded. Crypto-priced invoices and
//! static-address deposits take the market rate in the merchant's base currency, fiat-priced
//! invoices the rate they locked; without a fresh rate nothing is recorded, never a stale one.

use chrono::{Duration, Utc};
use entity::{Environment, exchange_rate, payment};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use uuid::Uuid;

use crate::support::pipe::Pipe;

/// The payment of `invoice`, as stored.
async fn payment_of(p: &Pipe, invoice: Uuid) -> payment::Model {
    payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(invoice))
        .one(&p.app.state.db)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no payment of {invoice}"))
}

/// Mines the deposits of `tron_usdt` to their 19 confirmations and runs the pipeline until
/// each is credited.
async fn confirm(p: &Pipe) {
    p.mine("tron_usdt", 19).await;
    p.scan_and_track().await;
    p.scan_and_track().await;
}

/// (currency, rate, value) recorded on the payment, as strings ("" for none).
fn recorded(pay: &payment::Model) -> (String, String, String) {
    (
        pay.credited_fiat_currency.clone().unwrap_or_default(),
        pay.credited_fiat_rate.map(|r| r.0.normalize().to_string()).unwrap_or_default(),
        pay.credited_fiat_value.map(|v| v.0.to_string()).unwrap_or_default(),
    )
}

fn triple(c: &str, r: &str, v: &str) -> (String, String, String) {
    (c.into(), r.into(), v.into())
}

/// Today's export of `kind` as rows of (column -> cell).
async fn export(p: &Pipe, kind: &str) -> Vec<std::collections::HashMap<String, String>> {
    let today = Utc::now().date_naive();
    let (from, to) = (today - chrono::Days::new(1), today + chrono::Days::new(2));
    let r = p.app.get(&format!("/v1/exports/{kind}?from={from}&to={to}"), Some(&p.key)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    let text = r.body.as_str().expect("CSV").to_owned();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    reader.records().map(|rec| header.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect()).collect()
}

#[tokio::test]
async fn each_credit_records_its_fiat_value_at_the_rate_published_then() {
    let p = Pipe::start(|_| {}).await;
    let db = &p.app.state.db;
    // The merchant keeps its books in euros.
    let r = p.app.patch("/v1/settings", Some(&p.key), &json!({"base_currency": "EUR"})).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);

    // No rate known (as if the provider had not answered since the API started): a credit
    // records no fiat value rather than a guess.
    exchange_rate::Entity::delete_many().exec(db).await.unwrap();
    let early = p.app.create_invoice_id(&p.key, json!({"currency": "USDT", "network": "tron", "amount": "10"})).await;
    p.pay(early, "10").await;
    confirm(&p).await;
    let pay = payment_of(&p, early).await;
    assert!(pay.credited_at.is_some(), "credited: {pay:?}");
    assert_eq!(recorded(&pay), triple("", "", ""));

    // The API publishes what it fetches (at start and on each refresh, as `bootstrap` does).
    p.app.state.rates.refresh(Environment::Test).await.unwrap();
    assert!(p.app.state.rates.publish(db, Environment::Test).await.unwrap() > 0);
    // A crypto-priced invoice, a static-address deposit (its invoice names no fiat) and an
    // invoice priced in dollars, credited by the tracker.
    let crypto = p.app.create_invoice_id(&p.key, json!({"currency": "USDT", "network": "tron", "amount": "20"})).await;
    let priced = p
        .app
        .create_invoice_id(
            &p.key,
            json!({"currency": "USDT", "network": "tron", "amount_fiat": "30", "fiat_currency": "USD"}),
        )
        .await;
    let a = p.app.post("/v1/addresses", Some(&p.key), &json!({"currency": "USDT", "network": "tron"})).await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.body);
    let address = a.data()["id"].as_str().unwrap().to_owned();
    p.pay(crypto, "20").await;
    p.pay(priced, "30").await;
    p.deposit(json!({"address_id": address}), "25").await;
    confirm(&p).await;
    // The sandbox prices USDT at 1 USD and 0.9 EUR.
    assert_eq!(recorded(&payment_of(&p, crypto).await), triple("EUR", "0.9", "18.00"));
    assert_eq!(recorded(&payment_of(&p, priced).await), triple("USD", "1", "30.00"), "the locked rate");
    let deposit = payment::Entity::find()
        .filter(payment::Column::InvoiceId.is_not_in([early, crypto, priced]))
        .one(db)
        .await
        .unwrap()
        .expect("the static deposit's payment");
    assert_eq!(recorded(&deposit), triple("EUR", "0.9", "22.50"), "the merchant's base currency");

    // A rate past its age is not used: published rates that were not refreshed expire.
    exchange_rate::Entity::update_many()
        .col_expr(exchange_rate::Column::ExpiresAt, Expr::value(Utc::now() - Duration::seconds(1)))
        .exec(db)
        .await
        .unwrap();
    let stale = p.app.create_invoice_id(&p.key, json!({"currency": "USDT", "network": "tron", "amount": "5"})).await;
    p.pay(stale, "5").await;
    confirm(&p).await;
    let pay = payment_of(&p, stale).await;
    assert!(pay.credited_at.is_some());
    assert_eq!(recorded(&pay), triple("", "", ""));
    // What was recorded stays as it was when the pipeline runs again.
    p.scan_and_track().await;
    assert_eq!(recorded(&payment_of(&p, crypto).await), triple("EUR", "0.9", "18.00"));

    // The exports show it: per payment, and on the ledger entry that credited it.
    let payments = export(&p, "payments").await;
    let cells = |rows: &[std::collections::HashMap<String, String>], col: &str, id: Uuid| {
        let row = rows.iter().find(|r| r[col] == id.to_string()).unwrap_or_else(|| panic!("{id} not exported"));
        (row["fiat_currency"].clone(), row["fiat_rate"].clone(), row["fiat_value_at_credit"].clone())
    };
    let crypto_pay = payment_of(&p, crypto).await.id;
    assert_eq!(cells(&payments, "id", crypto_pay), triple("EUR", "0.9", "18.00"));
    assert_eq!(cells(&payments, "id", deposit.id), triple("EUR", "0.9", "22.50"));
    assert_eq!(cells(&payments, "id", payment_of(&p, early).await.id), triple("", "", ""));
    let ledger: Vec<_> = export(&p, "ledger_entries")
        .await
        .into_iter()
        .filter(|r| r["entry_type"] == "invoice_credit" && r["bucket"] == "available")
        .collect();
    assert_eq!(cells(&ledger, "reference_id", crypto_pay), triple("EUR", "0.9", "18.00"));
    assert_eq!(cells(&ledger, "reference_id", deposit.id), triple("EUR", "0.9", "22.50"));
}
