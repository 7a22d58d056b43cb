//! Spec 4.1-4.4: invoices.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use domain::chain::address::{AddressFamily, ChainNet, validate_address};
use entity::Environment;
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::race::{created_ids, send_all};

/// Every field of spec 2.2.
const INVOICE_FIELDS: [&str; 36] = [
    "id",
    "merchant_id",
    "currency",
    "network",
    "amount_requested",
    "amount_paid",
    "amount_usd",
    "amount_fiat",
    "amount_in_base_currency",
    "fiat_currency",
    "status",
    "environment",
    "deposit_address",
    "deposit_address_tag",
    "description",
    "external_id",
    "idempotency_key",
    "metadata",
    "redirect_url",
    "source",
    "static_address_id",
    "checkout_url",
    "payments",
    "expires_at",
    "paid_at",
    "created_at",
    "is_deferred",
    "draft_expires_at",
    "activated_at",
    "activation_count",
    "is_locked_fiat",
    "target_settlement_asset",
    "settlement_target_currency",
    "settlement_target_network",
    "payer_email",
    "sent_at",
];

fn ts(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}")))
        .unwrap()
        .with_timezone(&Utc)
}

#[tokio::test]
async fn create_crypto_invoice_returns_every_field() {
    let (app, m, key) = TestApp::with_test_key().await;
    let r = app
        .post(
            "/v1/invoices",
            Some(&key),
            &json!({"currency": "BTC", "amount": "0.00150000", "description": "Order 42", "external_id": "ord-42",
                    "metadata": {"cart": "abc", "n": 3}, "redirect_url": "https://shop.example/thanks"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let inv = r.data();
    let obj = inv.as_object().unwrap();
    for f in INVOICE_FIELDS {
        assert!(obj.contains_key(f), "missing field {f}");
    }
    testkit::assert_fields(
        inv,
        json!({
            "merchant_id": m.to_string(), "status": "pending", "environment": "test", "currency": "BTC",
            "network": "bitcoin", "amount_requested": "0.0015", "amount_paid": "0",
            "amount_usd": "90.00", "amount_in_base_currency": "90.00", // 0.0015 * 60000 (sandbox rate)
            "amount_fiat": null, "is_locked_fiat": false, "description": "Order 42", "external_id": "ord-42",
            "metadata": {"cart": "abc", "n": 3}, "redirect_url": "https://shop.example/thanks", "source": "api",
            "payments": [], "target_settlement_asset": "passthrough", "activation_count": 0, "is_deferred": false,
        }),
    );
    let id = inv["id"].as_str().unwrap();
    assert_eq!(inv["checkout_url"], format!("http://127.0.0.1:8080/checkout/{id}"));
    let addr = inv["deposit_address"].as_str().unwrap();
    assert!(addr.starts_with("tb1q"), "{addr}");
    validate_address(AddressFamily::Bitcoin, ChainNet::Testnet, addr, None).unwrap();
    let lifetime = ts(&inv["expires_at"]) - ts(&inv["created_at"]);
    assert_eq!(lifetime, Duration::seconds(3600));

    // GET returns the same invoice with its (empty) payments.
    let g = app.get(&format!("/v1/invoices/{id}"), Some(&key)).await;
    assert_eq!(g.status, 200);
    assert_eq!(g.data(), inv);
}

#[tokio::test]
async fn deposit_addresses_are_unique_and_valid_per_chain() {
    let (app, m, key) = TestApp::with_test_key().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let cases = [
        ("bitcoin", "0.001", AddressFamily::Bitcoin),
        ("ethereum", "0.01", AddressFamily::Evm),
        ("polygon_usdc", "5", AddressFamily::Evm),
        ("tron_usdt", "5", AddressFamily::Tron),
        ("xrp", "5", AddressFamily::Xrp),
        ("solana", "0.5", AddressFamily::Solana),
        ("solana_usdc", "5", AddressFamily::Solana),
    ];
    let mut seen = HashSet::new();
    for (env_key, net) in [(&key, ChainNet::Testnet), (&live, ChainNet::Mainnet)] {
        for (gate, amount, family) in cases {
            if net == ChainNet::Mainnet && family != AddressFamily::Evm {
                // Keys are configured, but no live adapter would see the deposit: offline.
                // (Mainnet derivation of every family is unit-tested in `chain::address`.)
                let r = app.post("/v1/invoices", Some(env_key), &json!({"currency": gate, "amount": amount})).await;
                r.assert_error(503, "gate_offline", None);
                continue;
            }
            let inv = app.create_invoice(env_key, json!({"currency": gate, "amount": amount})).await;
            let addr = inv["deposit_address"].as_str().unwrap().to_owned();
            let tag = inv["deposit_address_tag"].as_str().map(str::to_owned);
            validate_address(family, net, &addr, tag.as_deref()).unwrap_or_else(|e| panic!("{gate}: {addr}: {e}"));
            assert_eq!(tag.is_some(), family == AddressFamily::Xrp, "{gate}");
            assert!(seen.insert((inv["environment"].to_string(), addr, tag)), "{gate}: address reused");
        }
    }
    // Many invoices on one gate: all distinct.
    let mut addrs = HashSet::new();
    for _ in 0..45 {
        let inv = app.create_invoice(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "0.01"})).await;
        assert!(addrs.insert(inv["deposit_address"].as_str().unwrap().to_owned()));
    }
}

#[tokio::test]
async fn fiat_priced_invoices_lock_the_crypto_amount() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount_fiat": "100", "fiat_currency": "USD"})).await;
    // 100 / 60000 = 0.0016666…, rounded up to 8 decimals.
    assert_eq!(inv["amount_requested"], "0.00166667");
    assert_eq!(inv["amount_fiat"], "100");
    assert_eq!(inv["fiat_currency"], "USD");
    assert_eq!(inv["amount_usd"], "100.00");
    assert_eq!(inv["is_locked_fiat"], true);
    let inv = app
        .create_invoice(
            &key,
            json!({"currency": "USDT", "network": "tron", "amount_fiat": "25", "fiat_currency": "EUR"}),
        )
        .await;
    assert_eq!(inv["amount_requested"], "27.777778"); // 25 / 0.9, 6 decimals, rounded up
    assert_eq!(inv["amount_usd"], "27.78");
    // A fiat the provider does not price.
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount_fiat": "10", "fiat_currency": "JPY"}))
        .await
        .assert_error(422, "unsupported_currency", Some("fiat_currency"));
}

