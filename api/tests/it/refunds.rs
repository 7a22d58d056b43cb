//! Spec 4.9 and 2.6: refunds of an invoice's credit, carried out by linked payouts.

use api::auth::Permission;
use domain::config::GateFees;
use entity::{Environment, FeeAllocation};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use testkit::race::{created_ids, send_all, tally};
use testkit::{TRON_DEST, d};
use testkit::{TestApp, assert_fields, credit_invoice};
use uuid::Uuid;

struct Setup {
    app: TestApp,
    merchant: Uuid,
    key: String,
    invoice: Uuid,
}

/// A merchant with a tron USDT invoice that credited `credited` USDT; tron_usdt fees: payout 5,
/// network 2, refund 1.
async fn setup(credited: &str) -> Setup {
    let app = TestApp::spawn_with(|c| {
        c.fees.insert("tron_usdt".into(), GateFees { payout_fee: d("5"), network_fee: d("2"), refund_fee: d("1") });
    })
    .await;
    let (merchant, key) = app.test_key().await;
    let invoice = app.create_invoice_id(&key, json!({"currency": "USDT", "network": "tron", "amount": "100"})).await;
    if credited != "0" {
        credit_invoice(&app, merchant, invoice, "tron_usdt", credited).await;
    }
    Setup { app, merchant, key, invoice }
}

impl Setup {
    fn body(&self, amount: &str) -> Value {
        json!({"invoice_id": self.invoice, "currency": "USDT", "network": "tron", "amount": amount, "destination": TRON_DEST})
    }

    async fn refund(&self, idem: &str, body: &Value) -> testkit::Resp {
        self.refund_with(&self.key, Some(idem), body).await
    }

    async fn refund_with(&self, key: &str, idem: Option<&str>, body: &Value) -> testkit::Resp {
        let mut rb = self.app.http.post(self.app.url("/v1/refunds")).header("X-API-Key", key).json(body);
        if let Some(k) = idem {
            rb = rb.header("Idempotency-Key", k);
        }
        self.app.send(rb).await
    }

    async fn balance(&self) -> (String, String) {
        self.app.available_reserved(&self.key, "tron_usdt").await
    }

    /// The merchant's refund fee allocation (it covers the refund's network fee too).
    async fn allocate(&self, a: FeeAllocation) {
        testkit::set_payout_settings(&self.app.state.db, self.merchant, Environment::Test, |s| {
            s.refund_fee_allocation = a;
        })
        .await;
    }

    /// A ledger adjustment of the merchant's tron USDT balance.
    async fn adjust(&self, amount: &str, reason: &str) {
        testkit::adjust(&self.app.state.db, self.merchant, Environment::Test, "tron_usdt", amount, reason).await;
    }

    async fn refund_count(&self) -> u64 {
        let r = self.app.get("/v1/refunds?limit=1", Some(&self.key)).await;
        r.body["meta"]["pagination"]["total"].as_u64().unwrap()
    }
}

