//! A Solana payout executor dying around the broadcast (against the fake node): after the
//! signed transaction is stored and before it is sent, and after it is sent and before the
//! payout is marked `processing`. Executors started anew send the stored transaction (or find
//! it) and never sign a second one: the recipient is paid once.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in the `crash` test
//! binary since fail points are process-wide. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

use crate::support::payouts::assert_killed_around_the_broadcast;
use crate::support::solana_payouts::{SolanaPayouts, destination};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_broadcast_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let x = SolanaPayouts::start(&[("solana", "20")]).await;
    let to = destination(0x61);
    let id = x.payout("SOL", &to, "3").await;
    let sent = || x.live.node.sent().len();
    let done = assert_killed_around_the_broadcast(&x, id, sent, async || x.finalize_next()).await;
    assert_eq!(x.live.node.paid_to(&to), [(done.tx_hash.unwrap(), 3_000_000_000)], "paid once");
    assert_eq!(x.balance("solana").await, (crate::support::live::d("16.999995"), rust_decimal::Decimal::ZERO));
}
