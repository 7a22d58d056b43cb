//! Spec 4.13, 4.14: currencies and rates; OpenAPI and docs.

use std::time::Duration;

use axum::Json;
use axum::routing::get;
use serde_json::{Value, json};
use testkit::TestApp;

#[tokio::test]
async fn currencies_list_the_eighteen_gates() {
    let app = TestApp::spawn().await;
    for env in ["test", "live"] {
        let r = app.get(&format!("/v1/currencies?environment={env}"), None).await;
        assert_eq!(r.status, 200);
        let list = r.data().as_array().unwrap();
        assert_eq!(list.len(), 18);
        for c in list {
            for f in ["id", "name", "network", "decimals", "confirmations_required", "status", "usd_nominal_available"]
            {
                assert!(c.get(f).is_some(), "{f} missing in {c}");
            }
            // Test: every sandbox gate. Live: only the gates a chain adapter watches (the
            // test configuration points every EVM network at a node); bitcoin, tron, solana
            // and xrp have keys but no adapter, so their deposits could not be seen.
            let family = domain::gates::find(c["id"].as_str().unwrap()).unwrap().family;
            let watched = env == "test" || family == domain::chain::address::AddressFamily::Evm;
            assert_eq!(c["status"], if watched { "online" } else { "offline" }, "{env}: {c}");
        }
        let btc = list.iter().find(|c| c["id"] == "bitcoin").unwrap();
        assert_eq!((btc["decimals"].as_u64(), btc["confirmations_required"].as_u64()), (Some(8), Some(3)));
        assert_eq!(btc["usd_nominal_available"], true);
        let pol = list.iter().find(|c| c["id"] == "polygon_usdt").unwrap();
        assert_eq!(pol["confirmations_required"], 128);
    }
    assert_eq!(app.get("/v1/currencies", None).await.data().as_array().unwrap().len(), 18);
    app.get("/v1/currencies?environment=staging", None).await.assert_error(
        400,
        "validation_error",
        Some("environment"),
    );
}

#[tokio::test]
async fn rates_filter() {
    let app = TestApp::spawn().await;
    let r = app.get("/v1/rates?environment=test&currency=BTC&fiat=USD", None).await;
    assert_eq!(r.status, 200);
    let rows = r.data().as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["rate"], "60000");
    assert_eq!(rows[0]["currency"], "BTC");
    assert_eq!(rows[0]["fiat_currency"], "USD");
    assert_eq!(rows[0]["source"], "static");
    assert!(rows[0]["updated_at"].is_string());
    assert!(app.get("/v1/rates?environment=test", None).await.data().as_array().unwrap().len() >= 27);
    app.get("/v1/rates?environment=nope", None).await.assert_error(400, "validation_error", Some("environment"));
}

