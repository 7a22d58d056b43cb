//! EVM payouts against a real node: anvil (as in `evm_anvil`) with the hot wallet at its second
//! dev account. ETH and token payouts complete with the real fee and two executors never reuse a
//! nonce; a reverted payout fails only at the gate's depth; payouts refused for lack of gas wait
//! and complete after a refill without a nonce gap; a stuck payout replaced by the operator
//! fails and releases its funds; a nonce another transaction used fails the payout once that
//! transaction is deep. Run with `--features anvil-tests` (`.ci/run` does).

#![cfg(feature = "anvil-tests")]

use std::time::{Duration, Instant};

use entity::Environment;
use rust_decimal::Decimal;
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::anvil::{Anvil, quantity};
use testkit::d;
use uuid::Uuid;
use workers::chain::Chains;

use crate::support::evm_node::{HOT_WALLET, app_on, node};

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
    domain::payouts::operator::request_replace(db, id.into()).await.unwrap();
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

/// `ops payouts fail` on a signed payout: refused while its transaction may still be mined,
/// done once the node shows its nonce used by another transaction at the gate's depth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_fails_a_signed_payout_only_once_its_nonce_is_used_at_depth() {
    use domain::payouts::operator;
    use entity::PayoutStatus;
    use workers::executor::operator::dead_tx;
    let x = Payouts::start().await;
    let db = &x.app.state.db;
    let (id, executor) = x.sent_to_the_mempool(0x51, "0.05").await;
    let original = x.row(id).await.tx_hash.unwrap();
    // In the mempool: it may be mined.
    assert_eq!(dead_tx(&executor.chains, &x.row(id).await).await.unwrap(), None);
    let err = operator::fail(db, id.into(), "stuck", None).await.unwrap_err().to_string();
    assert!(err.contains("may still be mined"), "{err}");
    x.anvil.rpc("anvil_dropTransaction", json!([original])).await;
    let other = json!({"from": HOT_WALLET, "to": HOT_WALLET, "value": "0x0", "nonce": "0x0"});
    x.anvil.rpc("eth_sendTransaction", json!([other])).await;
    x.anvil.mine(1).await;
    // Its nonce used one block deep: a reorganisation could still undo that.
    assert_eq!(dead_tx(&executor.chains, &x.row(id).await).await.unwrap(), None);
    x.anvil.mine(11).await;
    let dead = dead_tx(&executor.chains, &x.row(id).await).await.unwrap().expect("dead at depth");
    assert_eq!(dead.tx_hash, original);
    assert!(dead.why.contains("nonce 0 was used by another transaction"), "{dead:?}");
    let p = operator::fail(db, id.into(), "stuck", Some(&dead)).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    let b = x.balance().await;
    assert_eq!((b.available.0, b.reserved.0), (d("2"), Decimal::ZERO), "released exactly");
    assert_eq!(testkit::event_payloads(db, "payout.failed").await.len(), 1);
}

/// Two executors on one payout: B parked at its fee read before anything was signed; A signs
/// and stores the payout's transaction, which the node refuses for now (no gas in the hot
/// wallet), so the payout stays `queued` with it. Released, B's fee read is refused for good:
/// its verdict is about an unsigned payout, which this one no longer is, so B looks again and
/// the payout keeps its transaction (and its nonce) and completes once the wallet is refilled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_executor_refused_before_signing_never_fails_a_payout_another_executor_signed() {
    use crate::support::interleave::{Stop, stale};
    use entity::PayoutStatus;
    let x = Payouts::start().await;
    let db = &x.app.state.db;
    x.set_balance(1).await;
    let id = x.payout(&checksummed(0x61), "0.05").await;
    let a = x.executor();
    let stop = Stop::armed();
    let b = stale(&a, "ethereum", None, Some(stop.clone()));
    let parked = tokio::spawn(async move { b.execute(id).await });
    stop.parked().await;
    a.execute(id).await.unwrap();
    let p = x.row(id).await;
    let h1 = p.tx_hash.clone().expect("A stored its transaction");
    assert_eq!(p.status, PayoutStatus::Queued, "refused for now: no gas");
    stop.release();
    parked.await.unwrap().unwrap();
    let p = x.row(id).await;
    assert_eq!((p.status, p.tx_hash.as_deref()), (PayoutStatus::Queued, Some(h1.as_str())), "{:?}", p.failure_reason);
    assert!(x.balance().await.reserved.0 > Decimal::ZERO, "still reserved");
    assert!(testkit::event_payloads(db, "payout.failed").await.is_empty());
    x.set_balance(10u128.pow(20)).await;
    x.run_until(&[id], PayoutStatus::Completed, 4).await;
    assert_eq!(x.row(id).await.tx_hash.as_deref(), Some(h1.as_str()), "the stored transaction, nonce 0");
    assert_eq!(x.tx_count().await, 1);
}
