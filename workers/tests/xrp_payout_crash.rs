//! An XRP payout executor dying around the broadcast (against the fake rippled): after the
//! signed transaction is stored and before it is submitted, and after it is submitted and
//! before the payout is marked `processing`. Executors started anew submit the stored blob (or
//! find it in the ledger) and never sign a second one: the recipient is paid once, with the
//! stored transaction's `Sequence`.
//!
//! The "crash" is a panic at the executor's fail points (`fail` crate), in a test binary of its
//! own since fail points are process-wide. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

mod support;

use entity::PayoutStatus;
use support::payouts::crash;
use support::xrp_payouts::{DEST, FIRST_SEQUENCE, SECP256K1_SEED, XrpPayouts};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_around_the_submission_never_signs_a_second_transaction() {
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let id = x.payout(DEST, Some("9"), "3").await;

    // Killed after storing the signed transaction: nothing submitted.
    crash(x.executor(), id, "payout-after-persist").await;
    let stored = x.row(id).await;
    assert_eq!(stored.status, PayoutStatus::Queued);
    let hash = stored.tx_hash.clone().expect("the signed transaction is stored before anything is sent");
    assert!(x.submitted().is_empty(), "nothing was submitted");

    // A new executor submits the stored blob, and is killed before marking it sent.
    crash(x.executor(), id, "payout-after-broadcast").await;
    let row = x.row(id).await;
    assert_eq!((row.status, row.tx_hash.as_deref()), (PayoutStatus::Queued, Some(hash.as_str())));
    assert_eq!(x.submitted().len(), 1);

    // Another new executor finds it in the open ledger, then validated, and completes the payout.
    let e = x.executor();
    e.execute(id).await.unwrap();
    x.live.node.close(1);
    e.execute(id).await.unwrap();
    let done = x.row(id).await;
    assert_eq!((done.status, done.signed_tx.as_deref()), (PayoutStatus::Completed, stored.signed_tx.as_deref()));
    assert_eq!(x.submitted().len(), 1, "submitted once, never signed again");
    let paid = x.live.node.sent_by(&x.wallet);
    assert_eq!(
        paid.iter().map(|p| (p.hash.as_str(), p.sequence, p.amount)).collect::<Vec<_>>(),
        [(hash.as_str(), FIRST_SEQUENCE, 3_000_000)]
    );
    assert_eq!(x.balance().await, (support::live::d("16.99999"), rust_decimal::Decimal::ZERO));
}