/// A fake CoinGecko `simple/price` endpoint whose answer the test can break.
async fn fake_price_api(healthy: std::sync::Arc<std::sync::atomic::AtomicBool>) -> String {
    let app = axum::Router::new().route(
        "/api/v3/simple/price",
        get(move |q: axum::extract::Query<std::collections::HashMap<String, String>>| {
            let healthy = healthy.clone();
            async move {
                if !healthy.load(std::sync::atomic::Ordering::SeqCst) {
                    return Err(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                }
                assert!(q.get("ids").unwrap().contains("bitcoin"));
                assert!(q.get("vs_currencies").unwrap().contains("usd"));
                let now = chrono::Utc::now().timestamp();
                Ok(Json(json!({
                    "bitcoin": {"usd": 65432.1, "eur": 60000, "last_updated_at": now},
                    "tether": {"usd": 1.0002, "eur": 0.92, "last_updated_at": now},
                    "ethereum": {"usd": 3100.55, "last_updated_at": now}
                })))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/api/v3")
}

#[tokio::test]
async fn http_rates_provider_prices_live_invoices_and_stale_rates_refuse_fiat() {
    let healthy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let url = fake_price_api(healthy.clone()).await;
    let app = TestApp::spawn_with(|c| {
        c.rates.live.provider = domain::config::RatesProviderKind::Http;
        c.rates.live.url = url;
        c.rates.live.refresh_secs = 1;
        c.rates.live.max_age_secs = 2;
    })
    .await;
    let rows = app.get("/v1/rates?currency=BTC", None).await;
    let usd = rows.data().as_array().unwrap().iter().find(|r| r["fiat_currency"] == "USD").unwrap().clone();
    assert_eq!(usd["rate"], "65432.1");
    assert_eq!(usd["source"], "coingecko");
    let m = app.merchant().await;
    let live = app.key(m, entity::Environment::Live, &[]).await;
    // (Live invoices on ethereum: live bitcoin has no chain adapter yet.)
    let eth =
        |fiat: &str| json!({"currency": "ETH", "network": "ethereum", "amount_fiat": fiat, "fiat_currency": "USD"});
    // 3100.551 / 3100.55 = 1.00000032…, rounded up to ETH's quote precision (6 places).
    let inv = app.create_invoice(&live, eth("3100.551")).await;
    assert_eq!(inv["amount_requested"], "1.000001");
    assert_eq!(inv["amount_usd"], "3100.55");
    // The provider breaks; once the cached rates are older than max_age, fiat pricing stops.
    healthy.store(false, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(3500)).await;
    app.post("/v1/invoices", Some(&live), &eth("100")).await.assert_error(503, "rates_unavailable", None);
    assert_eq!(app.get("/v1/rates", None).await.data(), &json!([]));
    // Crypto-priced invoices still work, without USD values.
    let inv = app.create_invoice(&live, json!({"currency": "ETH", "network": "ethereum", "amount": "0.01"})).await;
    assert_eq!(inv["amount_usd"], Value::Null);
    // The provider recovers and so does pricing.
    healthy.store(true, std::sync::atomic::Ordering::SeqCst);
    let t = std::time::Instant::now();
    loop {
        let r = app.post("/v1/invoices", Some(&live), &eth("100")).await;
        if r.status == 201 {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "rates never recovered: {}", r.body);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn openapi_document_and_offline_docs() {
    let app = TestApp::spawn().await;
    let doc = app.get("/openapi.json", None).await;
    assert_eq!(doc.status, 200);
    for p in [
        "/v1/invoices",
        "/v1/invoices/{invoice_id}",
        "/v1/invoices/{invoice_id}/cancel",
        "/v1/payouts",
        "/v1/payouts/{payout_id}",
        "/v1/payouts/{payout_id}/cancel",
        "/v1/refunds",
        "/v1/refunds/{refund_id}",
        "/v1/test/deposits",
        "/v1/test/deposits/{deposit_id}/reverse",
        "/v1/test/blocks",
        "/v1/balances",
        "/v1/balances/{currency}/ledger",
        "/v1/currencies",
        "/v1/rates",
        "/v1/events",
        "/v1/events/{event_id}",
    ] {
        assert!(doc.body["paths"].get(p).is_some(), "{p} not documented");
    }
    // Every list states the bounds the server enforces on limit and offset.
    for p in
        ["/v1/invoices", "/v1/payouts", "/v1/refunds", "/v1/events", "/v1/addresses", "/v1/balances/{currency}/ledger"]
    {
        let params = doc.body["paths"][p]["get"]["parameters"].as_array().unwrap_or_else(|| panic!("{p}"));
        let schema = |name: &str| params.iter().find(|x| x["name"] == name).map(|x| x["schema"].clone());
        let limit = schema("limit").unwrap_or_else(|| panic!("{p}: no limit"));
        assert_eq!((limit["minimum"].as_f64(), limit["maximum"].as_f64()), (Some(1.0), Some(100.0)), "{p}: {limit}");
        let offset = schema("offset").unwrap_or_else(|| panic!("{p}: no offset"));
        assert_eq!(
            (offset["minimum"].as_f64(), offset["format"].as_str()),
            (Some(0.0), Some("int64")),
            "{p}: {offset}"
        );
    }
    assert!(doc.body["components"]["securitySchemes"]["api_key"].is_object());
    let refund = &doc.body["paths"]["/v1/refunds"]["post"];
    assert!(
        refund["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"),
        "Idempotency-Key header undocumented: {refund}"
    );
    for status in ["201", "400", "404", "409", "422"] {
        assert!(refund["responses"].get(status).is_some(), "POST /v1/refunds {status} undocumented");
    }
    let page = app.http.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger"), "{html}");
    // Assets are served by the binary, not a CDN.
    for asset in ["swagger-ui.css", "swagger-ui-bundle.js"] {
        assert!(html.contains(&format!("./{asset}")), "{asset} not local");
        assert_eq!(app.http.get(app.url(&format!("/docs/{asset}"))).send().await.unwrap().status(), 200);
    }
    assert!(!html.contains("https://"), "docs page references an external URL");
}

/// `/ready` names the dependency that is down, and only that: the driver's error (which can
/// name hosts, users, files or the connection string) is logged, never returned.
#[tokio::test]
async fn ready_names_the_database_when_it_is_down_without_the_driver_error() {
    let app = TestApp::spawn().await;
    let r = app.get("/ready", None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The database goes away (the pool is closed under the running app).
    app.state.db.clone().close().await.unwrap();
    let r = app.get("/ready", None).await;
    r.assert_error(503, "not_ready", Some("database"));
    assert_eq!(r.details(), ["database: down"]);
    let text = r.body.to_string();
    let db_url = app.db.url.clone();
    for leak in [db_url.as_str(), "pool", "closed", "Connection", "sqlx", "postgres://", "sqlite:"] {
        assert!(!text.contains(leak), "{leak:?} leaked: {text}");
    }
}
