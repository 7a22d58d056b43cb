//! The EVM adapter against a real node: anvil (npm `@foundry-rs/anvil-linux-amd64`, binary in
//! `$ANVIL_BIN` or on `PATH`) on a free loopback port, with an ERC-20 (`tests/evm/TestToken.sol`)
//! deployed for the test as the `ethereum_usdt` contract. The live pipeline (scanner and tracker
//! rules) runs in the test against it. Run with `--features anvil-tests` (`.ci/run` does).
//!
//! - an invoice paid in ETH and one paid with the token, confirmed after the gate's depth (12)
//!   and credited;
//! - a deposit removed by `anvil_reorg` before confirmation (pending released, invoice back to
//!   pending) and another after it (credit taken back, invoice invalid), each only once it
//!   stayed missing over the gone span; one missing once is not reversed; a reversed one mined
//!   again is revived and credited once;
//! - the scanner, stopped while 100 blocks pass with a deposit among them, catches up in bounded
//!   batches and records it;
//! - an endpoint that fails is retried; a scan that still fails leaves the cursor where it was;
//! - the token sent to an ETH invoice's address credits nothing and is recorded once as
//!   unclaimed.
#![cfg(feature = "anvil-tests")]

use std::time::{Duration, Instant};

use domain::config::{EvmNetworkConfig, EvmTokenConfig};
use entity::{Environment, PaymentStatus, UnclaimedReason, payment, scan_cursor};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::anvil::{Anvil, quantity};
use testkit::d;
use uuid::Uuid;
use workers::chain::{Chain, Chains};
use workers::pipeline::{scanner, tracker};

struct Live {
    anvil: Anvil,
    token: String,
    app: TestApp,
    key: String,
    chains: Chains,
    merchant: Uuid,
}

/// The ethereum network on `anvil`, paying out from [`HOT_WALLET`] when `hot_wallet`.
fn node(anvil: &Anvil, max_retries: u32, retry_backoff_ms: u64, hot_wallet: bool) -> EvmNetworkConfig {
    EvmNetworkConfig {
        rpc_url: anvil.url.clone(),
        max_retries,
        retry_backoff_ms,
        hot_wallet_key: hot_wallet.then(|| domain::config::Redacted(HOT_WALLET_KEY.into())),
        chain_id: hot_wallet.then_some(31337),
        ..Default::default()
    }
}

/// A test app on the ethereum network `net`, with `token` as the `ethereum_usdt` contract.
async fn app_on(net: EvmNetworkConfig, token: Option<&str>) -> TestApp {
    TestApp::spawn_with(|c| {
        c.evm.networks.insert("ethereum".into(), net);
        if let Some(token) = token {
            let token = EvmTokenConfig { contract: token.to_owned(), decimals: Some(6) };
            c.evm.tokens.insert("ethereum_usdt".into(), token);
        }
    })
    .await
}

async fn live() -> Live {
    let anvil = Anvil::start().await;
    let token = anvil.deploy_token(1_000_000_000_000).await;
    // Deep enough that no test's reorganisation removes the contract itself.
    anvil.mine(30).await;
    let app = app_on(node(&anvil, 2, 50, false), Some(&token)).await;
    let (merchant, key) = app.live_key().await;
    let chains = Chains::new(&app.state.db, &app.state.config.sandbox).with_evm(&app.state.config.evm);
    let l = Live { anvil, token, app, key, chains, merchant };
    // The live scan starts at the tip: take the cursors now, before any deposit.
    l.scan(100).await;
    l
}

impl Live {
    fn chain(&self, gate: &str) -> std::sync::Arc<dyn Chain> {
        self.chains.get(Environment::Live, gate).unwrap_or_else(|| panic!("no live chain for {gate}"))
    }

    /// Scans both gates to the tip in batches of `batch` blocks; returns the batches run.
    async fn scan(&self, batch: u64) -> usize {
        let mut rounds = 0;
        for gate in ["ethereum", "ethereum_usdt"] {
            let chain = self.chain(gate);
            while scanner::scan_gate(&self.app.state.db, chain.as_ref(), Environment::Live, batch)
                .await
                .unwrap()
                .is_some()
            {
                rounds += 1;
            }
        }
        rounds
    }

    async fn track(&self) {
        let db = &self.app.state.db;
        for p in
            payment::Entity::find().filter(payment::Column::Environment.eq(Environment::Live)).all(db).await.unwrap()
        {
            tracker::track_payment(db, &self.chains, &self.app.state.config.pipeline, p.id).await.unwrap();
        }
    }

    async fn step(&self) {
        self.scan(100).await;
        self.track().await;
    }

    /// Mines `blocks` blocks one by one, a pipeline step after each.
    async fn step_over(&self, blocks: u64) {
        for _ in 0..blocks {
            self.anvil.mine(1).await;
            self.step().await;
        }
    }