#[tokio::test]
async fn network_inference_and_unknown_currencies() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "SOL", "amount": "1"})).await;
    assert_eq!(inv["network"], "solana");
    let inv = app.create_invoice(&key, json!({"currency": "usdc", "network": "solana", "amount": "5"})).await;
    assert_eq!((inv["currency"].as_str(), inv["network"].as_str()), (Some("USDC"), Some("solana")));
    let inv = app.create_invoice(&key, json!({"currency": "arbitrum_usdt", "amount": "5"})).await;
    assert_eq!(inv["network"], "arbitrum");
    for (body, field) in [
        (json!({"currency": "USDT", "amount": "5"}), "network"),
        (json!({"currency": "ETH", "amount": "0.1"}), "network"),
        (json!({"currency": "DOGE", "amount": "5"}), "currency"),
        (json!({"currency": "USDT", "network": "bitcoin", "amount": "5"}), "network"),
    ] {
        app.post("/v1/invoices", Some(&key), &body).await.assert_error(422, "unsupported_currency", Some(field));
    }
}

#[tokio::test]
async fn gate_minimum_and_maximum() {
    let app = TestApp::spawn_with(|c| {
        c.gates
            .test
            .insert("tron".into(), domain::config::GateOverride { max_amount: Some(500.into()), ..Default::default() });
    })
    .await;
    let (_, key) = app.test_key().await;
    app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.0001"})).await;
    app.create_invoice(&key, json!({"currency": "BTC", "amount": "10"})).await;
    for amount in ["0.00009999", "10.00000001"] {
        app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": amount})).await.assert_error(
            422,
            "amount_out_of_range",
            Some("amount"),
        );
    }
    // Fiat-priced amounts are checked after conversion: 1 USD = 0.00001667 BTC < 0.0001.
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount_fiat": "1", "fiat_currency": "USD"}))
        .await
        .assert_error(422, "amount_out_of_range", Some("amount"));
    // Configuration narrows the spec's range.
    app.post("/v1/invoices", Some(&key), &json!({"currency": "TRX", "amount": "501"})).await.assert_error(
        422,
        "amount_out_of_range",
        Some("amount"),
    );
    // More decimals than the asset has is malformed (400).
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.000000001"})).await.assert_error(
        400,
        "validation_error",
        Some("amount"),
    );
}

