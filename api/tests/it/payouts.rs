//! Spec 4.5-4.8 and 3.2: payouts, their reservation and release.

use std::collections::HashSet;

use api::auth::Permission;
use domain::config::GateFees;
use entity::{Environment, FeeAllocation};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::race::{created_ids, send_all, tally};
use testkit::{TRON_DEST, d};
use uuid::Uuid;

const BTC_TESTNET: &str = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx";
const XRP_DEST: &str = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh";

/// A merchant with a test key and `fund` USDT (tron) available; tron_usdt fees 1 + 2.
async fn setup(fund: &str) -> (TestApp, Uuid, String) {
    let app = TestApp::spawn_with(|c| {
        c.fees.insert(
            "tron_usdt".into(),
            GateFees { payout_fee: d("1"), network_fee: d("2"), refund_fee: Decimal::ZERO },
        );
    })
    .await;
    let (m, key) = app.test_key().await;
    if fund != "0" {
        testkit::fund(&app.state.db, m, Environment::Test, "tron_usdt", fund).await;
    }
    (app, m, key)
}

fn payout(amount: &str) -> Value {
    json!({"currency": "USDT", "network": "tron", "amount": amount, "destination": TRON_DEST})
}

#[tokio::test]
async fn create_reserves_and_returns_the_short_set() {
    let (app, _, key) = setup("100").await;
    let r = app.post("/v1/payouts", Some(&key), &json!({"currency": "tron_usdt", "amount": "10", "destination": TRON_DEST, "description": "supplier", "metadata": {"po": "7"}})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let p = r.data();
    for f in [
        "id",
        "currency",
        "network",
        "amount",
        "amount_in_base_currency",
        "network_fee",
        "fee_amount",
        "destination",
        "destination_tag",
        "status",
        "environment",
        "tx_hash",
        "idempotency_key",
        "description",
        "executable_at",
        "completed_at",
        "created_at",
    ] {
        assert!(p.get(f).is_some(), "{f} missing");
    }
    for f in [
        "recipient_amount",
        "merchant_debit_amount",
        "payout_fee_allocation",
        "configured_network_fee_amount",
        "network_fee_allocation",
    ] {
        assert!(p.get(f).is_none(), "{f} is get-only");
    }
    assert_eq!(p["status"], "pending_approval");
    assert_eq!((p["currency"].as_str(), p["network"].as_str()), (Some("USDT"), Some("tron")));
    assert_eq!((p["fee_amount"].as_str(), p["network_fee"].as_str()), (Some("1"), Some("2")));
    assert_eq!(p["amount_in_base_currency"], "10.00");
    // Customer allocation (default): the recipient gets 10 - 1 - 2, the merchant is debited 10.
    let id = p["id"].as_str().unwrap();
    let full = app.get(&format!("/v1/payouts/{id}"), Some(&key)).await;
    assert_eq!(full.status, 200);
    let f = full.data();
    assert_eq!(f["recipient_amount"], "7");
    assert_eq!(f["merchant_debit_amount"], "10");
    assert_eq!(
        (f["payout_fee_allocation"].as_str(), f["network_fee_allocation"].as_str()),
        (Some("customer"), Some("customer"))
    );
    assert_eq!(f["configured_network_fee_amount"], "2");
    assert_eq!(f["metadata"], json!({"po": "7"}));
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("90".into(), "10".into()));
    let ledger = app.get("/v1/balances/tron_usdt/ledger?type=payout_reserve", Some(&key)).await;
    let entries = ledger.data().as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e["reference_type"] == "payout" && e["reference_id"] == id));
}

#[tokio::test]
async fn merchant_allocation_adds_fees_to_the_debit() {
    let (app, m, key) = setup("100").await;
    testkit::set_payout_settings(&app.state.db, m, Environment::Test, |s| {
        s.payout_fee_allocation = FeeAllocation::Merchant;
        s.network_fee_allocation = FeeAllocation::Merchant;
    })
    .await;
    let p = app.post("/v1/payouts", Some(&key), &payout("10")).await;
    let full = app.get(&format!("/v1/payouts/{}", p.data()["id"].as_str().unwrap()), Some(&key)).await;
    assert_eq!(
        (full.data()["recipient_amount"].as_str(), full.data()["merchant_debit_amount"].as_str()),
        (Some("10"), Some("13"))
    );
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("87".into(), "13".into()));
    // A customer-allocated fee larger than the amount leaves nothing to send.
    let (app2, _, key2) = setup("100").await;
    app2.post("/v1/payouts", Some(&key2), &payout("3")).await.assert_error(422, "amount_out_of_range", Some("amount"));
}

