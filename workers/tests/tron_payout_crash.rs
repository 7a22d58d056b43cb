//! A TRON payout executor dying around the broadcast (against the fake full node): after the
//! signed transaction is stored and before it is broadcast, and after it is broadcast and
//! before the payout is marked `processing`. Executors started anew broadcast the stored
//! transaction (or find it) and never sign a second one: the recipient is paid once.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in a test binary of its
//! own since fail points are process-wide. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

mod support;

use entity::PayoutStatus;
use support::payouts::crash;
use support::tron_payouts::{TronPayouts, destination};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let x = TronPayouts::start(&[("tron", "20")]).await;
    let to = destination(0x61);
    let id = x.payout("TRX", &to, "3").await;

    crash(x.executor(), id, "payout-after-persist").await;
    let stored = x.row(id).await;
    assert_eq!(stored.status, PayoutStatus::Queued);
    let hash = stored.tx_hash.clone().expect("the signed transaction is stored before anything is sent");
    assert!(x.broadcasts().is_empty(), "nothing was broadcast");

    crash(x.executor(), id, "payout-after-broadcast").await;
    let row = x.row(id).await;
    assert_eq!((row.status, row.tx_hash.as_deref()), (PayoutStatus::Queued, Some(hash.as_str())));
    assert_eq!(x.broadcasts().len(), 1);

    let e = x.executor();
    e.execute(id).await.unwrap();
    x.live.node.mine(19);
    e.execute(id).await.unwrap();
    let done = x.row(id).await;
    assert_eq!((done.status, done.signed_tx.as_deref()), (PayoutStatus::Completed, stored.signed_tx.as_deref()));
    assert_eq!(x.broadcasts().len(), 1, "broadcast once, never signed again");
    assert_eq!(x.paid_to(&to), [(hash, 3_000_000)]);
    assert_eq!(x.balance("tron").await, (support::live::d("16.733"), rust_decimal::Decimal::ZERO));
}