    /// Mines `blocks` blocks at once, then a pipeline step.
    async fn mine_and_step(&self, blocks: u64) {
        self.anvil.mine(blocks).await;
        self.step().await;
    }

    /// An ETH invoice of `amount` and a deposit of `wei` to it, `blocks` mined and a pipeline
    /// step: the invoice, the transaction's hash and its signed bytes (to broadcast it again).
    async fn eth_deposit(&self, amount: &str, wei: u128, blocks: u64) -> (Value, String, Value) {
        let inv = self.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": amount})).await;
        let hash = self.anvil.send_eth(inv["deposit_address"].as_str().unwrap(), wei).await;
        let raw = self.anvil.rpc("eth_getRawTransactionByHash", json!([hash])).await;
        self.mine_and_step(blocks).await;
        (inv, hash, raw)
    }

    /// The invoice's status and its first payment's.
    async fn assert_invoice(&self, invoice: &Value, status: &str, payment_status: &str) {
        let got = self.get(&invoice["id"]).await;
        assert_eq!(got["status"], status, "{got}");
        assert_eq!(got["payments"][0]["status"], payment_status);
    }

    /// Every bucket of `gate`'s balance is the sum of its ledger entries: the balance and entries.
    async fn assert_ledger(&self, gate: &str) -> (entity::balance::Model, Vec<entity::ledger_entry::Model>) {
        testkit::assert_ledger_sums(&self.app.state.db, self.merchant, gate).await
    }

    async fn status(&self, invoice: &Value) -> Value {
        self.get(&invoice["id"]).await["status"].clone()
    }

    /// The invoice's status, and `gate`'s (available, pending) balance.
    async fn assert_state(&self, invoice: &Value, status: &str, gate: &str, (available, pending): (&str, &str)) {
        assert_eq!(self.status(invoice).await, status);
        assert_eq!(self.balance(gate).await, (d(available), d(pending)), "{gate} balance");
    }

    /// The last `depth` blocks are reorganised away and the node forgets the transaction `hash`
    /// (dropped from its mempool too).
    async fn reorg_and_drop(&self, depth: u64, hash: &str) {
        self.anvil.reorg(depth).await;
        let _ = self.anvil.try_rpc("anvil_dropTransaction", json!([hash])).await;
    }

    /// The signed transaction `raw` broadcast again.
    async fn rebroadcast(&self, raw: &Value) {
        self.anvil.rpc("eth_sendRawTransaction", json!([raw])).await;
    }

    async fn events(&self, invoice: &Value) -> Vec<String> {
        testkit::invoice_events(&self.app.state.db, invoice["id"].as_str().unwrap()).await
    }

    async fn payment(&self, invoice: &Value) -> payment::Model {
        let id = Uuid::parse_str(invoice["id"].as_str().unwrap()).unwrap();
        payment::Entity::find()
            .filter(payment::Column::InvoiceId.eq(id))
            .one(&self.app.state.db)
            .await
            .unwrap()
            .unwrap()
    }

    async fn invoice(&self, body: Value) -> Value {
        self.app.create_invoice(&self.key, body).await
    }

    async fn get(&self, id: &Value) -> Value {
        self.app.get(&format!("/v1/invoices/{}", id.as_str().unwrap()), Some(&self.key)).await.data().clone()
    }

