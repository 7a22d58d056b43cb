//! Two executors on one payout, the stale one arriving after the re-sign, on each chain whose
//! expired transactions are signed again (XRP by `Sequence`, Solana by blockhash, TRON by
//! reference block; EVM in `evm_anvil_payouts`). Executor B reads the payout while it holds
//! transaction H1 and is parked at its chain read; executor A finds H1 expired, signs H2 and
//! sends it; H2 is then final on the chain. Released, B judges H1 (its `Sequence` used by
//! another transaction, or expired and its fresh terms refused) and would end the payout:
//! every such verdict is guarded on H1, so B looks again, finds H2 and completes the payout.
//! The recipient is paid once, the funds are never released, no `payout.failed` is sent.
//!
//! Against the fake nodes of the live suites (`support::{xrp,solana,tron}_node`).

use std::future::Future;

use crate::support::interleave::{Stop, stale};
use crate::support::live::d;
use crate::support::payouts::Payouts;
use entity::PayoutStatus;
use rust_decimal::Decimal;
use uuid::Uuid;
use workers::executor::Executor;

/// B parked at its read of the payout's transaction while A re-signs it and `land` makes A's
/// transaction final; then B released. Returns B's outcome (it must not have failed).
async fn stale_verdict_after_a_resign<N>(
    x: &Payouts<N>,
    gate: &str,
    id: Uuid,
    a: &Executor,
    land: impl Future<Output = ()>,
) -> (String, String) {
    let h1 = x.row(id).await.tx_hash.expect("H1 stored");
    let stop = Stop::armed();
    let b = stale(a, gate, Some(stop.clone()), None);
    let parked = tokio::spawn(async move { b.execute(id).await });
    stop.parked().await;
    a.execute(id).await.unwrap();
    let p = x.row(id).await;
    let h2 = p.tx_hash.clone().unwrap();
    assert_ne!(h2, h1, "A signed the expired payout again");
    assert_eq!(p.status, PayoutStatus::Processing, "H2 sent, not final yet");
    land.await;
    stop.release();
    parked.await.unwrap().expect("B looked again instead of ending the payout");
    let p = x.row(id).await;
    assert_eq!(
        (p.status, p.tx_hash.as_deref(), p.failure_reason.as_deref()),
        (PayoutStatus::Completed, Some(h2.as_str()), None),
        "completed with H2 by the stale executor's second look"
    );
    let failed = testkit::event_payloads(&x.live.app.state.db, "payout.failed").await;
    assert!(failed.is_empty(), "no payout.failed: {failed:?}");
    (h1, h2)
}

#[tokio::test]
async fn xrp_a_stale_executor_judging_the_expired_transaction_never_fails_a_payout_its_successor_paid() {
    use crate::support::xrp_payouts::{DEST, ED25519_SEED, XrpPayouts};
    let x = XrpPayouts::start(ED25519_SEED, "50").await;
    let a = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout(DEST, Some("7"), "5").await;
    a.execute(id).await.unwrap();
    // H1 lost; its window passes on a node that holds all of it.
    x.live.node.close(4);
    x.live.node.with(|l| l.losing = false);
    let (_, h2) = stale_verdict_after_a_resign(&x, "xrp", id, &a, async { x.live.node.close(1) }).await;
    let paid = x.live.node.sent_by(&x.wallet);
    assert_eq!(paid.iter().map(|p| (p.hash.as_str(), p.amount)).collect::<Vec<_>>(), [(h2.as_str(), 5_000_000)]);
    assert_eq!(x.balance().await, (d("44.99999"), Decimal::ZERO), "charged once, nothing released");
}

#[tokio::test]
async fn solana_a_stale_executor_judging_the_expired_transaction_never_fails_a_payout_its_successor_paid() {
    use crate::support::solana_node::VALIDITY;
    use crate::support::solana_payouts::{SolanaPayouts, destination};
    let x = SolanaPayouts::start(&[("solana", "50")]).await;
    let a = x.executor();
    let to = destination(0x41);
    x.live.node.with(|c| c.losing = true);
    let id = x.payout("SOL", &to, "5").await;
    a.execute(id).await.unwrap();
    // H1 dropped; the finalized height passes its last valid height.
    x.live.node.produce(VALIDITY as usize + 1);
    x.live.node.finalize();
    x.live.node.with(|c| c.losing = false);
    let (_, h2) = stale_verdict_after_a_resign(&x, "solana", id, &a, async { x.finalize_next() }).await;
    assert_eq!(x.live.node.paid_to(&to), [(h2, 5_000_000_000)], "paid once");
    assert_eq!(x.balance("solana").await, (d("44.999995"), Decimal::ZERO), "charged once, nothing released");
}

