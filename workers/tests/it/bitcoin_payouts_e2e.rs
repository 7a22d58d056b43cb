//! A live Bitcoin payout as deployed: the real `api` binary and a `payout-executor` process,
//! configured only through `PAYGATE_*` variables (the node, the deposit key, the hot wallet key),
//! against a Litecoin Core regtest node. The payout is created over HTTP, signed and sent by the
//! executor from the hot wallet's confirmed output, and completes at 3 confirmations with the fee
//! its transaction paid; the recipient is paid once. Run with `--features regtest-tests`.
#![cfg(feature = "regtest-tests")]

use crate::support::btc_payouts::{destination, hot_wallet_key};
use crate::support::litecoind::Litecoind;
use crate::support::live::d;
use rust_decimal::Decimal;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_created_over_http_is_paid_from_the_hot_wallet_by_the_executor_process() {
    let node = Litecoind::start().await;
    let key = hot_wallet_key();
    let cfg = domain::config::BitcoinConfig {
        rpc_url: node.url.clone(),
        hot_wallet_key: Some(domain::config::Redacted(key.clone())),
        ..Default::default()
    };
    let hot_wallet = workers::chain::bitcoin::wallet::BitcoinSigner::load(&cfg).unwrap().unwrap().address();
    node.pay(&hot_wallet.to_string(), "0.6").await;
    node.mine(1).await;

    let zpub = testkit::live_keys().bitcoin_xpub.unwrap();
    let vars = [
        ("PAYGATE_ADDRESSES__LIVE__BITCOIN_XPUB", zpub.as_str()),
        ("PAYGATE_BITCOIN__RPC_URL", node.url.as_str()),
        ("PAYGATE_BITCOIN__RPC_USER", node.user),
        ("PAYGATE_BITCOIN__RPC_PASSWORD", node.password),
        ("PAYGATE_BITCOIN__HOT_WALLET_KEY", key.as_str()),
    ];
    let to = destination(0x61);
    let body = json!({"currency": "BTC", "amount": "0.25", "destination": to.to_string()});
    // Blocks keep coming while the executor works (3 confirmations).
    let done = crate::support::payouts::deployed_payout(&vars, ("bitcoin", "1"), body, async || {
        node.mine(1).await;
    })
    .await;
    let p = done.payout;

    assert_eq!(node.unspent_to(&to).await, [25_000_000], "the recipient is paid once");
    let tx = node.tx(p.tx_hash.as_deref().unwrap()).await;
    let outputs: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
    let fee = Decimal::new((60_000_000 - outputs) as i64, 8).normalize();
    assert_eq!(p.network_fee.0, fee, "the fee its transaction paid (its one input held 0.6)");
    assert_eq!(done.balance.0, d("1") - d("0.25") - fee);
}
