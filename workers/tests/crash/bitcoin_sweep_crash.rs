//! The sweeper killed around a Bitcoin batch's broadcast (against Litecoin Core regtest): after
//! the batch is stored signed and before it is sent, and after it is sent. Sweepers started anew
//! send the stored transaction (or find it) and never sign a second one: the deposits are spent
//! once, by the stored transaction. Needs `--features failpoints,regtest-tests`.
#![cfg(all(feature = "failpoints", feature = "regtest-tests"))]

use std::time::{Duration, Instant};

use entity::{SweepStatus, sweep};
use sea_orm::EntityTrait;
use workers::sweeper::Sweeper;

use crate::support::sweeps::BtcRig;

async fn crash(sweeper: Sweeper, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { sweeper.tick().await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the sweeper did not reach {at}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_killed_around_a_batch_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let rig = BtcRig::start().await;
    rig.paid(&["0.5", "0.25"]).await;
    let db = &rig.l.app.state.db;

    crash(rig.sweeper(), "sweep-after-persist").await;
    let stored = sweep::Entity::find().all(db).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert!(stored.iter().all(|s| s.status == SweepStatus::Sending));
    let txid = stored[0].tx_hash.clone().expect("stored before it is sent");
    let raw = stored[0].signed_tx.clone().unwrap();
    let seen = rig.l.node.try_rpc("getrawtransaction", serde_json::json!([txid, true])).await;
    assert!(seen.is_err(), "nothing was sent: {seen:?}");

    // A new sweeper sends the stored bytes (never a new transaction) and confirms them.
    let confirm = async |rows: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            rig.sweeper().tick().await.unwrap();
            let all = sweep::Entity::find().all(db).await.unwrap();
            if all.len() == rows && all.iter().all(|s| s.status == SweepStatus::Confirmed) {
                return all;
            }
            assert!(Instant::now() < deadline, "sweeps stuck: {all:?}");
            rig.l.node.mine(1).await;
        }
    };
    let done = confirm(2).await;
    assert!(
        done.iter()
            .all(|s| s.tx_hash.as_deref() == Some(txid.as_str()) && s.signed_tx.as_deref() == Some(raw.as_str()))
    );
    let mined = rig.l.node.rpc("getrawtransaction", serde_json::json!([txid, false])).await;
    assert_eq!(mined.as_str(), Some(raw.as_str()), "the stored transaction is the one mined");

    // Killed right after sending a second batch: a new sweeper follows it, signs nothing new.
    rig.paid(&["0.3"]).await;
    crash(rig.sweeper(), "sweep-after-broadcast").await;
    let second: Vec<_> =
        sweep::Entity::find().all(db).await.unwrap().into_iter().filter(|s| s.status == SweepStatus::Sending).collect();
    assert_eq!(second.len(), 1);
    let second_tx = second[0].tx_hash.clone().unwrap();
    let done = confirm(3).await;
    let hashes: std::collections::BTreeSet<_> = done.iter().filter_map(|s| s.tx_hash.clone()).collect();
    assert_eq!(hashes, [txid, second_tx].into_iter().collect(), "one transaction per batch");
    // Everything reached the hot address, in exactly two outputs.
    assert_eq!(rig.l.node.unspent_to(&rig.hot).await.len(), 2);
}
