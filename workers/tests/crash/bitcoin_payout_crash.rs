//! A Bitcoin payout executor dying around the broadcast (against Litecoin Core regtest): after
//! the signed transaction is stored and before it is sent, and after it is sent and before the
//! payout is marked `processing`. Executors started anew send the stored transaction (or find
//! it on the chain) and never sign a second one: the recipient is paid once, by the stored
//! transaction, and the hot wallet's output is spent once.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in the `crash` test
//! binary since fail points are process-wide. Needs `--features regtest-tests,failpoints`.
#![cfg(all(feature = "regtest-tests", feature = "failpoints"))]

use crate::support::btc_payouts::{BtcPayouts, destination};
use crate::support::payouts::crash;
use entity::PayoutStatus;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let s = BtcPayouts::start(&["0.5"], "1").await;
    let to = destination(0x51);
    let id = s.payout(&to, "0.2").await;

    // Killed after storing the signed transaction: nothing sent.
    crash(s.executor(), id, "payout-after-persist").await;
    let stored = s.row(id).await;
    assert_eq!(stored.status, PayoutStatus::Queued);
    let txid = stored.tx_hash.clone().expect("the signed transaction is stored before anything is sent");
    let mempool = s.live.node.rpc("getrawmempool", json!([])).await;
    assert_eq!(mempool, json!([]), "nothing was broadcast");

    // A new executor sends the stored transaction, and is killed before marking it sent.
    crash(s.executor(), id, "payout-after-broadcast").await;
    let row = s.row(id).await;
    assert_eq!((row.status, row.tx_hash.as_deref()), (PayoutStatus::Queued, Some(txid.as_str())));
    let mempool = s.live.node.rpc("getrawmempool", json!([])).await;
    assert_eq!(mempool, json!([txid]), "the stored transaction, once");

    // Another new executor finds it on the chain and follows it to completion.
    let rows = s.complete(&[s.executor()], &[id]).await;
    assert_eq!(rows[0].tx_hash.as_deref(), Some(txid.as_str()));
    assert_eq!(rows[0].signed_tx, stored.signed_tx, "never signed again");
    assert_eq!(s.unspent_to(&to).await, [20_000_000], "the recipient is paid once");
    // The wallet's one output went to this transaction: what is left is its change.
    let tx = s.tx(&txid).await;
    let change = tx.output.iter().find(|o| o.script_pubkey == s.hot_wallet.script_pubkey()).unwrap();
    assert_eq!(s.unspent_to(&s.hot_wallet).await, [change.value.to_sat()]);
    let (balance, _) = testkit::assert_ledger_sums(&s.live.app.state.db, s.live.merchant, "bitcoin").await;
    assert_eq!(balance.available.0, crate::support::live::d("0.8") - rows[0].network_fee.0);
}
