//! Spec section 5: authentication, permissions, isolation; envelopes and request ids.

use std::time::{Duration, Instant};

use api::auth::Permission;
use entity::Environment;
use serde_json::json;
use testkit::TestApp;
use uuid::Uuid;

#[tokio::test]
async fn missing_malformed_unknown_and_revoked_keys_are_401() {
    let (app, _, key) = TestApp::with_test_key().await;

    app.get("/v1/invoices", None).await.assert_error(401, "unauthorized", None);
    for bad in ["nope", "sk_test_123", &format!("sk_prod_{}", "a".repeat(64)), &key.to_uppercase()] {
        app.get("/v1/invoices", Some(bad)).await.assert_error(401, "unauthorized", None);
    }
    let unknown = format!("sk_test_{}", "0".repeat(64));
    app.get("/v1/invoices", Some(&unknown)).await.assert_error(401, "unauthorized", None);
    // A live-format string carrying a test key's hex is another (unknown) key.
    app.get("/v1/invoices", Some(&key.replace("sk_test_", "sk_live_"))).await.assert_error(401, "unauthorized", None);

    assert_eq!(app.get("/v1/invoices", Some(&key)).await.status, 200);
    let keys = domain::merchants::list_api_keys(&app.state.db, None).await.unwrap();
    domain::merchants::revoke_api_key(&app.state.db, keys[0].id.into()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await; // cache TTL in tests: 1 s
    let r = app.get("/v1/invoices", Some(&key)).await;
    r.assert_error(401, "unauthorized", None);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("revoked"));
    // The key never appears in responses.
    assert!(!r.body.to_string().contains(&key[8..]));
}

#[tokio::test]
async fn revocation_reaches_every_api_process_within_seconds() {
    let a = TestApp::spawn_with(|c| c.auth.cache_ttl_secs = 2).await;
    let b = TestApp::spawn_on(a.db.clone(), |c| c.auth.cache_ttl_secs = 2).await;
    let (_, key) = a.test_key().await;
    assert_eq!(a.get("/v1/invoices", Some(&key)).await.status, 200);
    assert_eq!(b.get("/v1/invoices", Some(&key)).await.status, 200);
    let id = domain::merchants::list_api_keys(&a.state.db, None).await.unwrap()[0].id;
    // Revoked by an operator (another process, as `ops keys revoke` would).
    domain::merchants::revoke_api_key(&a.state.db, id.into()).await.unwrap();
    let t = Instant::now();
    loop {
        let (ra, rb) = (a.get("/v1/invoices", Some(&key)).await.status, b.get("/v1/invoices", Some(&key)).await.status);
        if ra == 401 && rb == 401 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(4), "revoked key still accepted after {:?}", t.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn warm_keys_cost_no_database_round_trip() {
    let app = TestApp::spawn_with(|c| c.auth.cache_ttl_secs = 30).await;
    let (_, key) = app.test_key().await;
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.status, 200);
    let loads = app.state.keys.loads();
    for _ in 0..25 {
        assert_eq!(app.get("/v1/invoices?limit=1", Some(&key)).await.status, 200);
    }
    assert_eq!(app.state.keys.loads(), loads, "a warm key was looked up in the database again");
}

/// An app with a merchant holding one test key per permission given, in that order.
async fn keys_holding_only<const N: usize>(permissions: [Permission; N]) -> (TestApp, Uuid, [String; N]) {
    let app = TestApp::spawn().await;
    let m = app.merchant().await;
    let mut keys = Vec::new();
    for p in permissions {
        keys.push(app.key(m, Environment::Test, &[p]).await);
    }
    (app, m, keys.try_into().unwrap())
}

#[tokio::test]
async fn missing_permission_is_403() {
    let (app, _, [read_only, write_only]) =
        keys_holding_only([Permission::InvoicesRead, Permission::InvoicesWrite]).await;
    let body = json!({"currency": "BTC", "amount": "0.01"});
    let r = app.post("/v1/invoices", Some(&read_only), &body).await;
    r.assert_error(403, "forbidden", None);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("invoices:write"));
    let inv = app.create_invoice(&write_only, body).await;
    let id = inv["id"].as_str().unwrap();
    app.get("/v1/invoices", Some(&write_only)).await.assert_error(403, "forbidden", None);
    app.get(&format!("/v1/invoices/{id}"), Some(&write_only)).await.assert_error(403, "forbidden", None);
    app.post(&format!("/v1/invoices/{id}/cancel"), Some(&read_only), &json!({})).await.assert_error(
        403,
        "forbidden",
        None,
    );
    assert_eq!(app.get(&format!("/v1/invoices/{id}"), Some(&read_only)).await.status, 200);
}

