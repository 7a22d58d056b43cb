//! An XRP payout executor dying around the broadcast (against the fake rippled): after the
//! signed transaction is stored and before it is submitted, and after it is submitted and
//! before the payout is marked `processing`. Executors started anew submit the stored blob (or
//! find it in the ledger) and never sign a second one: the recipient is paid once, with the
//! stored transaction's `Sequence`.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in the `crash` test
//! binary since fail points are process-wide. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

use crate::support::payouts::assert_killed_around_the_broadcast;
use crate::support::xrp_payouts::{DEST, FIRST_SEQUENCE, SECP256K1_SEED, XrpPayouts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_submission_never_signs_a_second_transaction() {
    let _alone = crate::support::payouts::fail_points_alone().await;
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let id = x.payout(DEST, Some("9"), "3").await;
    let sent = || x.submitted().len();
    let done = assert_killed_around_the_broadcast(&x, id, sent, async || x.live.node.close(1)).await;
    let paid = x.live.node.sent_by(&x.wallet);
    let paid: Vec<_> = paid.iter().map(|p| (p.hash.as_str(), p.sequence, p.amount)).collect();
    assert_eq!(paid, [(done.tx_hash.as_deref().unwrap(), FIRST_SEQUENCE, 3_000_000)], "paid once");
    assert_eq!(x.balance().await, (crate::support::live::d("16.99999"), rust_decimal::Decimal::ZERO));
}
