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
    // 25 / 0.9 = 27.777…, rounded up to the stablecoin quote precision (cents), not to the
    // token's 6 decimals: a figure the payer can type, never below the price.
    assert_eq!(inv["amount_requested"], "27.78");
    assert_eq!(inv["amount_usd"], "27.78");
    // A fiat the provider does not price.
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount_fiat": "10", "fiat_currency": "JPY"}))
        .await
        .assert_error(422, "unsupported_currency", Some("fiat_currency"));
}

/// An operator may set a gate's quote precision (`[gates.<env>.<gate>] quote_decimals`): whole
/// USDT here, still rounded up.
#[tokio::test]
async fn a_configured_quote_precision_rounds_fiat_quotes_up_to_it() {
    let app = TestApp::spawn_with(|c| {
        c.gates.test.entry("tron_usdt".into()).or_default().quote_decimals = Some(0);
    })
    .await;
    let (_, key) = app.test_key().await;
    let inv = app
        .create_invoice(
            &key,
            json!({"currency": "USDT", "network": "tron", "amount_fiat": "25", "fiat_currency": "EUR"}),
        )
        .await;
    assert_eq!(inv["amount_requested"], "28"); // 27.78 up to whole USDT
    // A crypto-priced invoice keeps its amount as given.
    let inv = app.create_invoice(&key, json!({"currency": "USDT", "network": "tron", "amount": "25.123456"})).await;
    assert_eq!(inv["amount_requested"], "25.123456");
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

/// `GET /v1/invoices?external_id=…`: the merchant's own reference finds its invoices (and only
/// the caller's), with the total of that filter; an empty value filters nothing.
#[tokio::test]
async fn invoices_are_found_by_their_external_id() {
    let app = TestApp::spawn().await;
    let (_, key) = app.test_key().await;
    let (_, other) = app.test_key().await;
    let body = |external: Option<&str>| {
        let mut b = json!({"currency": "BTC", "amount": "0.01"});
        if let Some(e) = external {
            b["external_id"] = json!(e);
        }
        b
    };
    let first = app.create_invoice_id(&key, body(Some("order-1001"))).await;
    let second = app.create_invoice_id(&key, body(Some("order-1001"))).await;
    app.create_invoice_id(&key, body(Some("order-1002"))).await;
    app.create_invoice_id(&key, body(None)).await;
    app.create_invoice_id(&other, body(Some("order-1001"))).await;

    let r = app.get("/v1/invoices?external_id=order-1001", Some(&key)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    let ids: Vec<&str> = r.data().as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [second.to_string(), first.to_string()], "newest first, the other merchant's not among them");
    r.assert_page(2, 20, 0, false);
    let none = app.get("/v1/invoices?external_id=order-9999", Some(&key)).await;
    none.assert_page(0, 20, 0, false);
    let all = app.get("/v1/invoices?external_id=", Some(&key)).await;
    all.assert_page(4, 20, 0, false);
    let doc = app.get("/openapi.json", None).await;
    let params = doc.body["paths"]["/v1/invoices"]["get"]["parameters"].as_array().unwrap().clone();
    assert!(params.iter().any(|p| p["name"] == "external_id"), "declared in the OpenAPI document");
}