#[tokio::test]
async fn other_merchants_and_environments_see_404_never_403() {
    let (app, ma, ka) = TestApp::with_test_key().await;
    let (_, kb) = app.test_key().await;
    let ka_live = app.key(ma, Environment::Live, &[]).await;
    let inv = app.create_invoice(&ka, json!({"currency": "BTC", "amount": "0.01"})).await;
    let id = inv["id"].as_str().unwrap();
    assert_eq!(inv["environment"], "test");

    for key in [&kb, &ka_live] {
        app.get(&format!("/v1/invoices/{id}"), Some(key)).await.assert_error(404, "not_found", None);
        app.post(&format!("/v1/invoices/{id}/cancel"), Some(key), &json!({})).await.assert_error(
            404,
            "not_found",
            None,
        );
        let list = app.get("/v1/invoices", Some(key)).await;
        assert_eq!(list.body["meta"]["pagination"]["total"], 0, "{}", list.body);
    }
    // A live invoice is invisible to the test key.
    let live = app.create_invoice(&ka_live, json!({"currency": "ETH", "network": "ethereum", "amount": "0.01"})).await;
    assert_eq!(live["environment"], "live");
    assert!(live["deposit_address"].as_str().unwrap().starts_with("0x"));
    app.get(&format!("/v1/invoices/{}", live["id"].as_str().unwrap()), Some(&ka)).await.assert_error(
        404,
        "not_found",
        None,
    );
    assert_eq!(app.get("/v1/invoices", Some(&ka)).await.body["meta"]["pagination"]["total"], 1);
}

#[tokio::test]
async fn request_ids_are_echoed_and_honoured() {
    let (app, _, key) = TestApp::with_test_key().await;
    let r = app.get("/v1/invoices", Some(&key)).await;
    let header = r.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(r.body["meta"]["request_id"], header.as_str());
    let r = app.send(app.http.get(app.url("/v1/invoices")).header("X-Request-Id", "trace-abc-123")).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.headers["x-request-id"], "trace-abc-123");
    assert_eq!(r.body["meta"]["request_id"], "trace-abc-123");
    // A malformed incoming id is replaced, not echoed.
    let r = app.send(app.http.get(app.url("/v1/currencies")).header("X-Request-Id", "bad id with spaces")).await;
    assert_ne!(r.headers["x-request-id"], "bad id with spaces");
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn public_endpoints_need_no_key_and_unknown_routes_are_404_envelopes() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/v1/currencies", None).await.status, 200);
    assert_eq!(app.get("/v1/rates", None).await.status, 200);
    app.get("/v1/nothing-here", None).await.assert_error(404, "not_found", None);
}

/// A key without the route's permission gets 403 whatever it sends: the permission is checked
/// before the path id, the query, the `Idempotency-Key` header or the body is parsed, so such a
/// key learns nothing about what the route would accept.
#[tokio::test]
async fn permission_is_checked_before_the_body_path_or_query_is_parsed() {
    // Holds only balances:read; the balances routes are checked with a key lacking it.
    let (app, m, [balances_only, no_balances]) =
        keys_holding_only([Permission::BalancesRead, Permission::InvoicesRead]).await;
    let malformed = "{\"currency\": ";
    let nul_query = "limit=abc&status=%00";
    let writes = [
        "/v1/invoices",
        "/v1/invoices/not-a-uuid/cancel",
        "/v1/payouts",
        "/v1/payouts/not-a-uuid/cancel",
        "/v1/refunds",
        "/v1/addresses",
        "/v1/test/deposits",
        "/v1/test/deposits/not-a-uuid/reverse",
        "/v1/test/blocks",
    ];
    for path in writes {
        // No Idempotency-Key header either (refunds require one).
        app.post_raw(path, &balances_only, malformed).await.assert_error(403, "forbidden", None);
        let r = app
            .send(
                app.http
                    .post(app.url(path))
                    .header("X-API-Key", &balances_only)
                    .header("content-type", "text/plain")
                    .body("x"),
            )
            .await;
        r.assert_error(403, "forbidden", None);
    }
    let reads = [
        format!("/v1/invoices?{nul_query}"),
        "/v1/invoices/not-a-uuid".to_owned(),
        format!("/v1/payouts?{nul_query}"),
        "/v1/payouts/not-a-uuid".to_owned(),
        format!("/v1/refunds?{nul_query}&invoice_id=x"),
        "/v1/refunds/not-a-uuid".to_owned(),
        format!("/v1/addresses?{nul_query}"),
        "/v1/addresses/not-a-uuid".to_owned(),
        format!("/v1/addresses/not-a-uuid/invoices?{nul_query}"),
    ];
    for path in &reads {
        app.get(path, Some(&balances_only)).await.assert_error(403, "forbidden", None);
    }
    for path in [format!("/v1/balances?{nul_query}"), format!("/v1/balances/no-such-coin/ledger?{nul_query}")] {
        app.get(&path, Some(&no_balances)).await.assert_error(403, "forbidden", None);
    }
    // With the permission, the same requests are validation errors (so the 403s above were not
    // produced by something else).
    let all = app.key(m, Environment::Test, &[]).await;
    app.post_raw("/v1/invoices", &all, malformed).await.assert_error(400, "validation_error", Some("body"));
    app.get("/v1/payouts/not-a-uuid", Some(&all)).await.assert_error(400, "validation_error", Some("payout_id"));
    app.get(&format!("/v1/invoices?{nul_query}"), Some(&all)).await.assert_error(
        400,
        "validation_error",
        Some("status"),
    );
    app.post_raw("/v1/refunds", &all, malformed).await.assert_error(400, "validation_error", Some("Idempotency-Key"));
    app.post_raw("/v1/test/deposits/not-a-uuid/reverse", &all, "{}").await.assert_error(
        400,
        "validation_error",
        Some("deposit_id"),
    );
    // And 401 still comes first.
    app.post_raw("/v1/payouts", "sk_test_nope", malformed).await.assert_error(401, "unauthorized", None);
}
