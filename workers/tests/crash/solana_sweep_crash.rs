//! The Solana sweeper killed around the broadcast (LiteSVM): after a sweep transaction is stored
//! signed and before it is sent, and after it is sent and before the round ends. Sweepers
//! started anew send the stored bytes and never sign a second transaction: each sweep confirms
//! with the transaction stored before the crash, and the hot wallet received each deposit once.
//! Needs `--features failpoints,litesvm-tests`.
#![cfg(all(feature = "failpoints", feature = "litesvm-tests"))]

use entity::SweepStatus;
use serde_json::json;
use workers::sweeper::Sweeper;

use crate::support::solana_sweeps::{HOT_LAMPORTS, SolRig, TOKEN_ACCOUNT_RENT, hot_wallet};

/// One sweeper round in a task of its own, which dies at the armed fail point `at`.
async fn crash(sweeper: Sweeper, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { sweeper.tick().await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the sweeper did not reach {at}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_solana_sweeper_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let rig = SolRig::start().await;
    let node = &rig.l.node;
    // The first round plans; the next dies right after storing the SOL sweep (first in gate order).
    rig.sweeper().tick().await.unwrap();
    crash(rig.sweeper(), "sweep-after-persist").await;
    let stored = rig.rows().await;
    let sol = stored.iter().find(|s| s.gate_id == "solana").unwrap().clone();
    assert_eq!(sol.status, SweepStatus::Sending);
    assert!(sol.signed_tx.is_some(), "stored before anything is sent");
    assert_eq!(node.lamports(&rig.sol_address).await, 1_500_000_000, "nothing was sent");
    let status = node.call("getSignatureStatuses", json!([[sol.tx_hash]])).await;
    assert!(status["value"][0].is_null(), "unknown to the cluster: {status}");
    // The operator cannot fail it: its blockhash is still valid, it may yet land.
    let chains = rig.l.new_chains();
    let refused = workers::sweeper::fail_by_operator(&rig.l.app.state.db, &chains, sol.id, "stuck?").await;
    assert!(refused.unwrap_err().to_string().contains("may still be mined"));

    // A sweeper started anew sends the stored SOL sweep, then signs, stores and sends the USDC
    // one and dies right after sending it.
    crash(rig.sweeper(), "sweep-after-broadcast").await;
    let sent = rig.rows().await;
    assert!(sent.iter().all(|s| s.status == SweepStatus::Sending), "{sent:?}");
    assert_eq!(sent.iter().find(|s| s.id == sol.id).unwrap().tx_hash, sol.tx_hash, "sent as stored");
    assert_eq!(node.lamports(&rig.sol_address).await, 0);
    assert_eq!(node.token_units(&rig.usdc_address).await, 0);

    // Anew again: both confirm with the transactions stored before the crashes, and the hot
    // wallet got each deposit once.
    let done = rig.swept(&rig.sweeper(), 2).await;
    for s in &sent {
        let d = done.iter().find(|d| d.id == s.id).expect("the same sweeps");
        assert_eq!((&d.tx_hash, &d.signed_tx), (&s.tx_hash, &s.signed_tx), "never signed again");
    }
    assert_eq!(node.token_units(&hot_wallet()).await, 12_500_000);
    assert_eq!(node.lamports(&hot_wallet()).await, HOT_LAMPORTS + 1_499_995_000 + TOKEN_ACCOUNT_RENT - 10_000);
}