#[tokio::test]
async fn tron_a_stale_executor_judging_the_expired_transaction_never_fails_a_payout_its_successor_paid() {
    use crate::support::tron_node::SOLID_LAG;
    use crate::support::tron_payouts::{TronPayouts, destination};
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let a = x.executor();
    let to = destination(0x41);
    x.live.node.with(|l| l.losing = true);
    let id = x.payout("TRX", &to, "5").await;
    a.execute(id).await.unwrap();
    // H1 lost; its expiration falls behind the solidified block.
    x.live.node.mine(2 + SOLID_LAG as usize);
    x.live.node.with(|l| l.losing = false);
    let (_, h2) = stale_verdict_after_a_resign(&x, "tron", id, &a, async { x.live.node.mine(19) }).await;
    assert_eq!(x.paid_to(&to), [(h2, 5_000_000)], "paid once");
    assert_eq!(x.balance("tron").await, (d("44.733"), Decimal::ZERO), "charged once, nothing released");
}

/// `ops payouts fail` on a signed XRP payout: refused while its transaction's window is open,
/// done once it expired unseen (the node searched the whole window and its `Sequence` is
/// unused); the executor then leaves the failed payout alone.
#[tokio::test]
async fn xrp_the_operator_fails_a_signed_payout_only_once_its_transaction_expired_unseen() {
    use crate::support::xrp_payouts::{DEST, SECP256K1_SEED, XrpPayouts};
    use domain::payouts::operator;
    use workers::executor::operator::dead_tx;
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let db = &x.live.app.state.db;
    let e = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout(DEST, None, "3").await;
    e.execute(id).await.unwrap();
    let h1 = x.row(id).await.tx_hash.unwrap();
    let sent = x.submitted().len();
    assert_eq!(dead_tx(&e.chains, &x.row(id).await).await.unwrap(), None, "its window is open");
    let err = operator::fail(db, id.into(), "stuck", None).await.unwrap_err().to_string();
    assert!(err.contains("may still be mined"), "{err}");
    x.live.node.close(4);
    let dead = dead_tx(&e.chains, &x.row(id).await).await.unwrap().expect("expired unseen");
    assert_eq!(dead.tx_hash, h1);
    let p = operator::fail(db, id.into(), "stuck", Some(&dead)).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.unwrap().contains("expired unseen"));
    assert_eq!(x.balance().await, (d("20"), Decimal::ZERO), "released exactly");
    assert_eq!(e.execute(id).await.unwrap(), workers::executor::Next::Done);
    assert_eq!(x.submitted().len(), sent, "nothing new signed or sent");
}

/// `ops payouts fail` on a signed Bitcoin payout: refused while its transaction is in the
/// mempool and while the transaction that double-spent its input is shallower than the gate's
/// depth (3); done once that one is 3 deep.
#[cfg(feature = "regtest-tests")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bitcoin_the_operator_fails_a_payout_only_once_its_input_is_double_spent_at_depth() {
    use crate::support::btc_payouts::{BtcPayouts, destination};
    use domain::payouts::operator;
    use entity::Environment;
    use workers::chain::Broadcast;
    use workers::chain::signer::PayoutTx;
    use workers::executor::operator::dead_tx;
    let x = BtcPayouts::start(&["1"], "1").await;
    let db = &x.live.app.state.db;
    let e = x.executor();
    let id = x.payout(&destination(0x71), "0.1").await;
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    assert_eq!(dead_tx(&e.chains, &x.row(id).await).await.unwrap(), None, "in the mempool");
    // The hot wallet's key spends the same output elsewhere at a higher fee (replace-by-fee).
    let signer = e.signers.get(Environment::Live, "bitcoin").unwrap();
    let mut funding = signer.funding().await.unwrap().expect("a UTXO wallet");
    funding.fee_rate_sat_vb *= 20;
    let elsewhere = destination(0x72).to_string();
    let conflict = PayoutTx {
        gate: domain::gates::find("bitcoin").unwrap(),
        payout_id: Uuid::new_v4(),
        destination: &elsewhere,
        destination_tag: None,
        amount: d("0.5"),
        max_fee: d("0.01"),
        nonce: None,
        fees: None,
        funding: Some(funding),
    };
    let conflict = signer.sign(&conflict).await.unwrap();
    let chain = e.chains.get(Environment::Live, "bitcoin").unwrap();
    assert_eq!(chain.broadcast(&conflict).await.unwrap(), Broadcast::Accepted);
    x.live.node.mine(1).await;
    assert_eq!(dead_tx(&e.chains, &x.row(id).await).await.unwrap(), None, "double-spent 1 block deep");
    assert!(operator::fail(db, id.into(), "lost", None).await.is_err());
    x.live.node.mine(2).await;
    let dead = dead_tx(&e.chains, &x.row(id).await).await.unwrap().expect("double-spent at depth");
    assert!(dead.why.contains("double-spent"), "{dead:?}");
    let p = operator::fail(db, id.into(), "lost", Some(&dead)).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    assert_eq!(x.balance("bitcoin").await, (d("1"), Decimal::ZERO), "released exactly");
}