    async fn balance(&self, gate: &str) -> (Decimal, Decimal) {
        let rows = self.app.get("/v1/balances", Some(&self.key)).await.data().clone();
        rows.as_array().unwrap().iter().find(|r| r["gate_id"] == gate).map_or((Decimal::ZERO, Decimal::ZERO), |r| {
            (d(r["available"].as_str().unwrap()), d(r["pending"].as_str().unwrap()))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eth_and_token_deposits_confirm_after_the_gates_depth_and_are_credited() {
    let l = live().await;
    let eth = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "0.5"})).await;
    let usdt = l.invoice(json!({"currency": "USDT", "network": "ethereum", "amount": "25"})).await;
    let eth_addr = eth["deposit_address"].as_str().unwrap();
    let usdt_addr = usdt["deposit_address"].as_str().unwrap();
    l.anvil.send_eth(eth_addr, 500_000_000_000_000_000).await;
    l.anvil.send_token(&l.token, usdt_addr, 25_000_000).await;
    l.step().await;
    for inv in [&eth, &usdt] {
        let got = l.get(&inv["id"]).await;
        assert_eq!(got["status"], "confirming", "{got}");
        assert_eq!(got["payments"][0]["required_confirmations"], 12);
    }
    assert_eq!(l.balance("ethereum").await, (d("0"), d("0.5")));
    assert_eq!(l.balance("ethereum_usdt").await, (d("0"), d("25")));
    // The ETH deposit is one block deeper than the token's; after 10 more blocks it has 12
    // confirmations, the token 11.
    l.mine_and_step(10).await;
    assert_eq!(l.status(&eth).await, "paid");
    assert_eq!(l.status(&usdt).await, "confirming");
    assert_eq!(l.get(&usdt["id"]).await["payments"][0]["confirmations"], 11);
    l.mine_and_step(1).await;
    l.assert_state(&usdt, "paid", "ethereum", ("0.5", "0")).await;
    assert_eq!(l.balance("ethereum_usdt").await, (d("25"), d("0")));
    // Re-scans and re-tracks record and credit nothing twice.
    l.mine_and_step(3).await;
    l.step().await;
    assert_eq!(payment::Entity::find().all(&l.app.state.db).await.unwrap().len(), 2);
    assert_eq!(l.balance("ethereum").await, (d("0.5"), d("0")));
    l.assert_ledger("ethereum").await;
    l.assert_ledger("ethereum_usdt").await;
}

/// Another asset sent to one of our deposit addresses (the token to an ETH invoice's address)
/// credits nobody: the scanner records it once as unclaimed for the operator, however often its
/// block is read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_sent_to_an_eth_invoices_address_is_recorded_once_as_unclaimed() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "1"})).await;
    let addr = inv["deposit_address"].as_str().unwrap();
    let hash = l.anvil.send_token(&l.token, addr, 3_000_000).await;
    l.step_over(13).await;
    let block = quantity(&l.anvil.rpc("eth_getTransactionReceipt", json!([hash])).await["blockNumber"]);
    assert_eq!(l.status(&inv).await, "pending");
    assert_eq!(l.balance("ethereum_usdt").await, (Decimal::ZERO, Decimal::ZERO));
    assert_eq!(l.balance("ethereum").await, (Decimal::ZERO, Decimal::ZERO));
    let expected = vec![(
        "ethereum_usdt".to_owned(),
        hash.to_ascii_lowercase(),
        d("3"),
        UnclaimedReason::OtherGate,
        domain::addresses::address_key(domain::chain::address::AddressFamily::Evm, addr, None),
    )];
    assert_eq!(testkit::unclaimed_deposits(&l.app.state.db).await, expected);
    testkit::rescan_from(&l.app.state.db, Environment::Live, "ethereum_usdt", block as i64).await;
    l.step().await;
    assert_eq!(testkit::unclaimed_deposits(&l.app.state.db).await, expected, "a rescan records nothing twice");
    let payments = payment::Entity::find().all(&l.app.state.db).await.unwrap();
    assert!(payments.is_empty(), "{payments:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_removed_by_a_reorg_before_and_after_confirmation_are_reversed() {
    let l = live().await;
    // Before confirmation: seen, then reorganised away.
    let early = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "0.1"})).await;
    l.anvil.send_eth(early["deposit_address"].as_str().unwrap(), 100_000_000_000_000_000).await;
    l.mine_and_step(2).await;
    l.assert_state(&early, "confirming", "ethereum", ("0", "0.1")).await;
    l.anvil.reorg(4).await;
    l.step().await;
    // Missing, but not for the whole span (12 blocks, 3 checks) yet: nothing changes.
    l.step_over(11).await;
    assert_eq!(l.status(&early).await, "confirming");
    assert_eq!(l.payment(&early).await.missing_checks, 12);
    l.step_over(1).await;
    l.assert_invoice(&early, "pending", "reversed").await;
    assert_eq!(l.balance("ethereum").await, (d("0"), d("0")));

    // After confirmation (credited): a deeper reorganisation takes the credit back.
    let late = l.invoice(json!({"currency": "USDT", "network": "ethereum", "amount": "10"})).await;
    l.anvil.send_token(&l.token, late["deposit_address"].as_str().unwrap(), 10_000_000).await;
    l.mine_and_step(12).await;
    l.assert_state(&late, "paid", "ethereum_usdt", ("10", "0")).await;
    l.anvil.reorg(15).await;
    l.step().await;
    l.step_over(11).await;
    assert_eq!(l.status(&late).await, "paid", "not reversed before the span");
    l.step_over(1).await;
    l.assert_invoice(&late, "invalid", "reversed").await;
    assert_eq!(l.balance("ethereum_usdt").await, (d("0"), d("0")));
    let events = l.events(&late).await;
    assert!(events.ends_with(&["invoice.deposit_reversed".to_owned(), "invoice.invalid".to_owned()]), "{events:?}");
    l.assert_ledger("ethereum").await;
    l.assert_ledger("ethereum_usdt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_reorganised_out_and_mined_again_is_credited_once() {
    let l = live().await;
    let (inv, _, raw) = l.eth_deposit("0.4", 400_000_000_000_000_000, 2).await;
    assert_eq!(l.status(&inv).await, "confirming");
    // A reorganisation drops it; the sender's node broadcasts it again and it lands in a later
    // block (same transaction, same hash).
    l.anvil.reorg(3).await;
    l.rebroadcast(&raw).await;
    l.mine_and_step(6).await;
    let got = l.get(&inv["id"]).await;
    assert_eq!(got["status"], "confirming", "{got}");
    assert_eq!(got["payments"].as_array().unwrap().len(), 1, "the rescan records it once");
    l.mine_and_step(6).await;
    l.assert_invoice(&inv, "paid", "confirmed").await;
    assert_eq!(l.balance("ethereum").await, (d("0.4"), d("0")));
    l.assert_ledger("ethereum").await;
}