#[tokio::test]
async fn create_links_a_reserved_payout_and_mirrors_its_status() {
    let s = setup("100").await;
    s.allocate(FeeAllocation::Customer).await;
    let r = s.refund("r-1", &s.body("40")).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    let data = r.data().clone();
    assert_fields(
        &data,
        json!({
            "status": "pending", "environment": "test", "invoice_id": s.invoice.to_string(), "currency": "USDT",
            "network": "tron", "amount": "40",
            // Customer allocation (the operator's choice): the refund fee and network fee come out
            // of what the payer gets.
            "refund_fee": "1", "refund_fee_allocation": "customer", "network_fee": "2",
            "configured_network_fee_amount": "2", "network_fee_allocation": "customer", "recipient_amount": "37",
            "merchant_debit_amount": "40", "destination": TRON_DEST,
        }),
    );
    for k in ["tx_hash", "failure_reason", "completed_at", "destination_tag"] {
        assert!(data[k].is_null(), "{k}: {data}");
    }
    assert_eq!(s.balance().await, ("60".into(), "40".into()));

    // The linked payout went through the payout path: reserved, pending approval, refund fee.
    let pid = data["payout_id"].as_str().unwrap();
    let p = s.app.get(&format!("/v1/payouts/{pid}"), Some(&s.key)).await;
    assert_eq!(p.status.as_u16(), 200);
    assert_eq!(p.data()["status"], "pending_approval");
    assert_eq!(p.data()["amount"], "40");
    assert_eq!(p.data()["fee_amount"], "1");
    assert_eq!(p.data()["recipient_amount"], "37");
    assert_eq!(p.data()["destination"], TRON_DEST);

    // GET mirrors; cancelling the payout cancels the refund and frees its share of the credit.
    let id = data["id"].as_str().unwrap();
    let g = s.app.get(&format!("/v1/refunds/{id}"), Some(&s.key)).await;
    assert_eq!(g.data(), &data);
    let c = s.app.post(&format!("/v1/payouts/{pid}/cancel"), Some(&s.key), &json!({})).await;
    assert_eq!(c.status.as_u16(), 200, "{}", c.body);
    let g = s.app.get(&format!("/v1/refunds/{id}"), Some(&s.key)).await;
    assert_eq!(g.data()["status"], "cancelled");
    assert_eq!(s.balance().await, ("100".into(), "0".into()));
    let again = s.refund("r-2", &s.body("100")).await;
    assert_eq!(again.status.as_u16(), 201, "cancelled refund's amount is refundable again: {}", again.body);

    // An operator rejection fails the refund with the reason and frees the credit too.
    let pid2: Uuid = again.data()["payout_id"].as_str().unwrap().parse().unwrap();
    domain::payouts::operator::reject(&s.app.state.db, pid2.into(), "address on a sanctions list").await.unwrap();
    let g = s.app.get(&format!("/v1/refunds/{}", again.data()["id"].as_str().unwrap()), Some(&s.key)).await;
    assert_eq!(g.data()["status"], "failed");
    assert!(g.data()["failure_reason"].as_str().unwrap().contains("sanctions"), "{}", g.body);
    assert_eq!(s.refund("r-3", &s.body("100")).await.status.as_u16(), 201);

    // Approval keeps the refund pending (its payout is not executing yet).
    let last = s.app.get("/v1/refunds?limit=1", Some(&s.key)).await.data()[0].clone();
    domain::payouts::operator::approve(&s.app.state.db, last["payout_id"].as_str().unwrap().parse().unwrap())
        .await
        .unwrap();
    let g = s.app.get(&format!("/v1/refunds/{}", last["id"].as_str().unwrap()), Some(&s.key)).await;
    assert_eq!(g.data()["status"], "pending");
}

#[tokio::test]
async fn merchant_allocation_charges_the_fees_to_the_balance() {
    let s = setup("100").await;
    testkit::set_payout_settings(&s.app.state.db, s.merchant, Environment::Test, |st| {
        st.refund_fee_allocation = FeeAllocation::Merchant;
        st.network_fee_allocation = FeeAllocation::Merchant;
    })
    .await;
    let r = s.refund("m-1", &s.body("40")).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    assert_eq!(r.data()["refund_fee_allocation"], "merchant");
    assert_eq!(r.data()["network_fee_allocation"], "merchant");
    assert_eq!(r.data()["recipient_amount"], "40");
    assert_eq!(r.data()["merchant_debit_amount"], "43");
    assert_eq!(s.balance().await, ("57".into(), "43".into()));
    // The cap is on the refunded amount, not on the fees: 60 more is still refundable, but the
    // balance (57) cannot cover 60 + 3 of fees.
    s.refund("m-2", &s.body("60")).await.assert_error(422, "insufficient_balance", Some("amount"));
    s.refund("m-3", &s.body("54")).await;
    assert_eq!(s.balance().await, ("0".into(), "100".into()));
}

#[tokio::test]
async fn idempotency_key_header_is_required_and_bounded() {
    let s = setup("100").await;
    let body = s.body("5");
    s.refund_with(&s.key, None, &body).await.assert_error(400, "validation_error", Some("Idempotency-Key"));
    s.refund_with(&s.key, Some(""), &body).await.assert_error(400, "validation_error", Some("Idempotency-Key"));
    let long = "k".repeat(256);
    s.refund_with(&s.key, Some(&long), &body).await.assert_error(400, "validation_error", Some("Idempotency-Key"));
    assert_eq!(s.refund_count().await, 0);
    assert_eq!(s.refund(&"k".repeat(255), &body).await.status.as_u16(), 201);
    assert_eq!(s.refund("k", &body).await.status.as_u16(), 201);
    assert_eq!(s.refund_count().await, 2);
}

