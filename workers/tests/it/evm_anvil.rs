//! The EVM adapter against a real node: anvil (npm `@foundry-rs/anvil-linux-amd64`, binary in
//! `$ANVIL_BIN` or on `PATH`) on a free loopback port, with an ERC-20 (`tests/evm/TestToken.sol`)
//! deployed for the test as the `ethereum_usdt` contract. The live pipeline (scanner and tracker
//! rules) runs in the test against it. Run with `--features anvil-tests` (`.ci/run` does).
//!
//! - an invoice paid in ETH and one paid with the token, confirmed after the gate's depth (12)
//!   and credited; tracking ends at twice that depth;
//! - a deposit removed by `anvil_reorg` before confirmation (pending released, invoice back to
//!   pending) and another after it (credit taken back, invoice invalid), each only once it
//!   stayed missing over the gone span; one missing once is not reversed; a reversed one mined
//!   again is revived and credited once;
//! - the scanner, stopped while 100 blocks pass with a deposit among them, catches up in bounded
//!   batches and records it;
//! - an endpoint that fails is retried; a scan that still fails leaves the cursor where it was;
//! - the token sent to an ETH invoice's address credits nothing and is recorded once as
//!   unclaimed;
//! - balances: ETH and the token as the newest block holds them, never the mempool.
//!
//! Payouts from the hot wallet on the same node are in `evm_anvil_payouts`.
#![cfg(feature = "anvil-tests")]

use domain::config::EvmNetworkConfig;
use entity::{Environment, PaymentStatus, UnclaimedReason, payment, scan_cursor};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::anvil::{Anvil, quantity};
use testkit::d;
use uuid::Uuid;
use workers::chain::{Chain, Chains};
use workers::{scanner, tracker};

use crate::support::evm_node::{app_on, node};

struct Live {
    anvil: Anvil,
    token: String,
    app: TestApp,
    key: String,
    chains: Chains,
    merchant: Uuid,
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

/// Tracking ends at the final depth, twice the gate's 12 blocks (a reversal is watched for until
/// there): from then on no job, no hand-over of the blocks that follow, no look at it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracking_ends_at_twice_the_gates_depth() {
    use crate::support::tracking::assert_tracking_ended;
    let l = live().await;
    // Mined at once, one block on top: 2 confirmations.
    let (inv, _, _) = l.eth_deposit("0.1", 100_000_000_000_000_000, 1).await;
    assert_eq!(l.payment(&inv).await.confirmations, 2);
    l.step_over(10).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert!(l.payment(&inv).await.next_check_at.is_some(), "watched for a reversal");
    l.step_over(12).await;
    let p = l.payment(&inv).await;
    assert_eq!(p.confirmations, 24);
    let (db, cfg) = (&l.app.state.db, &l.app.state.config.pipeline);
    assert_tracking_ended(db, &l.chains, cfg, p.id, None).await;
    for _ in 0..3 {
        let from = l.chain("ethereum").tip().await.unwrap() + 1;
        l.anvil.mine(1).await;
        l.scan(100).await;
        let to = l.chain("ethereum").tip().await.unwrap();
        assert_tracking_ended(db, &l.chains, cfg, p.id, Some(from..=to)).await;
    }
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

/// Live deposit safety on a real node: the node answers "unknown transaction" once (a reorganisation
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

/// Live deposit safety on a real node: a credited deposit vanishes (reorganised away and dropped
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
        ..Default::default()
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

/// Balances are the newest block's state: ETH from `eth_getBalance` to the wei, the token from
/// its `balanceOf` in its 6 decimals; a transfer waiting in the mempool is not held until it
/// is mined; a token address without a contract is an error, never a zero balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eth_and_token_balances_are_the_newest_blocks_state() {
    let l = live().await;
    let (eth, usdt) = (l.chain("ethereum"), l.chain("ethereum_usdt"));
    let (holder, other) = ("0x00000000000000000000000000000000000000Ab", "0x00000000000000000000000000000000000000cd");
    for chain in [&eth, &usdt] {
        assert_eq!(chain.balance(holder).await.unwrap(), Decimal::ZERO, "{}", chain.gate().id);
    }
    l.anvil.send_eth(holder, 1_500_000_000_000_000_001).await;
    l.anvil.send_token(&l.token, &holder.to_ascii_lowercase(), 2_500_000).await;
    assert_eq!(eth.balance(holder).await.unwrap(), d("1.500000000000000001"));
    assert_eq!(usdt.balance(holder).await.unwrap(), d("2.5"));

    l.anvil.rpc("evm_setAutomine", json!([false])).await;
    let tx = json!({"from": l.anvil.from, "to": other, "value": "0x64"});
    let hash = l.anvil.rpc("eth_sendTransaction", json!([tx])).await;
    let pending = l.anvil.rpc("eth_getTransactionByHash", json!([hash])).await;
    assert!(pending["blockNumber"].is_null(), "in the mempool: {pending}");
    assert_eq!(eth.balance(other).await.unwrap(), Decimal::ZERO, "the mempool is not counted");
    l.anvil.mine(1).await;
    l.anvil.receipt(hash.as_str().unwrap()).await;
    let got = eth.balances(&[other, holder, "0x12"]).await;
    assert_eq!(got[0].as_ref().unwrap(), &d("0.0000000000000001"));
    assert_eq!(got[1].as_ref().unwrap(), &d("1.500000000000000001"));
    assert!(got[2].is_err(), "not an address: fails alone");

    let nowhere = workers::chain::evm::Token {
        contract: "0x00000000000000000000000000000000000000ee".parse().unwrap(),
        decimals: 6,
    };
    let rpc = std::sync::Arc::new(workers::chain::evm::Rpc::new(&node(&l.anvil, 1, 10, false)));
    let gate = domain::gates::find("ethereum_usdt").unwrap();
    let no_contract = workers::chain::evm::EvmChain::new(gate, rpc, Some(nowhere), 0);
    assert!(no_contract.balance(holder).await.is_err(), "no contract there");
}