#[tokio::test]
async fn offline_gates_are_503() {
    let (app, m, key) = TestApp::spawn_with_gates_offline().await;
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.01"})).await.assert_error(
        503,
        "gate_offline",
        None,
    );
    app.create_invoice(&key, json!({"currency": "SOL", "amount": "1"})).await;
    // Live gates without operator keys are offline.
    let live = app.key(m, Environment::Live, &[]).await;
    app.post("/v1/invoices", Some(&live), &json!({"currency": "SOL", "amount": "1"})).await.assert_error(
        503,
        "gate_offline",
        None,
    );
    assert_eq!(app.gate_status("live", "solana").await, "offline");
    assert_eq!(app.gate_status("test", "bitcoin").await, "offline");
}

#[tokio::test]
async fn malformed_requests_are_400_naming_the_field() {
    let (app, _, key) = TestApp::with_test_key().await;
    let r = app.post_raw("/v1/invoices", &key, "{\"currency\": \"BTC\",").await;
    r.assert_error(400, "validation_error", Some("body"));
    app.post_raw("/v1/invoices", &key, "[1,2]").await.assert_error(400, "validation_error", Some("body"));
    app.post_raw("/v1/invoices", &key, "").await.assert_error(400, "validation_error", Some("body"));
    for (body, field) in [
        (json!({"currency": "BTC", "amount": 5}), "amount"),
        (json!({"currency": 7, "amount": "5"}), "currency"),
        (json!({"currency": "BTC", "amount": "5", "is_deferred": "yes"}), "is_deferred"),
        (json!({"currency": "BTC", "amount": "5", "metadata": [1]}), "metadata"),
        (json!({"currency": "BTC", "amount": "5", "amout": "1"}), "amout"),
        (json!({"currency": "BTC", "amount": "-1"}), "amount"),
        (json!({"currency": "BTC", "amount": "1e3"}), "amount"),
        (json!({"currency": "BTC"}), "amount"),
        (json!({"amount": "0.1"}), "currency"),
        (json!({"currency": "BTC", "amount": "0.1", "amount_fiat": "5", "fiat_currency": "USD"}), "amount"),
        (json!({"currency": "BTC", "amount_fiat": "5"}), "fiat_currency"),
        (json!({"currency": "BTC", "amount": "0.1", "description": "x".repeat(1001)}), "description"),
        (json!({"currency": "BTC", "amount": "0.1", "external_id": "x".repeat(256)}), "external_id"),
        (json!({"currency": "BTC", "amount": "0.1", "idempotency_key": "k".repeat(256)}), "idempotency_key"),
        (json!({"currency": "BTC", "amount": "0.1", "idempotency_key": ""}), "idempotency_key"),
        (json!({"currency": "BTC", "amount": "0.1", "redirect_url": "javascript:alert(1)"}), "redirect_url"),
        (json!({"currency": "BTC", "amount": "0.1", "payer_email": "not-an-email"}), "payer_email"),
        (json!({"currency": "BTC", "amount": "0.1", "draft_expires_at": "2099-01-01T00:00:00Z"}), "draft_expires_at"),
        (
            json!({"currency": "BTC", "amount": "0.1", "is_deferred": true, "draft_expires_at": "yesterday"}),
            "draft_expires_at",
        ),
    ] {
        app.post("/v1/invoices", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    let meta: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!(i))).collect();
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.1", "metadata": meta}))
        .await
        .assert_error(400, "validation_error", Some("metadata"));
    let meta: serde_json::Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!(i))).collect();
    app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.1", "metadata": meta})).await;
    // Bad UUIDs in paths.
    app.get("/v1/invoices/not-a-uuid", Some(&key)).await.assert_error(400, "validation_error", Some("invoice_id"));
    app.post("/v1/invoices/123/cancel", Some(&key), &json!({})).await.assert_error(
        400,
        "validation_error",
        Some("invoice_id"),
    );
    app.get(&format!("/v1/invoices/{}", uuid::Uuid::new_v4()), Some(&key)).await.assert_error(404, "not_found", None);
    // Nothing was written by any of the refused requests.
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 1);
}

