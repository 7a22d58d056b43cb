//! The TRON sweeper killed around the broadcast (against the fake full node keeping balances):
//! after a transaction (the USDT address's top-up, the sweeps themselves) is stored signed and
//! before it is sent, and after it is sent and before the round ends. Sweepers started anew send
//! the stored bytes (or find them on the chain) and never sign a second transaction: every
//! deposit address sends exactly one per sweep step, the hot wallet exactly one top-up, and the
//! stored transactions are the ones in blocks. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

use entity::{SweepStatus, sweep};
use workers::sweeper::Sweeper;

use crate::support::tron_payouts::hot_wallet;
use crate::support::tron_sweeps::{TronRig, id};

/// One sweeper round in a task of its own, which dies at the armed fail point `at`.
async fn crash(sweeper: Sweeper, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { sweeper.tick().await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the sweeper did not reach {at}");
}

fn unsigned(rows: &[sweep::Model]) -> bool {
    rows.iter().any(|s| s.status == SweepStatus::Planned || s.status == SweepStatus::ToppingUp || s.signed_tx.is_none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tron_sweeper_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let rig = TronRig::start().await;
    let l = &rig.l;

    // The first round plans; the second is killed right after storing its first transaction.
    rig.sweeper().tick().await.unwrap();
    crash(rig.sweeper(), "sweep-after-persist").await;
    let stored: Vec<sweep::Model> =
        rig.rows().await.into_iter().filter(|s| s.signed_tx.is_some() || s.topup_signed_tx.is_some()).collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(l.node.with(|n| n.broadcasts.len()), 0, "nothing was sent");
    let first = stored[0].clone();

    // Killed right after sending, round after round, until every step was stored and sent.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while unsigned(&rig.rows().await) {
        crash(rig.sweeper(), "sweep-after-broadcast").await;
        l.node.mine(1);
        assert!(std::time::Instant::now() < deadline, "sweeps never all signed: {:?}", rig.rows().await);
    }

    // New sweepers finish them.
    let sweeper = rig.sweeper();
    rig.tick_until(&sweeper, "after the crashes", |rows| {
        rows.len() == 3 && rows.iter().all(|s| s.status == SweepStatus::Confirmed)
    })
    .await;
    let done = rig.rows().await;
    let again = done.iter().find(|s| s.id == first.id).unwrap();
    assert_eq!(
        (&again.signed_tx, &again.topup_signed_tx),
        (&first.signed_tx, &first.topup_signed_tx),
        "sent as stored, never signed again"
    );
    // One transaction per step: the stored ones, each in a block.
    assert_eq!(l.node.sent_by(&id(&rig.trx_address)).len(), 1);
    assert_eq!(l.node.sent_by(&id(&rig.usdt_address)).len(), 2, "the transfer and the leftover's return");
    assert_eq!(l.node.sent_by(&id(&hot_wallet())).len(), 1, "one top-up");
    for s in &done {
        for hash in [s.tx_hash.as_deref(), s.topup_tx_hash.as_deref()].into_iter().flatten() {
            assert!(l.node.burnt(hash).is_some(), "{hash} was sent");
        }
    }
    assert_eq!(l.node.units_of(&crate::support::tron_sweeps::usdt_id(), &id(&hot_wallet())), 50_000_000);
}