/// Issue 14 item 1 on a real node: the node answers "unknown transaction" once (a reorganisation
/// dropped it), then the transaction is back: the payment is not reversed, and confirms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_missing_once_is_not_reversed() {
    let l = live().await;
    let (inv, hash, raw) = l.eth_deposit("0.3", 300_000_000_000_000_000, 2).await;
    l.reorg_and_drop(3, &hash).await;
    assert!(l.anvil.rpc("eth_getTransactionByHash", json!([hash])).await.is_null(), "the node forgot it");
    l.track().await;
    l.assert_invoice(&inv, "confirming", "confirming").await;
    assert_eq!(l.payment(&inv).await.missing_checks, 1);
    assert_eq!(l.balance("ethereum").await, (d("0"), d("0.3")));
    // Back on chain: the missing state is cleared and it confirms.
    l.rebroadcast(&raw).await;
    l.mine_and_step(1).await;
    let p = l.payment(&inv).await;
    assert_eq!((p.status, p.missing_since_height, p.missing_checks), (PaymentStatus::Confirming, None, 0));
    l.mine_and_step(12).await;
    l.assert_state(&inv, "paid", "ethereum", ("0.3", "0")).await;
    assert_eq!(l.events(&inv).await, ["invoice.confirming", "invoice.paid", "balance.credited"]);
    l.assert_ledger("ethereum").await;
}

/// Issue 14 item 2 on a real node: a credited deposit vanishes (reorganised away and dropped
/// from the mempool) for the whole span and is reversed; then the same signed transaction is
/// broadcast again and mined. The payment is revived and credited once more: ledger exact,
/// events in order (the invoice, invalid since the reversal, takes it as a late deposit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_deposit_reversed_then_mined_again_is_revived_and_credited_once() {
    let l = live().await;
    let (inv, hash, raw) = l.eth_deposit("0.4", 400_000_000_000_000_000, 12).await;
    l.assert_state(&inv, "paid", "ethereum", ("0.4", "0")).await;
    l.reorg_and_drop(14, &hash).await;
    l.step().await;
    l.step_over(12).await;
    l.assert_invoice(&inv, "invalid", "reversed").await;
    assert_eq!(l.balance("ethereum").await, (d("0"), d("0")));

    // The same signed transaction again (same hash), mined in a new block.
    l.rebroadcast(&raw).await;
    l.mine_and_step(1).await;
    let got = l.get(&inv["id"]).await;
    assert_eq!(got["payments"].as_array().unwrap().len(), 1, "the same payment, revived");
    assert_eq!(got["payments"][0]["status"], "confirming");
    assert_eq!(l.balance("ethereum").await, (d("0"), d("0.4")));
    l.mine_and_step(12).await;
    l.step().await;
    let got = l.get(&inv["id"]).await;
    assert_eq!(got["payments"][0]["status"], "confirmed");
    assert_eq!(got["status"], "invalid");
    assert_eq!(l.balance("ethereum").await, (d("0.4"), d("0")), "credited once");
    assert_eq!(l.events(&inv).await, testkit::REVIVED_DEPOSIT_EVENTS);
    let (bal, _) = l.assert_ledger("ethereum").await;
    assert_eq!((bal.available.0, bal.pending.0), (d("0.4"), d("0")));
    // Later scans and tracks change nothing.
    l.mine_and_step(30).await;
    assert_eq!(l.balance("ethereum").await, (d("0.4"), d("0")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scanner_that_missed_100_blocks_catches_up_in_bounded_batches() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "USDT", "network": "ethereum", "amount": "7"})).await;
    let eth = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "0.2"})).await;
    // The scanner is down while 100 blocks pass; the deposits are in the middle.
    let start = l.anvil.tip().await;
    l.anvil.mine(49).await;
    l.anvil.send_token(&l.token, inv["deposit_address"].as_str().unwrap(), 7_000_000).await;
    l.anvil.send_eth(eth["deposit_address"].as_str().unwrap(), 200_000_000_000_000_000).await;
    l.anvil.mine(49).await;
    assert_eq!(l.anvil.tip().await, start + 100);
    // Back: 100 blocks per gate in batches of 30 (4 each), every block read once.
    assert_eq!(l.scan(30).await, 8);
    for gate in ["ethereum", "ethereum_usdt"] {
        let c = scan_cursor::Entity::find_by_id((Environment::Live, gate.to_owned()))
            .one(&l.app.state.db)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(c.next_height as u64, start + 101, "{gate}");
    }
    l.track().await;
    for (i, height) in [(&inv, start + 50), (&eth, start + 51)] {
        let got = l.get(&i["id"]).await;
        assert_eq!(got["status"], "paid", "{got}");
        let p = payment::Entity::find()
            .filter(payment::Column::InvoiceId.eq(Uuid::parse_str(i["id"].as_str().unwrap()).unwrap()))
            .one(&l.app.state.db)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((p.block_height, p.status), (Some(height as i64), PaymentStatus::Confirmed));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_endpoint_is_retried_and_never_skips_a_block() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "0.3"})).await;
    l.anvil.send_eth(inv["deposit_address"].as_str().unwrap(), 300_000_000_000_000_000).await;
    let before = scan_cursor::Entity::find_by_id((Environment::Live, "ethereum".to_owned()))
        .one(&l.app.state.db)
        .await
        .unwrap()
        .unwrap();
    // A chain whose endpoint is down: the scan fails after its retries and moves nothing.
    let down = domain::config::EvmConfig {
        networks: [(
            "ethereum".to_owned(),
            EvmNetworkConfig {
                rpc_url: "http://127.0.0.1:9/".into(),
                max_retries: 2,
                retry_backoff_ms: 10,
                ..Default::default()
            },
        )]
        .into(),
        tokens: Default::default(),
    };
    let dead = Chains::default().with_evm(&down);
    let err = scanner::scan_gate(
        &l.app.state.db,
        dead.get(Environment::Live, "ethereum").unwrap().as_ref(),
        Environment::Live,
        100,
    )
    .await;
    assert!(err.is_err(), "a dead endpoint fails the scan");
    let after = scan_cursor::Entity::find_by_id((Environment::Live, "ethereum".to_owned()))
        .one(&l.app.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.next_height, before.next_height, "the cursor did not move");
    // The endpoint is back: the deposit is found.
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming");
}