#[tokio::test]
async fn idempotency_replays_and_mismatches() {
    let (app, _, key) = TestApp::with_test_key().await;
    let body = json!({"currency": "BTC", "amount": "0.01", "idempotency_key": "order-1", "metadata": {"a": 1, "b": 2}});
    let first = app.create_invoice(&key, body.clone()).await;
    // Same body with keys in another order and an explicit null: a replay.
    let again = app
        .post("/v1/invoices", Some(&key), &json!({"metadata": {"b": 2, "a": 1}, "idempotency_key": "order-1", "amount": "0.01", "currency": "BTC", "description": null}))
        .await;
    assert_eq!(again.status, 201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.data()["id"], first["id"]);
    assert_eq!(again.data()["deposit_address"], first["deposit_address"]);
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.02", "idempotency_key": "order-1"}))
        .await
        .assert_error(422, "idempotency_key_mismatch", Some("idempotency_key"));
    // Keys are per merchant and environment.
    let (_, other) = app.test_key().await;
    let theirs = app.create_invoice(&other, body.clone()).await;
    assert_ne!(theirs["id"], first["id"]);
}

#[tokio::test]
async fn concurrent_identical_requests_create_one_invoice() {
    let (app, _, key) = TestApp::with_test_key().await;
    let body = json!({"currency": "ETH", "network": "base", "amount": "0.5", "idempotency_key": "race-1"});
    let answers = send_all((0..24).map(|_| app.post_request("/v1/invoices", &key, &body))).answers().await;
    let ids = created_ids(&answers);
    assert_eq!(ids.len(), 1, "concurrent identical requests created {} invoices", ids.len());
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 1);
}

#[tokio::test]
async fn deferred_drafts() {
    let (app, _, key) = TestApp::with_test_key().await;
    let d = app.create_invoice(&key, json!({"is_deferred": true, "amount_fiat": "49.90", "fiat_currency": "USD", "payer_email": "payer@example.com"})).await;
    assert_eq!(d["status"], "draft");
    assert_eq!(d["is_deferred"], true);
    assert_eq!(d["currency"], Value::Null);
    assert_eq!(d["deposit_address"], Value::Null);
    assert_eq!(d["expires_at"], Value::Null);
    assert_eq!(d["amount_usd"], "49.90");
    assert_eq!(d["payer_email"], "payer@example.com");
    let default_life = ts(&d["draft_expires_at"]) - ts(&d["created_at"]);
    assert_eq!(default_life, Duration::days(7));
    let until = (Utc::now() + Duration::days(2)).to_rfc3339();
    let d2 = app
        .create_invoice(
            &key,
            json!({"is_deferred": true, "currency": "BTC", "amount": "0.01", "draft_expires_at": until}),
        )
        .await;
    assert_eq!(d2["status"], "draft");
    assert_eq!(d2["amount_requested"], "0.01");
    assert_eq!(ts(&d2["draft_expires_at"]).timestamp(), ts(&json!(until)).timestamp());
    let past = (Utc::now() - Duration::minutes(1)).to_rfc3339();
    app.post(
        "/v1/invoices",
        Some(&key),
        &json!({"is_deferred": true, "currency": "BTC", "amount": "0.01", "draft_expires_at": past}),
    )
    .await
    .assert_error(400, "validation_error", Some("draft_expires_at"));
    // Drafts are not cancellable through the API (only pending invoices are).
    let cancel = format!("/v1/invoices/{}/cancel", d["id"].as_str().unwrap());
    app.post(&cancel, Some(&key), &json!({})).await.assert_error(409, "invoice_not_cancellable", None);
}