#[tokio::test]
async fn replay_returns_the_recorded_refund_and_another_body_conflicts() {
    let s = setup("100").await;
    let first = s.refund("same", &s.body("10")).await;
    assert_eq!(first.status.as_u16(), 201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    // Same body, keys reordered and an explicit null: the same request.
    let mut reordered =
        json!({"destination": TRON_DEST, "amount": "10", "network": "tron", "currency": "USDT", "description": null});
    reordered["invoice_id"] = json!(s.invoice);
    for body in [s.body("10"), reordered] {
        let again = s.refund("same", &body).await;
        assert_eq!(again.status.as_u16(), 201, "{}", again.body);
        assert_eq!(again.headers.get("idempotent-replayed").unwrap(), "true");
        assert_eq!(again.data(), first.data());
    }
    // Merchant allocation (the default): 10 + 1 refund fee + 2 network fee reserved.
    assert_eq!(s.balance().await, ("87".into(), "13".into()), "no second reservation");
    assert_eq!(s.refund_count().await, 1);
    assert_eq!(s.app.get("/v1/payouts", Some(&s.key)).await.body["meta"]["pagination"]["total"], 1);

    let other = s.refund("same", &s.body("11")).await;
    other.assert_error(409, "idempotency_key_mismatch", Some("Idempotency-Key"));
    assert_eq!(s.balance().await, ("87".into(), "13".into()));
    // Keys are per merchant and environment: another merchant may use the same key.
    let other_key = s.app.key(s.app.merchant().await, Environment::Test, &[]).await;
    s.refund_with(&other_key, Some("same"), &s.body("10")).await.assert_error(404, "not_found", None);

    // Concurrent first uses of one key: one refund, one reservation.
    let burst =
        (0..16).map(|_| s.app.post_request("/v1/refunds", &s.key, &s.body("5")).header("Idempotency-Key", "burst"));
    assert_eq!(created_ids(&send_all(burst).answers().await).len(), 1);
    assert_eq!(s.balance().await, ("79".into(), "21".into()));
}

#[tokio::test]
async fn the_invoice_must_be_the_keys_merchant_and_environment() {
    let s = setup("100").await;
    // Another merchant's key, a live key of the same merchant, an unknown id: all 404.
    let stranger = s.app.key(s.app.merchant().await, Environment::Test, &[]).await;
    let live = s.app.key(s.merchant, Environment::Live, &[]).await;
    for key in [&stranger, &live] {
        s.refund_with(key, Some("x"), &s.body("1")).await.assert_error(404, "not_found", None);
    }
    let mut unknown = s.body("1");
    unknown["invoice_id"] = json!(Uuid::now_v7());
    s.refund("x", &unknown).await.assert_error(404, "not_found", None);
    let mut bad = s.body("1");
    bad["invoice_id"] = json!("not-a-uuid");
    s.refund("x", &bad).await.assert_error(400, "validation_error", Some("invoice_id"));
    assert_eq!(s.refund_count().await, 0);
    // Refunds themselves are scoped the same way.
    let r = s.refund("mine", &s.body("5")).await;
    let id = r.data()["id"].as_str().unwrap().to_owned();
    for key in [&stranger, &live] {
        s.app.get(&format!("/v1/refunds/{id}"), Some(key)).await.assert_error(404, "not_found", None);
        assert_eq!(s.app.get("/v1/refunds", Some(key)).await.body["meta"]["pagination"]["total"], 0);
    }
    s.app.get("/v1/refunds/nope", Some(&s.key)).await.assert_error(400, "validation_error", Some("refund_id"));
}

#[tokio::test]
async fn currency_and_network_must_be_the_credited_asset() {
    let s = setup("100").await;
    let mut b = s.body("1");
    b["network"] = json!("ethereum");
    s.refund("a", &b).await.assert_error(422, "refund_currency_mismatch", Some("currency"));
    b["currency"] = json!("BTC");
    b["network"] = json!(null);
    s.refund("b", &b).await.assert_error(422, "refund_currency_mismatch", Some("currency"));
    b["currency"] = json!("DOGE");
    s.refund("c", &b).await.assert_error(422, "unsupported_currency", Some("currency"));
    b["currency"] = json!("USDT");
    s.refund("d", &b).await.assert_error(422, "unsupported_currency", Some("network"));
    // The gate id names the asset too, and `network` may then be left out.
    b["currency"] = json!("tron_usdt");
    b["amount"] = json!("5");
    assert_eq!(s.refund("e", &b).await.status.as_u16(), 201);
    // More decimals than the gate has is refused with the field named.
    let mut b = s.body("1.0000001");
    b["currency"] = json!("tron_usdt");
    s.refund("f", &b).await.assert_error(422, "validation_error", Some("amount"));
}

#[tokio::test]
async fn amount_is_capped_by_the_credit_minus_refunds() {
    let s = setup("100").await;
    // Extra funds on the balance do not raise the cap: it is what this invoice credited.
    s.adjust("500", "f").await;
    // Not covering fees taken from the refund (customer allocation: 1 + 2): amount_out_of_range.
    s.allocate(FeeAllocation::Customer).await;
    s.refund("0", &s.body("2.5")).await.assert_error(422, "amount_out_of_range", Some("amount"));
    s.allocate(FeeAllocation::Merchant).await;
    let r = s.refund("1", &s.body("100.000001")).await;
    r.assert_error(422, "refund_exceeds_credit", Some("amount"));
    assert!(r.body["error"]["message"].as_str().unwrap().contains("refundable 100"), "{}", r.body);
    assert_eq!(s.refund("2", &s.body("60")).await.status.as_u16(), 201);
    s.refund("3", &s.body("40.5")).await.assert_error(422, "refund_exceeds_credit", Some("amount"));
    assert_eq!(s.refund("4", &s.body("40")).await.status.as_u16(), 201);
    s.refund("5", &s.body("0.000001")).await.assert_error(422, "refund_exceeds_credit", Some("amount"));
    // A second credited payment raises the cap by its amount.
    credit_invoice(&s.app, s.merchant, s.invoice, "tron_usdt", "7.5").await;
    assert_eq!(s.refund("6", &s.body("7.5")).await.status.as_u16(), 201);
    s.refund("7", &s.body("0.000001")).await.assert_error(422, "refund_exceeds_credit", Some("amount"));

    // An invoice with nothing credited has nothing to refund.
    let inv = s.app.create_invoice(&s.key, json!({"currency": "USDT", "network": "tron", "amount": "5"})).await;
    let mut b = s.body("1");
    b["invoice_id"] = inv["id"].clone();
    s.refund("8", &b).await.assert_error(422, "refund_exceeds_credit", Some("invoice_id"));
}

#[tokio::test]
async fn every_bound_of_section_8() {
    let s = setup("100").await;
    let cases: Vec<(&str, Value)> = vec![
        ("currency", json!("U".repeat(21))),
        ("network", json!("n".repeat(65))),
        ("amount", json!("1".repeat(51))),
        ("destination", json!("T".repeat(257))),
        ("destination_tag", json!("1".repeat(257))),
        ("description", json!("d".repeat(1001))),
        ("metadata", Value::Object((0..51).map(|i| (format!("k{i}"), json!(i))).collect())),
    ];
    for (field, value) in cases {
        let mut b = s.body("1");
        b[field] = value;
        s.refund(&format!("bound-{field}"), &b).await.assert_error(422, "validation_error", Some(field));
    }
    // At the bound: accepted by the bounds check (the other rules then apply).
    let mut b = s.body("5");
    b["description"] = json!("d".repeat(1000));
    b["metadata"] = Value::Object((0..50).map(|i| (format!("k{i}"), json!(i))).collect());
    let ok = s.refund("at-bound", &b).await;
    assert_eq!(ok.status.as_u16(), 201, "{}", ok.body);
    assert_eq!(ok.data()["description"].as_str().unwrap().len(), 1000);
    assert_eq!(ok.data()["metadata"].as_object().unwrap().len(), 50);
    let mut b = s.body("1");
    b["currency"] = json!("U".repeat(20));
    s.refund("cur-20", &b).await.assert_error(422, "unsupported_currency", Some("currency"));
    let mut b = s.body("1");
    b["network"] = json!("n".repeat(64));
    s.refund("net-64", &b).await.assert_error(422, "unsupported_currency", Some("network"));

    // Missing required fields are named, all at once.
    let r = s.refund("empty", &json!({})).await;
    r.assert_error(422, "validation_error", None);
    for f in ["invoice_id", "currency", "amount", "destination"] {
        assert!(r.details().iter().any(|d| d.starts_with(&format!("{f}:"))), "{f}: {}", r.body);
    }
    // Malformed JSON, wrong types and unknown fields are 400.
    let raw = s.app.http.post(s.app.url("/v1/refunds")).header("X-API-Key", &s.key).header("Idempotency-Key", "raw");
    let r = s.app.send(raw.header("content-type", "application/json").body("{\"amount\":")).await;
    r.assert_error(400, "validation_error", Some("body"));
    let mut b = s.body("1");
    b["amount"] = json!(1);
    s.refund("type", &b).await.assert_error(400, "validation_error", Some("amount"));
    let mut b = s.body("1");
    b["surprise"] = json!(true);
    s.refund("unknown", &b).await.assert_error(400, "validation_error", None);
    // Destinations follow the chain's rules.
    let mut b = s.body("1");
    b["destination"] = json!("0x52908400098527886E0F7030069857D2E4169EE7");
    s.refund("dest", &b).await.assert_error(422, "validation_error", Some("destination"));
    assert_eq!(s.balance().await, ("92".into(), "8".into()), "no partial writes: one refund of 5 + 3 of fees");
}

#[tokio::test]
async fn permissions_list_and_filters() {
    let s = setup("100").await;
    let read_only = s.app.key(s.merchant, Environment::Test, &[Permission::RefundsRead]).await;
    let write_only = s.app.key(s.merchant, Environment::Test, &[Permission::RefundsWrite]).await;
    s.refund_with(&read_only, Some("p"), &s.body("1")).await.assert_error(403, "forbidden", None);
    s.app.get("/v1/refunds", Some(&write_only)).await.assert_error(403, "forbidden", None);
    s.app.post("/v1/refunds", None, &s.body("1")).await.assert_error(401, "unauthorized", None);
    for i in 0..5 {
        let r = s.refund_with(&write_only, Some(&format!("p{i}")), &s.body("5")).await;
        assert_eq!(r.status.as_u16(), 201);
    }
    let first = s.app.get("/v1/refunds?limit=1", Some(&read_only)).await.data()[0].clone();
    s.app.post(&format!("/v1/payouts/{}/cancel", first["payout_id"].as_str().unwrap()), Some(&s.key), &json!({})).await;

    let page = s.app.get("/v1/refunds?limit=2&offset=2", Some(&read_only)).await;
    page.assert_page(5, 2, 2, true);
    let all = s.app.get("/v1/refunds?limit=100", Some(&read_only)).await;
    let created: Vec<&str> = all.data().as_array().unwrap().iter().map(|r| r["created_at"].as_str().unwrap()).collect();
    assert!(created.windows(2).all(|w| w[0] >= w[1]), "newest first: {created:?}");
    let cancelled = s.app.get("/v1/refunds?status=cancelled", Some(&read_only)).await;
    assert_eq!(cancelled.body["meta"]["pagination"]["total"], 1);
    assert_eq!(cancelled.data()[0]["id"], first["id"]);
    assert_eq!(s.app.get("/v1/refunds?status=pending", Some(&read_only)).await.body["meta"]["pagination"]["total"], 4);
    let by_invoice = s.app.get(&format!("/v1/refunds?invoice_id={}", s.invoice), Some(&read_only)).await;
    assert_eq!(by_invoice.body["meta"]["pagination"]["total"], 5);
    let other = s.app.get(&format!("/v1/refunds?invoice_id={}", Uuid::now_v7()), Some(&read_only)).await;
    assert_eq!(other.body["meta"]["pagination"]["total"], 0);
    s.app.get("/v1/refunds?status=done", Some(&read_only)).await.assert_error(400, "validation_error", Some("status"));
    s.app.get("/v1/refunds?invoice_id=x", Some(&read_only)).await.assert_error(
        400,
        "validation_error",
        Some("invoice_id"),
    );
    s.app.get("/v1/refunds?limit=101", Some(&read_only)).await.assert_error(400, "validation_error", Some("limit"));
}

/// Refunds racing payouts for one invoice's credit: the balance covers exactly 100 of the 200
/// requests, the credit caps refunds, nothing goes below zero and the ledger matches.
#[tokio::test]
async fn refunds_racing_payouts_on_one_invoice_credit() {
    let (app, m, key) = TestApp::spawn_for_races().await;
    let invoice = app.create_invoice_id(&key, json!({"currency": "USDT", "network": "tron", "amount": "100"})).await;
    credit_invoice(&app, m, invoice, "tron_usdt", "100").await;

    // Refunds (even) and payouts (odd), all at once.
    let payout = json!({"currency": "USDT", "network": "tron", "amount": "1", "destination": TRON_DEST});
    let mut refund = payout.clone();
    refund["invoice_id"] = json!(invoice);
    let requests = (0..200).map(|i| match i % 2 {
        0 => app.post_request("/v1/refunds", &key, &refund).header("Idempotency-Key", format!("race-{i}")),
        _ => app.post_request("/v1/payouts", &key, &payout),
    });
    let answers = send_all(requests).answers().await;
    let (refunds, refused_refunds) = tally(answers.iter().step_by(2), 422, "insufficient_balance");
    let (payouts, refused_payouts) = tally(answers.iter().skip(1).step_by(2), 422, "insufficient_balance");
    assert_eq!(refunds + payouts, 100, "{refunds} refunds, {payouts} payouts");
    assert_eq!(refused_refunds + refused_payouts, 100);
    assert_ledger_consistent(&app, m, "0", "100").await;
    assert_eq!(refunded(&app, invoice).await, Decimal::from(refunds));

    // Now the balance is not the limit but the credit is: fund 1000 more and race 150 refunds
    // of 1 for the invoice's remaining credit.
    let left = 100 - refunds;
    testkit::adjust(&app.state.db, m, Environment::Test, "tron_usdt", "1000", "f").await;
    let requests =
        (0..150).map(|i| app.post_request("/v1/refunds", &key, &refund).header("Idempotency-Key", format!("cap-{i}")));
    let answers = send_all(requests).answers().await;
    assert_eq!(tally(&answers, 422, "refund_exceeds_credit"), (left, 150 - left));
    assert_eq!(refunded(&app, invoice).await, d("100"));
    assert_ledger_consistent(&app, m, &(1000 - left).to_string(), &(100 + left).to_string()).await;
}

async fn refunded(app: &TestApp, invoice: Uuid) -> Decimal {
    let row = testkit::invoice_credit(&app.state.db, invoice, "tron_usdt").await;
    assert_eq!(row.credited.0, d("100"));
    row.refunded.0
}

/// Every bucket of the merchant's tron_usdt balance equals the sum of its entries, and no
/// entry ever recorded a bucket below zero.
async fn assert_ledger_consistent(app: &TestApp, m: Uuid, available: &str, reserved: &str) {
    let (b, entries) = testkit::assert_ledger_sums(&app.state.db, m, "tron_usdt").await;
    assert_eq!((b.available.0, b.reserved.0), (d(available), d(reserved)));
    assert!(entries.iter().all(|e| e.balance_after.0 >= Decimal::ZERO), "a bucket went below zero");
}

/// Spec 2.6: the merchant is charged the refund, the refund fee and the network fee. With no
/// settings saved, both fees are the merchant's: the payer receives the whole refunded amount.
#[tokio::test]
async fn refund_fees_default_to_the_merchant_so_the_payer_gets_the_full_amount() {
    let s = setup("100").await;
    let r = s.refund("default-fees", &s.body("40")).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    let data = r.data().clone();
    assert_eq!(data["refund_fee_allocation"], "merchant");
    assert_eq!(data["network_fee_allocation"], "merchant");
    assert_eq!(data["refund_fee"], "1");
    assert_eq!(data["network_fee"], "2");
    assert_eq!(data["recipient_amount"], "40", "the payer gets the full refunded amount");
    assert_eq!(data["merchant_debit_amount"], "43", "40 + 1 refund fee + 2 network fee");
    assert_eq!(s.balance().await, ("57".into(), "43".into()));
    // The linked payout carries the same allocation (the executor charges the actual network
    // fee to the merchant from it).
    let p = s.app.get(&format!("/v1/payouts/{}", data["payout_id"].as_str().unwrap()), Some(&s.key)).await;
    assert_eq!(p.data()["payout_fee_allocation"], "merchant");
    assert_eq!(p.data()["network_fee_allocation"], "merchant");
    assert_eq!(p.data()["recipient_amount"], "40");
    // The exact ledger: one reservation of 43 from available to reserved, nothing else.
    let entries = s.app.get("/v1/balances/tron_usdt/ledger?type=payout_reserve", Some(&s.key)).await;
    let mut moved: Vec<(String, String)> = entries
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["bucket"].as_str().unwrap().to_owned(), e["amount"].as_str().unwrap().to_owned()))
        .collect();
    moved.sort();
    assert_eq!(moved, [("available".into(), "-43".into()), ("reserved".into(), "43".into())]);
    assert_ledger_consistent(&s.app, s.merchant, "57", "43").await;
    // Payouts keep their own defaults (customer).
    let p = s
        .app
        .post(
            "/v1/payouts",
            Some(&s.key),
            &json!({"currency": "USDT", "network": "tron", "amount": "10", "destination": TRON_DEST}),
        )
        .await;
    assert_eq!(p.status.as_u16(), 201, "{}", p.body);
    let p = s.app.get(&format!("/v1/payouts/{}", p.data()["id"].as_str().unwrap()), Some(&s.key)).await;
    assert_eq!(
        (p.data()["payout_fee_allocation"].as_str(), p.data()["network_fee_allocation"].as_str()),
        (Some("customer"), Some("customer"))
    );
    // The operator can still choose `customer` for refunds: both fees then come out of the refund.
    s.allocate(FeeAllocation::Customer).await;
    let r = s.refund("customer-fees", &s.body("10")).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    assert_eq!(
        (r.data()["recipient_amount"].as_str(), r.data()["merchant_debit_amount"].as_str()),
        (Some("7"), Some("10"))
    );
    assert_eq!(r.data()["network_fee_allocation"], "customer");
}