#[tokio::test]
async fn every_bound_of_section_8() {
    let (app, _, key) = setup("1000").await;
    let base = payout("5");
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let meta51: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!(i))).collect();
    let meta50: serde_json::Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!(i))).collect();
    for (body, field) in [
        (with("currency", json!("X".repeat(21))), "currency"),
        (with("amount", json!(format!("5.{}", "0".repeat(49)))), "amount"), // 51 characters
        (with("destination", json!("T".repeat(257))), "destination"),
        (with("destination_tag", json!("1".repeat(257))), "destination_tag"),
        (with("description", json!("d".repeat(1001))), "description"),
        (with("metadata", json!(meta51)), "metadata"),
        (with("idempotency_key", json!("k".repeat(256))), "idempotency_key"),
        (json!({"network": "tron", "amount": "5", "destination": TRON_DEST}), "currency"),
        (json!({"currency": "USDT", "network": "tron", "destination": TRON_DEST}), "amount"),
        (json!({"currency": "USDT", "network": "tron", "amount": "5"}), "destination"),
        (with("amount", json!("-5")), "amount"),
        (with("amount", json!("5.0000001")), "amount"),
    ] {
        app.post("/v1/payouts", Some(&key), &body).await.assert_error(422, "validation_error", Some(field));
    }
    // At the bounds: accepted.
    let ok = app.post("/v1/payouts", Some(&key), &with("description", json!("d".repeat(1000)))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    let ok = app.post("/v1/payouts", Some(&key), &with("metadata", json!(meta50))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    let ok = app.post("/v1/payouts", Some(&key), &with("idempotency_key", json!("k".repeat(255)))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    // A 50-character amount is within the bound (the value itself is then checked).
    let ok = app.post("/v1/payouts", Some(&key), &with("amount", json!(format!("5.{}", "0".repeat(48))))).await; // 50
    assert_eq!(ok.status, 201, "{}", ok.body);
    // Malformed JSON and wrong types are 400.
    app.post_raw("/v1/payouts", &key, "{\"currency\":").await.assert_error(400, "validation_error", Some("body"));
    app.post("/v1/payouts", Some(&key), &with("amount", json!(5))).await.assert_error(
        400,
        "validation_error",
        Some("amount"),
    );
    app.post("/v1/payouts", Some(&key), &with("extra", json!(1))).await.assert_error(
        400,
        "validation_error",
        Some("extra"),
    );
    // Nothing was reserved by the refused requests: four payouts of 5.
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("980".into(), "20".into()));
}

#[tokio::test]
async fn destinations_follow_the_chain_rules() {
    let (app, m, key) = TestApp::with_test_key().await;
    for (gate, amt) in [("bitcoin", "1"), ("xrp", "100"), ("tron_usdt", "100"), ("ethereum", "1")] {
        testkit::fund(&app.state.db, m, Environment::Test, gate, amt).await;
    }
    let post = |b: Value| app.post_owned("/v1/payouts", &key, b);
    assert_eq!(post(json!({"currency": "BTC", "amount": "0.01", "destination": BTC_TESTNET})).await.status, 201);
    // A mainnet address in the test environment, a broken checksum, a tag on bitcoin.
    post(json!({"currency": "BTC", "amount": "0.01", "destination": "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"}))
        .await
        .assert_error(422, "validation_error", Some("destination"));
    post(json!({"currency": "BTC", "amount": "0.01", "destination": "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsy"}))
        .await
        .assert_error(422, "validation_error", Some("destination"));
    post(json!({"currency": "BTC", "amount": "0.01", "destination": BTC_TESTNET, "destination_tag": "5"}))
        .await
        .assert_error(422, "validation_error", Some("destination_tag"));
    // XRP takes a numeric destination tag.
    let r = post(json!({"currency": "XRP", "amount": "10", "destination": XRP_DEST, "destination_tag": "12345"})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.data()["destination_tag"], "12345");
    post(json!({"currency": "XRP", "amount": "10", "destination": XRP_DEST, "destination_tag": "abc"}))
        .await
        .assert_error(422, "validation_error", Some("destination_tag"));
    post(json!({"currency": "ETH", "network": "ethereum", "amount": "0.1", "destination": "0x9858EfFD232B4033E47d90003D41EC34EcaEda95"})).await.assert_error(422, "validation_error", Some("destination"));
    assert_eq!(post(json!({"currency": "ethereum", "amount": "0.1", "destination": "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"})).await.status, 201);
    post(json!({"currency": "USDT", "amount": "5", "destination": TRON_DEST})).await.assert_error(
        422,
        "unsupported_currency",
        Some("network"),
    );
    post(json!({"currency": "DOGE", "amount": "5", "destination": TRON_DEST})).await.assert_error(
        422,
        "unsupported_currency",
        Some("currency"),
    );
}

#[tokio::test]
async fn limits_balance_and_gate_status() {
    let app = TestApp::spawn_with(|c| testkit::take_test_gate_offline(c, "tron")).await;
    let (m, key) = app.test_key().await;
    testkit::fund(&app.state.db, m, Environment::Test, "tron_usdt", "200000").await;
    app.post("/v1/payouts", Some(&key), &payout("0.99")).await.assert_error(422, "amount_out_of_range", Some("amount"));
    app.post("/v1/payouts", Some(&key), &payout("100000.01")).await.assert_error(
        422,
        "amount_out_of_range",
        Some("amount"),
    );
    let r =
        app.post("/v1/payouts", Some(&key), &json!({"currency": "TRX", "amount": "5", "destination": TRON_DEST})).await;
    r.assert_error(503, "gate_offline", None);
    // More than the balance: refused, nothing reserved.
    let (_, poor) = app.test_key().await;
    app.post("/v1/payouts", Some(&poor), &payout("5")).await.assert_error(422, "insufficient_balance", Some("amount"));
    assert_eq!(app.available_reserved(&poor, "tron_usdt").await, ("0".into(), "0".into()));
    // Auth and permissions.
    app.post("/v1/payouts", None, &payout("5")).await.assert_error(401, "unauthorized", None);
    let read_only = app.key(m, Environment::Test, &[Permission::PayoutsRead]).await;
    app.post("/v1/payouts", Some(&read_only), &payout("5")).await.assert_error(403, "forbidden", None);
    let write_only = app.key(m, Environment::Test, &[Permission::PayoutsWrite]).await;
    app.get("/v1/payouts", Some(&write_only)).await.assert_error(403, "forbidden", None);
}

#[tokio::test]
async fn repeated_idempotency_key_returns_the_existing_payout() {
    let (app, _, key) = setup("100").await;
    let mut body = payout("10");
    body["idempotency_key"] = json!("po-1");
    let first = app.create("/v1/payouts", &key, body.clone()).await;
    let again = app.post("/v1/payouts", Some(&key), &body).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.data()["id"], first["id"]);
    // Concurrent repeats: still one payout and one reservation.
    body["idempotency_key"] = json!("po-2");
    let answers = send_all((0..16).map(|_| app.post_request("/v1/payouts", &key, &body))).answers().await;
    let ids: HashSet<&str> = answers.iter().map(|(_, b)| b["data"]["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("80".into(), "20".into()));
}

#[tokio::test]
async fn cancel_approve_reject_and_auto_approval() {
    let (app, m, key) = setup("100").await;
    let create = |amount: &str| app.post_owned("/v1/payouts", &key, payout(amount));
    let a = create("10").await.data()["id"].as_str().unwrap().to_owned();
    let r = app.post(&format!("/v1/payouts/{a}/cancel"), Some(&key), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.data()["status"], "cancelled");
    assert!(r.data().get("recipient_amount").is_none(), "cancel returns the short set");
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("100".into(), "0".into()));
    app.post(&format!("/v1/payouts/{a}/cancel"), Some(&key), &json!({})).await.assert_error(
        409,
        "payout_not_cancellable",
        None,
    );

    // Operator approval, then cancel from approved.
    let b: Uuid = create("20").await.data()["id"].as_str().unwrap().parse().unwrap();
    let approved = domain::payouts::operator::approve(&app.state.db, b.into()).await.unwrap();
    assert_eq!(approved.status, entity::PayoutStatus::Approved);
    assert!(approved.executable_at.is_some());
    assert!(domain::payouts::operator::approve(&app.state.db, b.into()).await.is_err(), "approving twice");
    assert_eq!(
        app.post(&format!("/v1/payouts/{b}/cancel"), Some(&key), &json!({})).await.data()["status"],
        "cancelled"
    );

    // Operator rejection: failed with the reason, funds released.
    let c: Uuid = create("30").await.data()["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("70".into(), "30".into()));
    let rejected = domain::payouts::operator::reject(&app.state.db, c.into(), "unknown supplier").await.unwrap();
    assert_eq!(rejected.status, entity::PayoutStatus::Failed);
    assert_eq!(rejected.failure_reason.as_deref(), Some("rejected by operator: unknown supplier"));
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("100".into(), "0".into()));
    let got = app.get(&format!("/v1/payouts/{c}"), Some(&key)).await;
    assert_eq!(got.data()["status"], "failed");
    assert_eq!(got.data()["failure_reason"], "rejected by operator: unknown supplier");

    // Once executing, cancel is refused and the reservation stays.
    let e: Uuid = create("5").await.data()["id"].as_str().unwrap().parse().unwrap();
    {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
        let res = entity::payout::Entity::update_many()
            .col_expr(entity::payout::Column::Status, Expr::value("processing"))
            .filter(entity::payout::Column::Id.eq(e))
            .exec(&app.state.db)
            .await
            .unwrap();
        assert_eq!(res.rows_affected, 1);
    }
    assert_eq!(app.get(&format!("/v1/payouts/{e}"), Some(&key)).await.data()["status"], "processing");
    app.post(&format!("/v1/payouts/{e}/cancel"), Some(&key), &json!({})).await.assert_error(
        409,
        "payout_not_cancellable",
        None,
    );
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("95".into(), "5".into()));

    // Another merchant and the live environment: 404.
    let (_, other) = app.test_key().await;
    let live = app.key(m, Environment::Live, &[]).await;
    for k in [&other, &live] {
        app.get(&format!("/v1/payouts/{b}"), Some(k)).await.assert_error(404, "not_found", None);
        app.post(&format!("/v1/payouts/{b}/cancel"), Some(k), &json!({})).await.assert_error(404, "not_found", None);
    }
    app.get("/v1/payouts/nope", Some(&key)).await.assert_error(400, "validation_error", Some("payout_id"));

    // Auto-approval with a delay.
    testkit::set_payout_settings(&app.state.db, m, Environment::Test, |s| {
        s.payout_auto_approve = true;
        s.payout_delay_secs = 600;
    })
    .await;
    let auto = create("5").await;
    assert_eq!(auto.data()["status"], "approved");
    let exec = chrono::DateTime::parse_from_rfc3339(auto.data()["executable_at"].as_str().unwrap()).unwrap();
    let created = chrono::DateTime::parse_from_rfc3339(auto.data()["created_at"].as_str().unwrap()).unwrap();
    assert_eq!((exec - created).num_seconds(), 600);

    // Listing: newest first, status filter, paging.
    let all = app.get("/v1/payouts", Some(&key)).await;
    assert_eq!(all.body["meta"]["pagination"]["total"], 5);
    assert_eq!(all.data()[0]["status"], "approved");
    assert!(all.data()[0].get("recipient_amount").is_some(), "lists carry the full set");
    assert_eq!(app.get("/v1/payouts?status=cancelled", Some(&key)).await.body["meta"]["pagination"]["total"], 2);
    assert_eq!(
        app.get("/v1/payouts?limit=2&offset=4", Some(&key)).await.body["meta"]["pagination"],
        json!({"total": 5, "limit": 2, "offset": 4, "has_more": false})
    );
    app.get("/v1/payouts?status=done", Some(&key)).await.assert_error(400, "validation_error", Some("status"));
    app.get("/v1/payouts?limit=0", Some(&key)).await.assert_error(400, "validation_error", Some("limit"));
}