#[tokio::test]
async fn settlement_targets() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app
        .create_invoice(&key, json!({"currency": "BTC", "amount": "0.01", "target_settlement_asset": "tron_usdt"}))
        .await;
    assert_eq!(inv["target_settlement_asset"], "tron_usdt");
    assert_eq!(inv["settlement_target_currency"], "USDT");
    assert_eq!(inv["settlement_target_network"], "tron");
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01", "settlement_target_currency": "USDC", "settlement_target_network": "polygon"})).await;
    assert_eq!(inv["target_settlement_asset"], "polygon_usdc");
    app.post(
        "/v1/invoices",
        Some(&key),
        &json!({"currency": "BTC", "amount": "0.01", "target_settlement_asset": "gold"}),
    )
    .await
    .assert_error(422, "unsupported_currency", Some("target_settlement_asset"));
}

#[tokio::test]
async fn list_filters_and_pagination() {
    let (app, _, key) = TestApp::with_test_key().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(app.create_invoice(&key, json!({"currency": "BTC", "amount": format!("0.00{}", i + 1)})).await);
    }
    for _ in 0..3 {
        created.push(app.create_invoice(&key, json!({"currency": "USDT", "network": "tron", "amount": "10"})).await);
    }
    app.post(&format!("/v1/invoices/{}/cancel", created[0]["id"].as_str().unwrap()), Some(&key), &json!({})).await;

    let r = app.page("/v1/invoices", &key, [8, 20, 0], false).await;
    // Newest first.
    assert_eq!(r.data()[0]["id"], created[7]["id"]);
    let r = app.page("/v1/invoices?limit=3&offset=3", &key, [8, 3, 3], true).await;
    assert_eq!(r.data().as_array().unwrap().len(), 3);
    let r = app.get("/v1/invoices?limit=3&offset=6", Some(&key)).await;
    assert_eq!(r.body["meta"]["pagination"]["has_more"], false);
    assert_eq!(r.data().as_array().unwrap().len(), 2);
    let r = app.get("/v1/invoices?offset=100", Some(&key)).await;
    assert_eq!(r.data(), &json!([]));
    // Paging by offset += limit visits every invoice once.
    let mut seen = HashSet::new();
    let mut offset = 0;
    loop {
        let r = app.get(&format!("/v1/invoices?limit=3&offset={offset}"), Some(&key)).await;
        for inv in r.data().as_array().unwrap() {
            assert!(seen.insert(inv["id"].as_str().unwrap().to_owned()));
        }
        if r.body["meta"]["pagination"]["has_more"] == false {
            break;
        }
        offset += 3;
    }
    assert_eq!(seen.len(), 8);

    assert_eq!(app.get("/v1/invoices?currency=USDT", Some(&key)).await.body["meta"]["pagination"]["total"], 3);
    assert_eq!(app.get("/v1/invoices?currency=tron_usdt", Some(&key)).await.body["meta"]["pagination"]["total"], 3);
    assert_eq!(app.get("/v1/invoices?network=bitcoin", Some(&key)).await.body["meta"]["pagination"]["total"], 5);
    assert_eq!(app.get("/v1/invoices?status=cancelled", Some(&key)).await.body["meta"]["pagination"]["total"], 1);
    assert_eq!(
        app.get("/v1/invoices?status=pending&currency=BTC", Some(&key)).await.body["meta"]["pagination"]["total"],
        4
    );
    for bad in ["limit=0", "limit=101", "offset=-1", "limit=x", "status=bogus"] {
        let field = bad.split('=').next().unwrap();
        app.get(&format!("/v1/invoices?{bad}"), Some(&key)).await.assert_error(400, "validation_error", Some(field));
    }
    assert_eq!(app.get("/v1/invoices?limit=1", Some(&key)).await.status, 200);
    assert_eq!(app.get("/v1/invoices?limit=100", Some(&key)).await.status, 200);
}

