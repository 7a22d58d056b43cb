//! Live EVM payouts as deployed: the real `api` binary and **two `payout-executor` processes**
//! over one database (PostgreSQL with `pg-tests`) and queue backend, against anvil with a hot
//! wallet configured through `PAYGATE_EVM__*` variables. Every payout completes with exactly one
//! transaction, and the hot wallet's nonces are 0..n: none reused, none skipped. Run with
//! `--features anvil-tests` (`.ci/run` does).
#![cfg(feature = "anvil-tests")]

use testkit::fleet;

use std::collections::HashSet;
use std::str::FromStr;
use std::time::{Duration, Instant};

use entity::{Environment, FeeAllocation, PayoutStatus, payout};
use fleet::{Deployment, wait_ready};
use rust_decimal::Decimal;
use sea_orm::EntityTrait;
use serde_json::json;
use testkit::anvil::Anvil;

/// anvil's second dev account (its well-known test key).
const HOT_WALLET_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const HOT_WALLET: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executor_processes_pay_out_on_anvil_without_reusing_a_nonce() {
    const PAYOUTS: u8 = 8;
    let anvil = Anvil::start().await;
    // Live EVM gates are online once the live EVM account key is configured.
    let xpub = testkit::live_keys().evm_xpub.unwrap();
    let dep = Deployment::start(
        "EVM",
        Environment::Live,
        &[
            ("PAYGATE_ADDRESSES__LIVE__EVM_XPUB", xpub.as_str()),
            ("PAYGATE_EVM__NETWORKS__ETHEREUM__RPC_URL", anvil.url.as_str()),
            ("PAYGATE_EVM__NETWORKS__ETHEREUM__HOT_WALLET_KEY", HOT_WALLET_KEY),
            ("PAYGATE_EVM__NETWORKS__ETHEREUM__CHAIN_ID", "31337"),
            ("PAYGATE_PAYOUTS__POLL_INTERVAL_MS", "100"),
            ("PAYGATE_PAYOUTS__RECHECK_MS", "100"),
            ("PAYGATE_PAYOUTS__STALE_AFTER_SECS", "1"),
        ],
    )
    .await;
    // `_db` keeps the database until the test ends.
    let Deployment { db: _db, conn, fleet, api, merchant, key, http } = dep;
    testkit::set_payout_settings(&conn, merchant, Environment::Live, |s| {
        s.payout_auto_approve = true;
        s.payout_delay_secs = 0;
        s.network_fee_allocation = FeeAllocation::Merchant;
    })
    .await;
    testkit::fund(&conn, merchant, Environment::Live, "ethereum", "5").await;

    let mut recipients = Vec::new();
    for i in 0..PAYOUTS {
        let to = alloy_primitives::Address::from([0x21 + i; 20]).to_checksum(None);
        let body = json!({"currency": "ETH", "network": "ethereum", "amount": "0.25", "destination": to});
        let r =
            http.post(format!("{}/v1/payouts", api.url)).header("X-API-Key", &key).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        recipients.push(to);
    }
    let a = fleet.worker(env!("CARGO_BIN_EXE_payout-executor"));
    wait_ready(&http, &a).await;
    let b = fleet.worker(env!("CARGO_BIN_EXE_payout-executor"));
    wait_ready(&http, &b).await;

    // Blocks keep coming while the executors work (12 confirmations each).
    let deadline = Instant::now() + Duration::from_secs(120);
    let rows = loop {
        let rows = payout::Entity::find().all(&conn).await.unwrap();
        if rows.len() == usize::from(PAYOUTS) && rows.iter().all(|p| p.status == PayoutStatus::Completed) {
            break rows;
        }
        assert!(Instant::now() < deadline, "payouts stuck: {:?}", rows.iter().map(|p| p.status).collect::<Vec<_>>());
        anvil.mine(2).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let mut nonces = Vec::new();
    let mut hashes = HashSet::new();
    for p in &rows {
        let hash = p.tx_hash.clone().unwrap();
        let tx = anvil.rpc("eth_getTransactionByHash", json!([hash])).await;
        assert_eq!(tx["from"].as_str().unwrap().to_ascii_lowercase(), HOT_WALLET);
        nonces.push(u64::from_str_radix(tx["nonce"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap());
        hashes.insert(hash);
    }
    nonces.sort();
    assert_eq!(nonces, (0..u64::from(PAYOUTS)).collect::<Vec<_>>(), "no nonce reused or skipped");
    assert_eq!(hashes.len(), usize::from(PAYOUTS));
    // The hot wallet sent exactly these transactions: its next nonce is the count.
    let count = anvil.rpc("eth_getTransactionCount", json!([HOT_WALLET, "latest"])).await;
    assert_eq!(u64::from_str_radix(count.as_str().unwrap().trim_start_matches("0x"), 16).unwrap(), u64::from(PAYOUTS));
    for to in &recipients {
        let bal = anvil.rpc("eth_getBalance", json!([to, "latest"])).await;
        let wei = u128::from_str_radix(bal.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        assert_eq!(Decimal::from_i128_with_scale(wei as i128, 18).normalize(), Decimal::from_str("0.25").unwrap());
    }
    let fees: Decimal = rows.iter().map(|p| p.network_fee.0).sum();
    let (b, _) = testkit::assert_ledger_sums(&conn, merchant, "ethereum").await;
    assert_eq!(b.available.0, Decimal::from(5) - Decimal::from(2) - fees);
}