/// 200 simultaneous payout requests against a balance that covers exactly 100 of them.
#[tokio::test]
async fn two_hundred_racing_payouts_exactly_one_hundred_succeed() {
    let (app, m, key) = TestApp::spawn_for_races().await;
    testkit::fund(&app.state.db, m, Environment::Test, "tron_usdt", "100").await;
    let answers = send_all((0..200).map(|_| app.post_request("/v1/payouts", &key, &payout("1")))).answers().await;
    assert_eq!(tally(&answers, 422, "insufficient_balance"), (100, 100));
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("0".into(), "100".into()));
    // The ledger sums match the balance row.
    let entries = app.get("/v1/balances/tron_usdt/ledger?limit=100&type=payout_reserve", Some(&key)).await;
    assert_eq!(entries.body["meta"]["pagination"]["total"], 200);
    assert_eq!(app.get("/v1/payouts?limit=1", Some(&key)).await.body["meta"]["pagination"]["total"], 100);
}

/// A payout retried while the first attempt is still in flight replays that attempt (201, same
/// id), never `insufficient_balance`, even when the balance covers exactly one payout.
#[tokio::test]
async fn in_flight_retries_of_one_payout_all_replay_it() {
    let (app, m, key) = setup("10").await;
    let mut body = payout("10");
    body["idempotency_key"] = json!("in-flight");
    // Hold the balance so the requests are provably in flight together (each past its replay
    // lookup), then let them go.
    let requests = (0..50).map(|_| app.post_request("/v1/payouts", &key, &body));
    let ids = created_ids(&app.send_all_held(m, 4, requests).await);
    assert_eq!(ids.len(), 1, "every retry answers with the one payout");
    assert_eq!(app.get("/v1/payouts", Some(&key)).await.body["meta"]["pagination"]["total"], 1);
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("0".into(), "10".into()), "reserved once");
    let entries = app.get("/v1/balances/tron_usdt/ledger?type=payout_reserve", Some(&key)).await;
    assert_eq!(entries.body["meta"]["pagination"]["total"], 2, "one reservation: two entries");
}