#[tokio::test]
async fn cancel_only_pending() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let id = inv["id"].as_str().unwrap();
    let r = app.post(&format!("/v1/invoices/{id}/cancel"), Some(&key), &json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.data()["status"], "cancelled");
    assert_eq!(r.data()["id"], id);
    app.post(&format!("/v1/invoices/{id}/cancel"), Some(&key), &json!({})).await.assert_error(
        409,
        "invoice_not_cancellable",
        None,
    );
    assert_eq!(app.get(&format!("/v1/invoices/{id}"), Some(&key)).await.data()["status"], "cancelled");
    // Concurrent cancels: exactly one succeeds.
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let url = app.url(&format!("/v1/invoices/{}/cancel", inv["id"].as_str().unwrap()));
    let answers = send_all((0..8).map(|_| app.http.post(&url).header("X-API-Key", &key))).answers().await;
    let mut codes: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    codes.sort();
    assert_eq!(codes, vec![200, 409, 409, 409, 409, 409, 409, 409]);
}

#[tokio::test]
async fn amounts_round_trip_exactly_with_all_decimals() {
    // 19 significant digits: a double would lose the tail (SQLite stores these as TEXT).
    let (app, _, key) = TestApp::with_test_key().await;
    let exact = json!({"currency": "ETH", "network": "ethereum", "amount": "1.123456789012345678"});
    let inv = app.create_invoice(&key, exact).await;
    assert_eq!(inv["amount_requested"], "1.123456789012345678");
    let g = app.get(&format!("/v1/invoices/{}", inv["id"].as_str().unwrap()), Some(&key)).await;
    assert_eq!(g.data()["amount_requested"], "1.123456789012345678");
    let l = app.get("/v1/invoices", Some(&key)).await;
    assert_eq!(l.data()[0]["amount_requested"], "1.123456789012345678");
    assert_eq!(l.data()[0]["amount_usd"], "3370.37");
}

#[tokio::test]
async fn merchant_settings_drive_lifetime_and_base_currency() {
    let app = TestApp::spawn().await;
    let settings = domain::merchants::MerchantSettings {
        base_currency: "EUR".into(),
        invoice_lifetime_secs: 900,
        underpayment_tolerance_percent: "0.5".parse().unwrap(),
    };
    let m = domain::merchants::create_merchant(&app.state.db, "EU shop", &settings).await.unwrap();
    let key = app.key(m.id, Environment::Test, &[]).await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    assert_eq!(ts(&inv["expires_at"]) - ts(&inv["created_at"]), Duration::seconds(900));
    assert_eq!(inv["amount_in_base_currency"], "540.00"); // 0.01 BTC * 54000 EUR
    assert_eq!(inv["amount_usd"], "600.00");
}

#[tokio::test]
async fn internal_errors_render_the_envelope_without_leaking_the_cause() {
    use sea_orm::ConnectionTrait;
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    // Break the schema under the running API.
    // (A table nothing references, that reading an invoice's payments joins.)
    app.state.db.execute_unprepared("DROP TABLE settlement_conversions").await.unwrap();
    let r = app.get(&format!("/v1/invoices/{}", inv["id"].as_str().unwrap()), Some(&key)).await;
    r.assert_error(500, "internal_error", None);
    let text = r.body.to_string();
    assert!(!text.contains("settlement_conversions") && !text.to_lowercase().contains("sql"), "{text}");
    assert_eq!(r.body["meta"]["request_id"], r.headers["x-request-id"].to_str().unwrap());
}

#[tokio::test]
async fn two_processes_allocating_concurrently_never_share_an_address() {
    let a = TestApp::spawn_with(|c| c.invoices.address_block_size = 4).await;
    let b = TestApp::spawn_on(a.db.clone(), |c| c.invoices.address_block_size = 4).await;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..120 {
        let (state, db) =
            if i % 2 == 0 { (a.state.clone(), a.state.db.clone()) } else { (b.state.clone(), b.state.db.clone()) };
        set.spawn(async move { state.addresses.allocate(&db, Environment::Test, AddressFamily::Evm).await.unwrap() });
    }
    let (mut indices, mut addrs) = (HashSet::new(), HashSet::new());
    while let Some(r) = set.join_next().await {
        let got = r.unwrap();
        assert!(indices.insert(got.index), "index {} handed out twice", got.index);
        assert!(addrs.insert(got.address.clone()), "address {} handed out twice", got.address);
    }
    assert_eq!(indices.len(), 120);
}