/// anvil's second dev account (its well-known test key): the payout hot wallet.
const HOT_WALLET_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const HOT_WALLET: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// The `id` of a created object.
fn id_of(created: &Value) -> Uuid {
    Uuid::parse_str(created["id"].as_str().unwrap()).unwrap()
}

fn checksummed(byte: u8) -> String {
    alloy_primitives::Address::from([byte; 20]).to_checksum(None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eth_and_token_payouts_complete_with_the_real_fee_and_two_executors_never_reuse_a_nonce() {
    use entity::{PayoutStatus, payout};
    use workers::chain::signer::Signers;
    use workers::executor::{Executor, Next};

    let anvil = Anvil::start().await;
    let token = anvil.deploy_token(1_000_000_000_000).await;
    // The hot wallet holds ETH (a dev account) and 1,000 tokens.
    anvil.send_token(&token, HOT_WALLET, 1_000_000_000).await;
    anvil.mine(5).await;
    let app = app_on(node(&anvil, 2, 50, true), Some(&token)).await;
    let db = &app.state.db;
    let (merchant, key) = app.live_key().await;
    testkit::auto_approve_payouts_merchant_pays(db, merchant, Environment::Live).await;
    for (gate, fund) in [("ethereum", "2"), ("ethereum_usdt", "100")] {
        testkit::fund(db, merchant, Environment::Live, gate, fund).await;
    }
    let mut ids = Vec::new();
    let mut eth_to = Vec::new();
    for i in 0..5u8 {
        let to = checksummed(0x11 + i);
        let body = json!({"currency": "ETH", "network": "ethereum", "amount": format!("0.1{i}"), "destination": to});
        ids.push(id_of(&app.create("/v1/payouts", &key, body).await));
        eth_to.push((to, format!("0.1{i}")));
    }
    let token_to = checksummed(0x77);
    let body = json!({"currency": "USDT", "network": "ethereum", "amount": "25", "destination": token_to});
    ids.push(id_of(&app.create("/v1/payouts", &key, body).await));

    // Two executor processes' worth of executors, racing over every payout.
    let executor = || Executor {
        db: db.clone(),
        chains: Chains::new(db, &app.state.config.sandbox).with_evm(&app.state.config.evm),
        signers: Signers::default().with_evm(&app.state.config.evm).unwrap(),
        recheck: Duration::from_millis(10),
    };
    let (a, b) = (executor(), executor());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let forward = async {
            for id in &ids {
                let _: Next = a.execute(*id).await.unwrap();
            }
        };
        let backward = async {
            for id in ids.iter().rev() {
                let _: Next = b.execute(*id).await.unwrap();
            }
        };
        tokio::join!(forward, backward);
        let rows = payout::Entity::find().all(db).await.unwrap();
        if rows.iter().all(|p| p.status == PayoutStatus::Completed) {
            break;
        }
        assert!(Instant::now() < deadline, "payouts stuck: {:?}", rows.iter().map(|p| p.status).collect::<Vec<_>>());
        anvil.mine(4).await;
    }

    // Exactly one transaction per payout, with the hot wallet's nonces 0..6, none reused or skipped.
    let rows = payout::Entity::find().all(db).await.unwrap();
    let mut nonces = Vec::new();
    let mut eth_fees = Decimal::ZERO;
    for p in &rows {
        let hash = p.tx_hash.clone().unwrap();
        let tx = anvil.rpc("eth_getTransactionByHash", json!([hash])).await;
        assert_eq!(tx["from"].as_str().unwrap().to_ascii_lowercase(), HOT_WALLET);
        nonces.push(quantity(&tx["nonce"]) as u64);
        let receipt = anvil.receipt(&hash).await;
        let wei = quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"]);
        let real = Decimal::from_i128_with_scale(wei as i128, 18).normalize();
        if p.gate_id == "ethereum" {
            assert_eq!(p.network_fee.0, real, "an ETH payout records the fee it paid");
            eth_fees += real;
        } else {
            assert_eq!(p.network_fee.0, d("2"), "a token payout keeps its configured fee (gas is paid in ETH)");
        }
    }
    nonces.sort();
    assert_eq!(nonces, (0..6).collect::<Vec<u64>>());
    // On chain: every recipient got its amount.
    for (to, amount) in &eth_to {
        let wei = anvil.balance_of(to).await;
        assert_eq!(Decimal::from_i128_with_scale(wei as i128, 18).normalize(), d(amount), "{to}");
    }
    assert_eq!(anvil.token_balance_of(&token, &token_to).await, 25_000_000);
    // The ledger: funds less amounts and the real (ETH) or configured (token) fees.
    let (eth, _) = testkit::assert_ledger_sums(db, merchant, "ethereum").await;
    assert_eq!(eth.available.0, d("2") - d("0.6") - eth_fees);
    assert_eq!(eth.reserved.0, Decimal::ZERO);
    let (usdt, _) = testkit::assert_ledger_sums(db, merchant, "ethereum_usdt").await;
    assert_eq!(usdt.available.0, d("100") - d("25") - d("2"));
}

/// A live app paying out from the anvil hot wallet (`HOT_WALLET`), auto-approved, merchant
/// funded with 2 ETH in the ledger; `executor()` builds a payout executor as the worker does.
struct Payouts {
    anvil: Anvil,
    app: TestApp,
    key: String,
    merchant: Uuid,
}

impl Payouts {
    async fn start() -> Payouts {
        let anvil = Anvil::start().await;
        anvil.mine(2).await;
        let app = app_on(node(&anvil, 1, 20, true), None).await;
        let db = &app.state.db;
        let (merchant, key) = app.live_key().await;
        testkit::set_payout_settings(db, merchant, Environment::Live, |s| {
            s.payout_auto_approve = true;
            s.payout_delay_secs = 0;
            s.network_fee_allocation = entity::FeeAllocation::Merchant;
        })
        .await;
        testkit::fund(db, merchant, Environment::Live, "ethereum", "2").await;
        Payouts { anvil, app, key, merchant }
    }

    fn executor(&self) -> workers::executor::Executor {
        let (db, cfg) = (&self.app.state.db, &self.app.state.config);
        workers::executor::Executor {
            db: db.clone(),
            chains: Chains::new(db, &cfg.sandbox).with_evm(&cfg.evm),
            signers: workers::chain::signer::Signers::default().with_evm(&cfg.evm).unwrap(),
            recheck: Duration::from_millis(10),
        }
    }

    async fn payout(&self, to: &str, amount: &str) -> Uuid {
        let body = json!({"currency": "ETH", "network": "ethereum", "amount": amount, "destination": to});
        let r = self.app.post("/v1/payouts", Some(&self.key), &body).await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.body);
        Uuid::parse_str(r.data()["id"].as_str().unwrap()).unwrap()
    }

    /// With blocks mined only by hand from now on, a payout of `amount` ETH to
    /// `checksummed(recipient)`, signed and sent once by an executor: it sits in the mempool.
    async fn sent_to_the_mempool(&self, recipient: u8, amount: &str) -> (Uuid, workers::executor::Executor) {
        self.anvil.rpc("evm_setAutomine", json!([false])).await;
        let id = self.payout(&checksummed(recipient), amount).await;
        let executor = self.executor();
        executor.execute(id).await.unwrap();
        (id, executor)
    }

    /// The merchant's live ethereum balance, each bucket the sum of its ledger entries.
    async fn balance(&self) -> entity::balance::Model {
        testkit::assert_ledger_sums(&self.app.state.db, self.merchant, "ethereum").await.0
    }

    async fn row(&self, id: Uuid) -> entity::payout::Model {
        entity::payout::Entity::find_by_id(id).one(&self.app.state.db).await.unwrap().unwrap()
    }

    async fn tx_count(&self) -> u64 {
        self.anvil.tx_count(HOT_WALLET).await
    }

    async fn set_balance(&self, wei: u128) {
        self.anvil.rpc("anvil_setBalance", json!([HOT_WALLET, format!("0x{wei:x}")])).await;
    }

    /// Runs the executor over `ids` (mining `mine` blocks between rounds) until every payout
    /// is in `status`, within 60 s.
    async fn run_until(&self, ids: &[Uuid], status: entity::PayoutStatus, mine: u64) {
        let executor = self.executor();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            for id in ids {
                executor.execute(*id).await.unwrap();
            }
            let mut rows = Vec::new();
            for id in ids {
                rows.push(self.row(*id).await.status);
            }
            if rows.iter().all(|s| *s == status) {
                return;
            }
            assert!(Instant::now() < deadline, "payouts not {status:?}: {rows:?}");
            if mine > 0 {
                self.anvil.mine(mine).await;
            }
        }
    }
}

