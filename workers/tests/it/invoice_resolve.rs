//! Resolving an invoice by hand (`POST /v1/invoices/{id}/resolve`), on the sandbox pipeline: an
//! underpaid, an overpaid and an expired invoice that took a late deposit are accepted as paid
//! with what was received, each announced by `invoice.resolved`, balances unchanged; what cannot
//! be resolved (pending, expired with nothing received, already paid, another merchant's) is
//! refused; and a resolve judged on an amount a deposit credited meanwhile changes nothing.

use domain::keys::Permission;
use serde_json::{Value, json};
use testkit::d;
use uuid::Uuid;

use crate::support::steps::{force_expired, pipe};

async fn resolve(p: &crate::support::pipe::Pipe, key: &str, inv: Uuid) -> testkit::Resp {
    p.app.post(&format!("/v1/invoices/{inv}/resolve"), Some(key), &json!({})).await
}

fn refused(r: &testkit::Resp, status: u16) -> Value {
    assert_eq!(r.status.as_u16(), status, "{}", r.body);
    r.body["error"].clone()
}

#[tokio::test]
async fn underpaid_overpaid_and_late_invoices_are_resolved_as_paid_with_what_was_received() {
    let p = pipe().await;
    let under = p.invoice("BTC", "bitcoin", "1").await;
    let over = p.invoice("BTC", "bitcoin", "1").await;
    p.pay(under, "0.6").await;
    p.pay(over, "1.5").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!((p.status(under).await, p.status(over).await), ("underpaid".into(), "overpaid".into()));
    assert_eq!(p.balance("bitcoin").await, (d("2.1"), d("0")));

    for (inv, received) in [(under, "0.6"), (over, "1.5")] {
        let r = resolve(&p, &p.key, inv).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        let data = r.data();
        assert_eq!((data["status"].as_str(), data["amount_paid"].as_str()), (Some("paid"), Some(received)));
        assert!(data["paid_at"].is_string(), "{data}");
        assert_eq!(p.events(inv).await.last().map(String::as_str), Some("invoice.resolved"));
        // Once: a paid invoice is not resolvable again.
        let again = refused(&resolve(&p, &p.key, inv).await, 409);
        assert_eq!(again["code"], "invoice_not_resolvable");
    }
    let sent = testkit::event_payloads(&p.app.state.db, "invoice.resolved").await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["status"], "paid", "{}", sent[0]);
    // Nothing moves on the balance: every confirmed deposit was credited already.
    assert_eq!(p.balance("bitcoin").await, (d("2.1"), d("0")));

    // Expired with nothing received: refused, naming why; then a late deposit makes it resolvable.
    let late = p.invoice("USDT", "tron", "10").await;
    force_expired(&p, late).await;
    p.sweep(std::time::Duration::from_secs(30)).await;
    assert_eq!(p.status(late).await, "expired");
    let nothing = refused(&resolve(&p, &p.key, late).await, 409);
    assert!(nothing["message"].as_str().unwrap().contains("nothing was received"), "{nothing}");
    p.pay(late, "7").await;
    p.mine_and_step("tron_usdt", 19).await;
    assert_eq!(p.status(late).await, "expired");
    let r = resolve(&p, &p.key, late).await;
    assert_eq!((r.status.as_u16(), r.data()["status"].as_str()), (200, Some("paid")), "{}", r.body);
    assert_eq!(
        p.events(late).await,
        ["invoice.expired", "invoice.late_deposit", "balance.credited", "invoice.resolved"].map(String::from)
    );

    // Pending: refused with its status named.
    let pending = p.invoice("BTC", "bitcoin", "1").await;
    let r = refused(&resolve(&p, &p.key, pending).await, 409);
    assert!(r["message"].as_str().unwrap().contains("it is pending"), "{r}");
    assert_eq!(p.status(pending).await, "pending");
}

#[tokio::test]
async fn another_merchants_invoice_a_read_only_key_and_a_stale_amount_are_refused() {
    let p = pipe().await;
    let inv = p.invoice("BTC", "bitcoin", "1").await;
    p.pay(inv, "0.5").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.status(inv).await, "underpaid");

    let (_, stranger) = p.app.test_key().await;
    assert_eq!(refused(&resolve(&p, &stranger, inv).await, 404)["code"], "not_found");
    let reader = p.app.key(p.merchant, entity::Environment::Test, &[Permission::InvoicesRead]).await;
    assert_eq!(refused(&resolve(&p, &reader, inv).await, 403)["code"], "forbidden");
    assert_eq!(p.status(inv).await, "underpaid");

    // Judged on 0.5 received; a deposit credited meanwhile (0.7 now, still short): the guarded
    // update applies nothing, so an amount the merchant never saw is never accepted.
    let stale = entity::invoice::Entity::find_by_id(inv).one(&p.app.state.db).await.unwrap().unwrap();
    p.pay(inv, "0.2").await;
    p.mine_and_step("bitcoin", 3).await;
    assert_eq!(p.get_invoice(inv).await["amount_paid"], "0.7");
    let moved = domain::invoices::lifecycle::resolve(&p.app.state.db, &stale).await.unwrap();
    assert!(moved.is_none(), "{moved:?}");
    assert_eq!(p.status(inv).await, "underpaid");
    assert!(!p.events(inv).await.contains(&"invoice.resolved".to_owned()));
}

use sea_orm::EntityTrait;