/// A refund retried while the first attempt is still in flight replays that attempt (201, same
/// id), never `refund_exceeds_credit` or `insufficient_balance`, even when the credit and the
/// balance cover exactly one refund.
#[tokio::test]
async fn in_flight_retries_of_one_refund_all_replay_it() {
    let s = setup("10").await;
    // The credit covers exactly one refund of 10; the balance exactly its debit (10 + 3 of fees).
    s.adjust("3", "fees").await;
    // Hold the balance so the requests are provably in flight together, then let them go.
    let requests = (0..50)
        .map(|_| s.app.post_request("/v1/refunds", &s.key, &s.body("10")).header("Idempotency-Key", "in-flight"));
    let ids = created_ids(&s.app.send_all_held(s.merchant, 4, requests).await);
    assert_eq!(ids.len(), 1, "every retry answers with the one refund");
    assert_eq!(s.refund_count().await, 1);
    assert_eq!(s.app.get("/v1/payouts", Some(&s.key)).await.body["meta"]["pagination"]["total"], 1);
    assert_eq!(s.balance().await, ("0".into(), "13".into()), "reserved once");
    let credit = testkit::invoice_credit(&s.app.state.db, s.invoice, "tron_usdt").await;
    assert_eq!(credit.refunded.0, d("10"), "the credit is taken once");
}

