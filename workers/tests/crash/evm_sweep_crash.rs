//! The sweeper killed around the broadcast (against anvil): after a transaction (the token
//! address's gas top-up, the sweeps themselves) is stored signed and before it is sent, and
//! after it is sent and before the round ends. Sweepers started anew send the stored bytes (or
//! find them on the chain) and never sign a second transaction: every deposit address sends
//! exactly one, the hot wallet exactly one top-up, and the stored transactions are the mined
//! ones. Needs `--features failpoints,anvil-tests`.
#![cfg(all(feature = "failpoints", feature = "anvil-tests"))]

use std::time::{Duration, Instant};

use entity::{SweepStatus, sweep};
use sea_orm::{EntityTrait, QueryOrder};
use workers::sweeper::Sweeper;

use crate::support::evm_node::HOT_WALLET;
use crate::support::sweeps::Rig;

/// One sweeper round in a task of its own, which dies at the armed fail point `at`.
async fn crash(sweeper: Sweeper, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { sweeper.tick().await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the sweeper did not reach {at}");
}

async fn rows(rig: &Rig) -> Vec<sweep::Model> {
    sweep::Entity::find().order_by_asc(sweep::Column::GateId).all(&rig.l.app.state.db).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let rig = Rig::start().await;
    let hot_nonce_before = rig.anvil.tx_count(HOT_WALLET).await;

    // Killed right after storing: the ETH sweep (planned first in gate order) is stored, not sent.
    crash(rig.sweeper(), "sweep-after-persist").await;
    let stored = rows(&rig).await;
    let eth = stored.iter().find(|s| s.gate_id == "ethereum").unwrap();
    assert_eq!(eth.status, SweepStatus::Sending);
    let eth_tx = eth.signed_tx.clone().expect("stored before anything is sent");
    assert_eq!(rig.anvil.tx_count(&rig.eth_address).await, 0, "nothing was sent");
    rig.anvil.mine(1).await;
    assert!(rig.anvil.try_rpc("eth_getTransactionReceipt", serde_json::json!([eth.tx_hash])).await.unwrap().is_null());
    // The operator cannot fail it (its nonce is unused: it may still be mined); `ops sweeps
    // retry` sends the stored bytes.
    let chains = rig.l.new_chains();
    let refused = workers::sweeper::fail_by_operator(&rig.l.app.state.db, &chains, eth.id, "stuck?").await;
    assert!(refused.unwrap_err().to_string().contains("may still be mined"));
    let answer = workers::sweeper::resend(&chains, eth).await.unwrap();
    assert_eq!(answer, Some(workers::chain::Broadcast::Accepted));

    // Killed right after sending, round after round, until every step was stored and sent.
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows(&rig).await.iter().any(|s| s.status == SweepStatus::Planned || s.signed_tx.is_none()) {
        crash(rig.sweeper(), "sweep-after-broadcast").await;
        rig.anvil.mine(1).await;
        assert!(Instant::now() < deadline, "sweeps never all signed: {:?}", rows(&rig).await);
    }

    // New sweepers finish them.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        rig.sweeper().tick().await.unwrap();
        let all = rows(&rig).await;
        if all.iter().all(|s| s.status == SweepStatus::Confirmed) {
            break;
        }
        assert!(Instant::now() < deadline, "sweeps stuck: {all:?}");
        rig.anvil.mine(3).await;
    }
    let done = rows(&rig).await;
    assert_eq!(done.len(), 3, "the two sweeps and the top-up leftover's return");
    // One transaction per sweep, one top-up from the hot wallet: the stored ones.
    assert_eq!(rig.anvil.tx_count(&rig.eth_address).await, 1);
    assert_eq!(rig.anvil.tx_count(&rig.usdt_address).await, 2);
    assert_eq!(rig.anvil.tx_count(HOT_WALLET).await, hot_nonce_before + 1);
    let eth = done.iter().find(|s| s.gate_id == "ethereum" && s.parent_id.is_none()).unwrap();
    assert_eq!(eth.signed_tx.as_deref(), Some(eth_tx.as_str()), "sent as stored, never signed again");
    for s in &done {
        let receipt = rig.anvil.receipt(s.tx_hash.as_deref().unwrap()).await;
        assert_eq!(receipt["status"], "0x1", "{s:?}");
    }
    assert_eq!(rig.anvil.token_balance_of(&rig.token, HOT_WALLET).await, 50_000_000);
}