/// An amount with more significant digits than a Decimal holds is refused naming the field,
/// never rounded (`5.000000000000000000000000000001` used to become a payout of 5).
#[tokio::test]
async fn an_amount_with_more_digits_than_fit_is_refused_not_rounded() {
    let (app, _, key) = setup("100").await;
    for amount in ["5.000000000000000000000000000001", "0.0000000000000000000000000000001"] {
        let r = app.post("/v1/payouts", Some(&key), &payout(amount)).await;
        r.assert_error(422, "validation_error", Some("amount"));
        assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    }
    assert_eq!(app.get("/v1/payouts", Some(&key)).await.body["meta"]["pagination"]["total"], 0);
    assert_eq!(app.available_reserved(&key, "tron_usdt").await, ("100".into(), "0".into()));
}

/// `destination_tag: ""` is no tag: accepted on a chain without tags and stored as null; on a
/// tag chain (XRP) it is the same as leaving the tag out.
#[tokio::test]
async fn an_empty_destination_tag_is_treated_as_absent() {
    let (app, _, key) = setup("100").await;
    let mut body = payout("5");
    body["destination_tag"] = json!("");
    let r = app.post("/v1/payouts", Some(&key), &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.data()["destination_tag"].is_null(), "{}", r.body);
    body["destination_tag"] = json!("7");
    app.post("/v1/payouts", Some(&key), &body).await.assert_error(422, "validation_error", Some("destination_tag"));
    // XRP: an empty tag is no tag (the gate itself may refuse the request for other reasons,
    // never for the tag).
    let xrp = json!({"currency": "XRP", "amount": "5", "destination": XRP_DEST, "destination_tag": ""});
    let r = app.post("/v1/payouts", Some(&key), &xrp).await;
    assert!(!r.details().iter().any(|d| d.starts_with("destination_tag:")), "{}", r.body);
}