/// `destination_tag: ""` is no tag: accepted on a chain without tags, stored as null.
#[tokio::test]
async fn an_empty_destination_tag_is_treated_as_absent() {
    let s = setup("100").await;
    let mut b = s.body("5");
    b["destination_tag"] = json!("");
    let r = s.refund("empty-tag", &b).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    assert!(r.data()["destination_tag"].is_null(), "{}", r.body);
    // A real tag on a chain without tags is still refused.
    b["destination_tag"] = json!("12");
    s.refund("tag", &b).await.assert_error(422, "validation_error", Some("destination_tag"));
}

/// An amount with more significant digits than a Decimal holds is refused, not rounded (it was
/// read as 5 before).
#[tokio::test]
async fn a_refund_amount_with_more_digits_than_fit_is_refused_not_rounded() {
    let s = setup("100").await;
    let r = s.refund("precise", &s.body("5.000000000000000000000000000001")).await;
    r.assert_error(422, "validation_error", Some("amount"));
    assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    assert_eq!(s.refund_count().await, 0);
    assert_eq!(s.balance().await, ("100".into(), "0".into()));
}

/// The invoice minimum and maximum (spec 2.10: per-invoice amounts) do not bound a refund: it is
/// bounded by what the invoice credited and has not refunded (spec 2.6). An overpaid invoice's
/// surplus below the gate's invoice minimum (0.5 USDT; tron_usdt invoices start at 1) is
/// refundable.
#[tokio::test]
async fn an_overpaid_surplus_below_the_invoice_minimum_can_be_refunded() {
    // The invoice asked 100 USDT and was credited 100.5.
    let s = setup("100.5").await;
    let r = s.refund("surplus", &s.body("0.5")).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    assert_fields(
        r.data(),
        json!({"amount": "0.5", "recipient_amount": "0.5", "merchant_debit_amount": "3.5", "status": "pending"}),
    );
    assert_eq!(s.balance().await, ("97".into(), "3.5".into()), "0.5 + refund fee 1 + network fee 2 reserved");
    let credit = testkit::invoice_credit(&s.app.state.db, s.invoice, "tron_usdt").await;
    assert_eq!(credit.refunded.0, d("0.5"));
    // The credit stays the bound: nothing more than what is left.
    s.refund("more", &s.body("100.000001")).await.assert_error(422, "refund_exceeds_credit", Some("amount"));
    // Fees taken from the refund must still leave the payer something.
    s.allocate(FeeAllocation::Customer).await;
    s.refund("eaten", &s.body("0.5")).await.assert_error(422, "amount_out_of_range", Some("amount"));
}

