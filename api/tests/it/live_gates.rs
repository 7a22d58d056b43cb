//! Live money safety at the edge: a live gate is `online` only when this deployment can see its
//! deposits (addresses derive AND a chain adapter watches its network), and payouts and refunds
//! are accepted only where a payout signer is configured. Otherwise 503 `gate_offline`.

use domain::config::{EvmNetworkConfig, Redacted};
use entity::Environment;
use serde_json::{Value, json};
use testkit::{TestApp, credit_invoice_in};
use uuid::Uuid;

const ETH_DEST: &str = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const BTC_DEST: &str = "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq";

fn node() -> EvmNetworkConfig {
    EvmNetworkConfig { rpc_url: "http://127.0.0.1:9".into(), ..Default::default() }
}

async fn statuses(app: &TestApp, env: &str) -> Vec<(String, String)> {
    let r = app.get(&format!("/v1/currencies?environment={env}"), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.data()
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap().into(), c["status"].as_str().unwrap().into()))
        .collect()
}

#[tokio::test]
async fn keys_without_a_chain_adapter_leave_every_live_gate_offline() {
    // Every address family has live keys, but no node is configured for any network.
    let app = TestApp::spawn_with(|c| c.evm.networks.clear()).await;
    for (gate, status) in statuses(&app, "live").await {
        assert_eq!(status, "offline", "live {gate} is online although nothing scans it");
    }
    for (gate, status) in statuses(&app, "test").await {
        assert_eq!(status, "online", "test {gate}");
    }
    let m = app.merchant().await;
    let live = app.key(m, Environment::Live, &[]).await;
    for body in [
        json!({"currency": "BTC", "amount": "0.01"}),
        json!({"currency": "USDT", "network": "tron", "amount": "10"}),
        json!({"currency": "XRP", "amount": "10"}),
        json!({"currency": "SOL", "amount": "1"}),
        json!({"currency": "USDC", "network": "solana", "amount": "10"}),
        json!({"currency": "ETH", "network": "ethereum", "amount": "0.1"}),
    ] {
        let r = app.post("/v1/invoices", Some(&live), &body).await;
        r.assert_error(503, "gate_offline", None);
        assert!(r.body["error"]["message"].as_str().unwrap().contains("live"), "{}", r.body);
        let r = app.post("/v1/addresses", Some(&live), &body_without_amount(&body)).await;
        r.assert_error(503, "gate_offline", None);
    }
    // Nothing was written for the refused requests.
    assert_eq!(app.get("/v1/invoices", Some(&live)).await.body["meta"]["pagination"]["total"], 0);
}

fn body_without_amount(body: &Value) -> Value {
    let mut b = body.clone();
    b.as_object_mut().unwrap().remove("amount");
    b
}

#[tokio::test]
async fn one_configured_evm_network_brings_exactly_its_gates_online() {
    let app = TestApp::spawn_with(|c| {
        c.evm.networks.clear();
        c.evm.networks.insert("arbitrum".into(), node());
    })
    .await;
    for (gate, status) in statuses(&app, "live").await {
        let expected = if gate.starts_with("arbitrum") { "online" } else { "offline" };
        assert_eq!(status, expected, "live {gate}");
    }
    // The checkout's method list of a live deferred invoice offers only those gates.
    let m = app.merchant().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let inv =
        app.create_invoice(&live, json!({"is_deferred": true, "amount_fiat": "50", "fiat_currency": "USD"})).await;
    let r = app.get(&format!("/checkout/{}/state", inv["id"].as_str().unwrap()), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let methods: Vec<String> = r.data()["options"]
        .as_array()
        .unwrap_or_else(|| panic!("no options: {}", r.body))
        .iter()
        .map(|o| o["gate"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!methods.is_empty(), "{}", r.body);
    assert!(methods.iter().all(|g| g.starts_with("arbitrum")), "{methods:?}");
}

#[tokio::test]
async fn live_payouts_and_refunds_need_a_signer() {
    let app = TestApp::spawn().await; // every EVM network has a node, none a hot wallet key
    let m = app.merchant().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let inv = app.create_invoice(&live, json!({"currency": "ETH", "network": "ethereum", "amount": "1"})).await;
    let invoice = Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap();
    credit_invoice_in(&app.state.db, Environment::Live, m, invoice, "ethereum", "1").await;

    let payout = json!({"currency": "ETH", "network": "ethereum", "amount": "0.1", "destination": ETH_DEST});
    let r = app.post("/v1/payouts", Some(&live), &payout).await;
    r.assert_error(503, "gate_offline", None);
    assert!(r.body["error"]["message"].as_str().unwrap().contains("signer"), "{}", r.body);
    let refund = json!({"invoice_id": invoice, "currency": "ETH", "network": "ethereum", "amount": "0.1", "destination": ETH_DEST});
    app.post_idempotent("/v1/refunds", &live, "r1", &refund).await.assert_error(503, "gate_offline", None);
    // A live gate without an adapter refuses payouts whatever is configured.
    let btc = json!({"currency": "BTC", "amount": "0.01", "destination": BTC_DEST});
    app.post("/v1/payouts", Some(&live), &btc).await.assert_error(503, "gate_offline", None);
    // Nothing was reserved by the refused requests.
    let (b, _) = testkit::assert_ledger_sums(&app.state.db, m, "ethereum").await;
    assert_eq!((b.available.0, b.reserved.0), (rust_decimal::Decimal::ONE, rust_decimal::Decimal::ZERO));

    // The same deployment with a hot wallet key for ethereum accepts both.
    let signed = TestApp::spawn_on(app.db.clone(), |c| {
        c.evm.networks.get_mut("ethereum").unwrap().hot_wallet_key = Some(Redacted("11".repeat(32)));
    })
    .await;
    let r = signed.post("/v1/payouts", Some(&live), &payout).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = signed.post_idempotent("/v1/refunds", &live, "r1", &refund).await;
    assert_eq!(r.status, 201, "{}", r.body);
    // Test keys pay out through the sandbox signer, as before.
    let (_, test) = app.test_key().await;
    let r = app.post("/v1/payouts", Some(&test), &payout).await;
    assert_ne!(r.body["error"]["code"], "gate_offline", "{}", r.body);
}