/// A reverted payout transaction in a shallow block may still be reorganised into another
/// block on other state and succeed: the payout waits (its funds reserved) and fails, releasing
/// them, only once that block is at the gate's depth (12).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverted_payout_fails_only_once_its_block_is_at_the_gates_depth() {
    use entity::PayoutStatus;
    let x = Payouts::start().await;
    // The test ERC-20 has no payable fallback: ETH sent to it reverts.
    let contract = x.anvil.deploy_token(1).await;
    let contract = contract.parse::<alloy_primitives::Address>().unwrap().to_checksum(None);
    let id = x.payout(&contract, "0.05").await;
    let executor = x.executor();
    executor.execute(id).await.unwrap();
    let hash = x.row(id).await.tx_hash.expect("sent");
    assert_eq!(quantity(&x.anvil.receipt(&hash).await["status"]), 0, "mined, reverted");
    x.anvil.mine(10).await;
    executor.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Processing, "11 deep: a reorganisation could still include it elsewhere");
    assert!(x.balance().await.reserved.0 > Decimal::ZERO, "still reserved");
    x.anvil.mine(1).await;
    executor.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed, "{p:?}");
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("reverted"), "{p:?}");
    let b = x.balance().await;
    assert_eq!((b.available.0, b.reserved.0), (d("2"), Decimal::ZERO), "released exactly");
}