/// Spec 2.6: a completed refund's `merchant_debit_amount` is what the merchant was charged: the
/// amount, the refund fee and the actual network fee its payout reports, the payout's figure and
/// the ledger's, not the estimate reserved at creation. Run by the payout executor on the
/// sandbox chain (which charges 90 % of the estimate: 1.8 of 2).
#[tokio::test]
async fn a_completed_refund_charges_what_its_payout_and_the_ledger_charged() {
    use entity::{Bucket, ledger_entry};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    use workers::chain::Chains;
    use workers::chain::signer::Signers;
    use workers::executor::{Executor, Next};

    let app = TestApp::spawn_with(|c| {
        c.fees.insert("tron_usdt".into(), GateFees { payout_fee: d("5"), network_fee: d("2"), refund_fee: d("1") });
        c.sandbox.block_interval_ms = 0;
    })
    .await;
    let (merchant, key) = app.test_key().await;
    testkit::set_payout_settings(&app.state.db, merchant, Environment::Test, |s| {
        (s.payout_auto_approve, s.payout_delay_secs) = (true, 0);
    })
    .await;
    let invoice = app.create_invoice_id(&key, json!({"currency": "USDT", "network": "tron", "amount": "100"})).await;
    credit_invoice(&app, merchant, invoice, "tron_usdt", "100").await;
    let body =
        json!({"invoice_id": invoice, "currency": "USDT", "network": "tron", "amount": "40", "destination": TRON_DEST});
    let r = app.post_idempotent("/v1/refunds", &key, "charged", &body).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    assert_eq!(r.data()["merchant_debit_amount"], "43", "the estimate: 40 + 1 + 2");
    let refund_id = r.data()["id"].as_str().unwrap().to_owned();
    let payout_id = Uuid::parse_str(r.data()["payout_id"].as_str().unwrap()).unwrap();

    let db = app.state.db.clone();
    let executor = Executor {
        chains: Chains::new(&db, &app.state.config.sandbox),
        signers: Signers::sandbox(),
        recheck: std::time::Duration::from_millis(10),
        db,
    };
    assert_ne!(executor.execute(payout_id).await.unwrap(), Next::Done, "broadcast, not yet confirmed");
    let tron_usdt = domain::gates::find("tron_usdt").unwrap();
    domain::chain::sandbox::SandboxChain::new(app.state.db.clone(), tron_usdt, 0).mine(19).await.unwrap();
    assert_eq!(executor.execute(payout_id).await.unwrap(), Next::Done);

    let refund = app.get(&format!("/v1/refunds/{refund_id}"), Some(&key)).await.data().clone();
    let payout = app.get(&format!("/v1/payouts/{payout_id}"), Some(&key)).await.data().clone();
    assert_eq!((refund["status"].as_str(), payout["status"].as_str()), (Some("completed"), Some("completed")));
    assert_eq!(refund["network_fee"], "1.8");
    assert_eq!(payout["merchant_debit_amount"], "42.8", "40 + 1 + the actual 1.8");
    assert_eq!(refund["merchant_debit_amount"], payout["merchant_debit_amount"], "{refund}");
    // The ledger charged the same: what left `available` for this payout, net of the estimate's
    // unused part that came back.
    let entries = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::ReferenceId.eq(payout_id))
        .filter(ledger_entry::Column::Bucket.eq(Bucket::Available))
        .all(&app.state.db)
        .await
        .unwrap();
    let charged: Decimal = -entries.iter().map(|e| e.amount.0).sum::<Decimal>();
    assert_eq!(charged, d("42.8"), "{entries:?}");
    assert_ledger_consistent(&app, merchant, "57.2", "0").await;
}
