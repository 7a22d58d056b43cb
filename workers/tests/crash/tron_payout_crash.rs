//! A TRON payout executor dying around the broadcast (against the fake full node): after the
//! signed transaction is stored and before it is broadcast, and after it is broadcast and
//! before the payout is marked `processing`. Executors started anew broadcast the stored
//! transaction (or find it) and never sign a second one: the recipient is paid once.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in the `crash` test
//! binary since fail points are process-wide. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

use crate::support::payouts::assert_killed_around_the_broadcast;
use crate::support::tron_payouts::{TronPayouts, destination};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let x = TronPayouts::start(&[("tron", "20")]).await;
    let to = destination(0x61);
    let id = x.payout("TRX", &to, "3").await;
    let sent = || x.broadcasts().len();
    let done = assert_killed_around_the_broadcast(&x, id, sent, async || x.live.node.mine(19)).await; // the gate's 19 confirmations
    assert_eq!(x.paid_to(&to), [(done.tx_hash.unwrap(), 3_000_000)], "paid once");
    assert_eq!(x.balance("tron").await, (crate::support::live::d("16.733"), rust_decimal::Decimal::ZERO));
}