fn nonce_of(raw: &str) -> u64 {
    domain::chain::evm_tx::signed_terms(raw).expect("an EIP-1559 transaction").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_refused_for_lack_of_gas_wait_and_complete_after_a_refill_without_a_nonce_gap() {
    use entity::PayoutStatus;
    let x = Payouts::start().await;
    // The hot wallet has (almost) no ETH: the node refuses every transaction before its mempool.
    x.set_balance(1).await;
    let mut ids = Vec::new();
    for i in 0..3u8 {
        ids.push(x.payout(&checksummed(0x21 + i), &format!("0.01{i}")).await);
    }
    let executor = x.executor();
    for _ in 0..3 {
        for id in &ids {
            executor.execute(*id).await.unwrap();
        }
    }
    let mut nonces = Vec::new();
    for id in &ids {
        let p = x.row(*id).await;
        assert!(
            matches!(p.status, PayoutStatus::Queued | PayoutStatus::Processing),
            "waits, never failed: {:?} {:?}",
            p.status,
            p.failure_reason
        );
        nonces.push(nonce_of(p.signed_tx.as_deref().expect("the signed transaction is kept")));
    }
    nonces.sort();
    assert_eq!(nonces, vec![0, 1, 2]);
    assert_eq!(x.tx_count().await, 0, "nothing mined while the wallet has no gas");
    let b = x.balance().await;
    assert!(b.reserved.0 > Decimal::ZERO, "still reserved");

    // Refilled: every payout goes out with its own nonce; nothing waits behind a hole.
    x.set_balance(10u128.pow(20)).await;
    x.run_until(&ids, PayoutStatus::Completed, 4).await;
    assert_eq!(x.tx_count().await, 3, "nonces 0..3 used, no gap, no extra transaction");
    let mut mined = Vec::new();
    for id in &ids {
        mined.push(x.anvil.nonce_of(&x.row(*id).await.tx_hash.unwrap()).await);
    }
    mined.sort();
    assert_eq!(mined, vec![0, 1, 2]);
    let b = x.balance().await;
    assert_eq!(b.reserved.0, Decimal::ZERO);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_payout_replaced_by_the_operator_fails_releases_its_funds_and_its_nonce_is_not_reused() {
    use entity::PayoutStatus;
    let x = Payouts::start().await;
    let db = &x.app.state.db;
    // Blocks only when mined by hand: the payout's transaction sits in the mempool.
    let (id, executor) = x.sent_to_the_mempool(0x31, "0.05").await;
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Processing);
    let original = p.tx_hash.clone().unwrap();
    assert!(!x.anvil.rpc("eth_getTransactionByHash", json!([original])).await.is_null(), "in the mempool");
    let before = x.balance().await;

    // `ops payouts replace`: recorded; the executor signs and sends the replacement.
    domain::payouts::operator::request_replace(db, id).await.unwrap();
    executor.execute(id).await.unwrap();
    let r = entity::payout_replacement::Entity::find_by_id(id).one(db).await.unwrap().unwrap();
    let replacement = r.tx_hash.clone().expect("replacement signed and stored");
    assert_eq!(nonce_of(r.signed_tx.as_deref().unwrap()), 0, "the same nonce");
    let (_, orig_fees) = domain::chain::evm_tx::signed_terms(p.signed_tx.as_deref().unwrap()).unwrap();
    let (_, new_fees) = domain::chain::evm_tx::signed_terms(r.signed_tx.as_deref().unwrap()).unwrap();
    assert!(new_fees.max_fee_per_gas >= 2 * orig_fees.max_fee_per_gas, "{orig_fees:?} → {new_fees:?}");
    // One block: the replacement is mined, the original can never be.
    x.anvil.rpc("evm_mine", json!([])).await;
    let receipt = x.anvil.receipt(&replacement).await;
    assert_eq!(receipt["to"].as_str().unwrap().to_ascii_lowercase(), HOT_WALLET, "zero-value to itself");
    assert!(x.anvil.rpc("eth_getTransactionReceipt", json!([original])).await.is_null());
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing, "not failed before the gate's depth");

    x.run_until(&[id], PayoutStatus::Failed, 4).await;
    let p = x.row(id).await;
    assert!(p.failure_reason.as_deref().unwrap().contains("replaced by operator"), "{:?}", p.failure_reason);
    assert!(x.anvil.rpc("eth_getTransactionByHash", json!([original])).await.is_null(), "the original never lands");
    let after = x.balance().await;
    assert_eq!(after.reserved.0, Decimal::ZERO);
    assert_eq!(after.available.0, before.available.0 + before.reserved.0, "released exactly");
    assert_eq!(after.available.0, d("2"));
    assert_eq!(x.anvil.balance_of(&checksummed(0x31)).await, 0, "the recipient got nothing");
    assert_eq!(testkit::event_payloads(db, "payout.failed").await.len(), 1);

    // The next payout takes nonce 1: the replaced nonce is not reused.
    x.anvil.rpc("evm_setAutomine", json!([true])).await;
    let next = x.payout(&checksummed(0x32), "0.02").await;
    x.run_until(&[next], PayoutStatus::Completed, 4).await;
    assert_eq!(nonce_of(x.row(next).await.signed_tx.as_deref().unwrap()), 1);
    assert_eq!(x.tx_count().await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_whose_nonce_another_transaction_used_fails_once_that_one_is_deep_and_never_before() {
    use entity::PayoutStatus;
    let x = Payouts::start().await;
    let (id, executor) = x.sent_to_the_mempool(0x41, "0.05").await;
    let original = x.row(id).await.tx_hash.unwrap();
    // The node drops it, and someone sends another transaction from the hot wallet with nonce 0.
    x.anvil.rpc("anvil_dropTransaction", json!([original])).await;
    let other = json!({"from": HOT_WALLET, "to": HOT_WALLET, "value": "0x0", "nonce": "0x0"});
    x.anvil.rpc("eth_sendTransaction", json!([other])).await;
    x.anvil.mine(1).await;
    // One block deep: it could still be reorganised away, so the payout waits.
    executor.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    // At the gate's depth (12) the payout's transaction can never be mined: it fails, released.
    x.anvil.mine(11).await;
    executor.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed, "{:?}", p.failure_reason);
    assert!(
        p.failure_reason.as_deref().unwrap().contains("nonce 0 was used by another transaction"),
        "{:?}",
        p.failure_reason
    );
    assert!(x.anvil.rpc("eth_getTransactionByHash", json!([original])).await.is_null());
    let b = x.balance().await;
    assert_eq!((b.available.0, b.reserved.0), (d("2"), Decimal::ZERO), "released exactly");
}