#[tokio::test]
async fn an_exhausted_solana_pool_is_503_and_wastes_no_entries() {
    // An operator-provisioned pool of two addresses (in the test environment: live Solana has
    // no chain adapter yet, so it is offline whatever its pool).
    let app = TestApp::spawn_with(|c| {
        c.addresses.test = Some(domain::chain::address::AccountKeysConfig {
            solana_pool: testkit::live_keys().solana_pool,
            ..Default::default()
        })
    })
    .await;
    let (_, live) = app.test_key().await;
    let a = app.create_invoice(&live, json!({"currency": "SOL", "amount": "1"})).await;
    let b = app.create_invoice(&live, json!({"currency": "solana_usdc", "amount": "5"})).await;
    let pool: HashSet<String> = testkit::live_keys().solana_pool.into_iter().collect();
    assert!(
        pool.contains(a["deposit_address"].as_str().unwrap()) && pool.contains(b["deposit_address"].as_str().unwrap())
    );
    assert_ne!(a["deposit_address"], b["deposit_address"]);
    app.post("/v1/invoices", Some(&live), &json!({"currency": "SOL", "amount": "1"})).await.assert_error(
        503,
        "gate_offline",
        None,
    );
}

/// A NUL character cannot be stored by PostgreSQL (text or JSON), so any string field holding
/// one, at any depth, is 400 `validation_error` naming the field, on both databases, and
/// nothing is written. Query parameters too.
#[tokio::test]
async fn nul_characters_are_refused_in_every_string_field_naming_it() {
    let (app, m, key) = TestApp::with_test_key().await;
    let nul = "a\u{0}b";
    let inv = json!({"currency": "BTC", "amount": "0.1"});
    let with = |base: &Value, k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let invoice_cases = [
        (with(&inv, "description", json!(nul)), "description"),
        (with(&inv, "external_id", json!(nul)), "external_id"),
        (with(&inv, "idempotency_key", json!(nul)), "idempotency_key"),
        (with(&inv, "redirect_url", json!(format!("https://shop.example/{nul}"))), "redirect_url"),
        (with(&inv, "payer_email", json!(format!("{nul}@shop.example"))), "payer_email"),
        (with(&inv, "currency", json!("BT\u{0}C")), "currency"),
        (with(&inv, "metadata", json!({"note": nul})), "metadata.note"),
        (with(&inv, "metadata", json!({"deep": {"list": ["ok", nul]}})), "metadata.deep.list[1]"),
        (with(&inv, "metadata", json!({"ke\u{0}y": 1})), "metadata.ke\\u0000y"),
    ];
    for (body, field) in invoice_cases {
        app.post("/v1/invoices", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);

    let po = json!({"currency": "USDT", "network": "tron", "amount": "5", "destination": "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP"});
    for (body, field) in [
        (with(&po, "destination", json!(nul)), "destination"),
        (with(&po, "destination_tag", json!(nul)), "destination_tag"),
        (with(&po, "description", json!(nul)), "description"),
        (with(&po, "idempotency_key", json!(nul)), "idempotency_key"),
        (with(&po, "metadata", json!({"k": nul})), "metadata.k"),
    ] {
        app.post("/v1/payouts", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    let refund = with(&po, "invoice_id", json!(uuid::Uuid::now_v7()));
    for (body, field) in [
        (with(&refund, "destination", json!(nul)), "destination"),
        (with(&refund, "description", json!(nul)), "description"),
        (with(&refund, "metadata", json!({"k": nul})), "metadata.k"),
    ] {
        let rb = app.http.post(app.url("/v1/refunds")).header("X-API-Key", &key).header("Idempotency-Key", "k");
        app.send(rb.json(&body)).await.assert_error(400, "validation_error", Some(field));
    }
    app.post("/v1/addresses", Some(&key), &json!({"currency": "BTC", "label": nul})).await.assert_error(
        400,
        "validation_error",
        Some("label"),
    );
    // Query strings: `%00` in any parameter.
    for path in ["/v1/invoices?currency=BT%00C", "/v1/addresses?network=%00", "/v1/payouts?limit=5&x=%00"] {
        let r = app.get(path, Some(&key)).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.details()[0].contains("NUL"), "{path}: {}", r.body);
    }
    app.get("/v1/invoices?currency=BT%00C", Some(&key)).await.assert_error(400, "validation_error", Some("currency"));
    // The test helpers and the checkout page's activation (no key) go through the same check.
    let created = app.create_invoice(&key, inv.clone()).await;
    let dep = json!({"invoice_id": created["id"], "amount": "0.1", "tx_hash": nul});
    app.post("/v1/test/deposits", Some(&key), &dep).await.assert_error(400, "validation_error", Some("tx_hash"));
    let draft =
        app.create_invoice(&key, json!({"is_deferred": true, "amount_fiat": "30", "fiat_currency": "USD"})).await;
    let path = format!("/checkout/{}/activate", draft["id"].as_str().unwrap());
    app.post(&path, None, &json!({"gate_id": nul})).await.assert_error(400, "validation_error", Some("gate_id"));
    // Nothing was written by the refused requests: no payout, no refund, no address, no deposit.
    for path in ["/v1/payouts", "/v1/refunds", "/v1/addresses"] {
        assert_eq!(app.get(path, Some(&key)).await.body["meta"]["pagination"]["total"], 0, "{path}");
    }
    let _ = m;
}

/// A body over the limit is answered with the error envelope (413 `payload_too_large`), both
/// when `Content-Length` announces it and when a chunked body grows past it.
#[tokio::test]
async fn an_oversized_body_gets_the_error_envelope() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (app, _, key) = TestApp::with_test_key().await;
    let big = json!({"currency": "BTC", "amount": "0.1", "description": "d".repeat(100 * 1024)});
    let r = app.post("/v1/invoices", Some(&key), &big).await;
    r.assert_error(413, "payload_too_large", Some("body"));
    assert!(r.headers.get("x-request-id").is_some());

    // Chunked: no Content-Length, the limit trips while reading.
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /v1/invoices HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let chunk = " ".repeat(96 * 1024);
    let body = format!("{:x}\r\n{chunk}\r\n0\r\n\r\n", chunk.len());
    // The server may answer (and close) before reading everything: write errors do not matter.
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"code\":\"payload_too_large\"") && text.contains("request_id"), "{text}");
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);
}

/// Amounts are parsed exactly: more significant digits than a Decimal holds is 400 naming the
/// field, never silently rounded (`0.1000000000000000000000000000001` used to become 0.1).
#[tokio::test]
async fn amounts_with_more_digits_than_fit_are_refused_not_rounded() {
    let (app, _, key) = TestApp::with_test_key().await;
    let precise = "0.1000000000000000000000000000001";
    for (body, field) in [
        (json!({"currency": "BTC", "amount": precise}), "amount"),
        (
            json!({"currency": "BTC", "amount_fiat": format!("1{}", &precise[1..]), "fiat_currency": "USD"}),
            "amount_fiat",
        ),
    ] {
        let r = app.post("/v1/invoices", Some(&key), &body).await;
        r.assert_error(400, "validation_error", Some(field));
        assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    }
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);
    // The test deposit helper parses the same way.
    let inv = app.create_invoice(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "0.1"})).await;
    let r = app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": inv["id"], "amount": precise})).await;
    r.assert_error(422, "validation_error", Some("amount"));
    assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    // 28 significant digits fit and are kept exactly.
    let ok = app
        .create_invoice(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "0.100000000000000001"}))
        .await;
    assert_eq!(ok["amount_requested"], "0.100000000000000001");
}
