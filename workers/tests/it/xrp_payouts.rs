//! Live XRP payouts (`xrp`) against the fake rippled (`support::xrp_node`), which decodes each
//! submitted blob, checks its signature and judges its `Sequence`, window and fee as rippled
//! does. The blobs are the codec's, pinned to xrpl-py's output by the codec's unit tests.
//!
//! - payouts are signed with consecutive `Sequence`s, submitted once, and complete at the fee
//!   the ledger shows, with the exact ledger (secp256k1 key);
//! - a transaction lost before any ledger is signed again with its `Sequence` only once its
//!   window has passed and the node says it searched all of it, and pays once (ed25519 key);
//! - a transaction whose `Sequence` the operator used by hand fails its payout, never re-signed:
//!   at its next submission (`tefPAST_SEQ`, the `Sequence` validated for another transaction),
//!   or once its window passed;
//! - a `tec` result fails the payout and releases its funds; a refused (`tem`, e.g. a payment to
//!   the hot wallet itself) one leaves its `Sequence` to a no-op `AccountSet`, so the next payout
//!   is not stuck behind a gap;
//! - the fee is read from `tx` answers of both API versions (v1 flat, v2 `tx_json`);
//! - live XRP payouts are refused (`gate_offline`) without a hot wallet seed.

use crate::support::live::d;
use crate::support::xrp_node::FakeRippled;
use crate::support::xrp_payouts::{DEST, DEST2, ED25519_SEED, FIRST_SEQUENCE, SECP256K1_SEED, XrpPayouts};
use entity::PayoutStatus;
use rust_decimal::Decimal;
use serde_json::json;
use workers::chain::xrp::codec::Kind;

fn destination(address: &str) -> [u8; 20] {
    domain::chain::address::xrp::account_id_of(address).unwrap()
}

#[tokio::test]
async fn payouts_take_consecutive_sequences_are_submitted_once_and_complete_at_the_ledgers_fee() {
    let x = XrpPayouts::start(SECP256K1_SEED, "100").await;
    let a = x.payout(DEST, Some("42"), "10").await;
    let b = x.payout(DEST2, None, "2.5").await;
    let e = x.executor();
    for id in [a, b] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    }
    let validated = x.live.node.validated() as u32;
    let sent = x.submitted();
    let kinds: Vec<_> = sent.iter().map(|t| (t.sequence, t.kind.clone(), t.fee_drops, t.last_ledger)).collect();
    assert_eq!(
        kinds,
        [
            (
                FIRST_SEQUENCE,
                Kind::Payment { destination: destination(DEST), tag: Some(42), drops: 10_000_000 },
                10,
                validated + 3
            ),
            (
                FIRST_SEQUENCE + 1,
                Kind::Payment { destination: destination(DEST2), tag: None, drops: 2_500_000 },
                10,
                validated + 3
            ),
        ],
        "consecutive Sequences, the open ledger's fee, a window of 3 ledgers"
    );
    assert!(sent.iter().all(workers::chain::xrp::codec::verify));
    assert_eq!(x.balance().await, (d("87.49998"), d("12.50002")), "amounts and fee estimates reserved");

    // Validated in the next ledger: final ("immediate").
    x.live.node.close(1);
    for id in [a, b] {
        e.execute(id).await.unwrap();
        let p = x.row(id).await;
        assert_eq!((p.status, p.network_fee.0), (PayoutStatus::Completed, d("0.00001")), "{p:?}");
    }
    let paid: Vec<_> =
        x.live.node.sent_by(&x.wallet).iter().map(|p| (p.destination.clone(), p.tag, p.amount)).collect();
    assert_eq!(paid, [(DEST.to_owned(), Some(42), 10_000_000), (DEST2.to_owned(), None, 2_500_000)]);
    assert_eq!(x.balance().await, (d("87.49998"), Decimal::ZERO), "exactly the amounts and the real fees");
    // Done is done: nothing is submitted again.
    for id in [a, b] {
        e.execute(id).await.unwrap();
    }
    assert_eq!(x.submitted().len(), 2);
}

#[tokio::test]
async fn a_transaction_lost_before_any_ledger_is_signed_again_with_its_sequence_once_its_window_passed() {
    let x = XrpPayouts::start(ED25519_SEED, "50").await;
    let e = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout(DEST, Some("7"), "5").await;
    e.execute(id).await.unwrap();
    let first = x.row(id).await;
    assert_eq!(first.status, PayoutStatus::Processing);
    let lost = x.signed(id).await;
    // While its window is open it may still enter a ledger: the same blob is sent again, never
    // a new one.
    x.live.node.close(2);
    e.execute(id).await.unwrap();
    assert!(x.submitted().iter().all(|t| *t == lost), "only the stored transaction was sent");
    // Past its window, on a node that does not hold all of it: not judged expired.
    x.live.node.close(2);
    assert!(x.live.node.validated() > u64::from(lost.last_ledger));
    x.live.node.prune_before(x.live.node.validated());
    let err = e.execute(id).await.unwrap_err().to_string();
    assert!(err.contains("searched_all"), "{err}");
    assert_eq!(x.row(id).await.tx_hash, first.tx_hash);
    // A node that searched the whole window: expired unseen, signed again with its Sequence.
    x.live.node.prune_before(0);
    x.live.node.with(|l| l.losing = false);
    e.execute(id).await.unwrap();
    let again = x.row(id).await;
    let resigned = x.signed(id).await;
    assert_ne!(again.tx_hash, first.tx_hash);
    assert_eq!((again.status, resigned.sequence), (PayoutStatus::Processing, lost.sequence), "the same Sequence");
    assert!(u64::from(resigned.last_ledger) > x.live.node.validated(), "a new window");
    x.live.node.close(1);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    let paid = x.live.node.sent_by(&x.wallet);
    assert_eq!(paid.len(), 1, "paid once: {paid:?}");
    assert_eq!((paid[0].hash.as_str(), paid[0].amount), (again.tx_hash.as_deref().unwrap(), 5_000_000));
    assert_eq!(x.balance().await, (d("44.99999"), Decimal::ZERO));
    // The next payout takes the next Sequence.
    let next = x.payout(DEST, None, "1").await;
    e.execute(next).await.unwrap();
    assert_eq!(x.signed(next).await.sequence, lost.sequence + 1);
}

/// An executor configured with `last_ledger_offset` = `offset`, as the worker builds it.
fn executor_with_offset(x: &XrpPayouts, offset: u32) -> workers::executor::Executor {
    let mut cfg = (*x.live.app.state.config).clone();
    cfg.xrp.last_ledger_offset = offset;
    workers::executor::Executor {
        db: x.live.app.state.db.clone(),
        chains: workers::chain::Chains::default().with_live(&cfg),
        signers: workers::chain::signer::Signers::default().with_xrp(&cfg.xrp).unwrap(),
        recheck: std::time::Duration::from_millis(10),
    }
}

/// The operator lowers `last_ledger_offset` while a payout signed with a wide window is in
/// flight: its transaction, validated early in that window, is still found (never taken for
/// one whose Sequence another transaction used) and the payout completes.
#[tokio::test]
async fn a_smaller_window_configured_after_signing_still_finds_the_transaction() {
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let id = x.payout(DEST, None, "2").await;
    executor_with_offset(&x, 150).execute(id).await.unwrap();
    assert_eq!(x.signed(id).await.last_ledger as u64, x.live.node.validated() + 150);
    x.live.node.close(1);
    let restarted = executor_with_offset(&x, 3);
    restarted.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.live.node.sent_by(&x.wallet).len(), 1);
}

#[tokio::test]
async fn a_sequence_taken_by_a_transaction_sent_by_hand_fails_the_payout_and_releases_its_funds() {
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let e = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout(DEST, None, "2").await;
    e.execute(id).await.unwrap();
    let lost = x.signed(id).await;
    // The operator sends a transaction from the hot wallet by hand: it takes that Sequence.
    x.live.node.by_hand(&x.wallet);
    x.live.node.close(4);
    assert!(x.live.node.validated() > u64::from(lost.last_ledger));
    e.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed, "never signed again over a used Sequence");
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("used by another transaction"), "{p:?}");
    assert_eq!(x.balance().await, (d("20"), Decimal::ZERO), "released exactly");
    assert!(x.submitted().iter().all(|t| *t == lost));
}

/// The `Sequence` is taken by a transaction sent by hand while the payout's is still within its
/// window: its next submission answers `tefPAST_SEQ`, the account's validated `Sequence` is past
/// it and the blob is in none of the validated ledgers of its window. It can never be applied:
/// the payout fails at once (not a retry until the window passes), its funds released.
#[tokio::test]
async fn a_sequence_validated_for_another_transaction_fails_the_payout_at_its_next_submission() {
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let e = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout(DEST, None, "2").await;
    e.execute(id).await.unwrap();
    let lost = x.signed(id).await;
    x.live.node.with(|l| l.losing = false);
    x.live.node.by_hand(&x.wallet);
    assert!(x.live.node.validated() <= u64::from(lost.last_ledger), "its window is still open");
    e.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("used by another transaction"), "{p:?}");
    assert_eq!(x.balance().await, (d("20"), Decimal::ZERO), "released exactly");
    assert!(x.submitted().iter().all(|t| *t == lost), "never signed again");
}

/// A payout whose own transaction is validated by the time it is submitted again answers
/// `tefPAST_SEQ` too: found in its window, it is the same transaction, and the payout completes.
#[tokio::test]
async fn a_resubmitted_payment_validated_meanwhile_is_the_same_transaction() {
    let x = XrpPayouts::start(SECP256K1_SEED, "20").await;
    let id = x.payout(DEST, None, "2").await;
    let e = x.executor();
    e.execute(id).await.unwrap();
    x.live.node.close(1);
    let tx =
        workers::chain::SignedTx { tx_hash: x.row(id).await.tx_hash.unwrap(), raw: x.row(id).await.signed_tx.unwrap() };
    let chain = workers::chain::Chains::default().with_live(&x.live.app.state.config);
    let chain = chain.get(entity::Environment::Live, "xrp").unwrap();
    assert_eq!(chain.broadcast(&tx).await.unwrap(), workers::chain::Broadcast::AlreadyKnown);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
}

/// `tx` answers in API v1 (the transaction's fields at the top) and v2 (`tx_json`, no top-level
/// `Fee`): the payout completes at the fee it paid either way.
#[tokio::test]
async fn payouts_complete_at_the_fee_shown_by_either_api_version() {
    for version in [1, 2] {
        let x = XrpPayouts::start(SECP256K1_SEED, "10").await;
        x.live.node.with(|l| l.api_version = version);
        let id = x.payout(DEST, Some("9"), "1").await;
        let e = x.executor();
        e.execute(id).await.unwrap();
        x.live.node.close(1);
        e.execute(id).await.unwrap();
        let p = x.row(id).await;
        assert_eq!((p.status, p.network_fee.0), (PayoutStatus::Completed, d("0.00001")), "API v{version}: {p:?}");
        assert_eq!(x.balance().await, (d("8.99999"), Decimal::ZERO), "API v{version}");
    }
}

/// rippled refuses a payment of XRP to its own account (`temREDUNDANT`): the payout's `Sequence`
/// goes to a no-op `AccountSet`, and once that is validated the payout fails, its funds released.
#[tokio::test]
async fn a_payout_to_the_hot_wallet_itself_fails_once_its_sequence_is_filled() {
    let x = XrpPayouts::start(SECP256K1_SEED, "30").await;
    let e = x.executor();
    let id = x.payout(&x.wallet, None, "3").await;
    e.execute(id).await.unwrap();
    let filler = x.submitted().pop().unwrap();
    assert_eq!((filler.kind, filler.sequence), (Kind::AccountSet, FIRST_SEQUENCE));
    x.live.node.close(1);
    e.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("temREDUNDANT"), "{p:?}");
    assert_eq!(x.balance().await, (d("30"), Decimal::ZERO), "released exactly");
    let sent: Vec<_> = x.live.node.sent_by(&x.wallet).iter().map(|p| (p.sequence, p.kind)).collect();
    assert_eq!(sent, [(FIRST_SEQUENCE, "AccountSet")], "nothing paid");
}

#[tokio::test]
async fn a_failed_payment_releases_its_funds_and_a_refused_one_leaves_its_sequence_to_a_no_op() {
    let x = XrpPayouts::start(SECP256K1_SEED, "100").await;
    let e = x.executor();
    // Applied with a `tec` result: fee taken, Sequence used, nothing delivered.
    x.live.node.with(|l| l.fail_next = Some("tecNO_DST_INSUF_XRP"));
    let failed = x.payout(DEST, None, "10").await;
    e.execute(failed).await.unwrap();
    x.live.node.close(1);
    e.execute(failed).await.unwrap();
    let p = x.row(failed).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("tecNO_DST_INSUF_XRP"), "{p:?}");
    assert_eq!(x.balance().await, (d("100"), Decimal::ZERO), "released exactly");

    // Refused for good at submission: its Sequence goes to a no-op AccountSet.
    x.live.node.with(|l| l.refuse_next = Some("temBAD_AMOUNT"));
    let refused = x.payout(DEST, None, "3").await;
    e.execute(refused).await.unwrap();
    assert_eq!(x.row(refused).await.status, PayoutStatus::Queued, "not failed while its Sequence is a gap");
    let filler = x.submitted().pop().unwrap();
    assert_eq!((filler.kind, filler.sequence), (Kind::AccountSet, FIRST_SEQUENCE + 1));
    assert!(filler.fee_drops > 10, "a higher fee than the refused one: {}", filler.fee_drops);
    // The next payout is not stuck behind it.
    let next = x.payout(DEST2, None, "4").await;
    e.execute(next).await.unwrap();
    assert_eq!(x.signed(next).await.sequence, FIRST_SEQUENCE + 2);
    x.live.node.close(1);
    for id in [refused, next] {
        e.execute(id).await.unwrap();
    }
    let r = x.row(refused).await;
    assert_eq!(r.status, PayoutStatus::Failed);
    assert!(r.failure_reason.as_deref().unwrap_or("").contains("temBAD_AMOUNT"), "{r:?}");
    assert_eq!(x.row(next).await.status, PayoutStatus::Completed);
    let sequences: Vec<_> = x.live.node.sent_by(&x.wallet).iter().map(|p| (p.sequence, p.kind)).collect();
    assert_eq!(
        sequences,
        [(FIRST_SEQUENCE, "Payment"), (FIRST_SEQUENCE + 1, "AccountSet"), (FIRST_SEQUENCE + 2, "Payment")],
        "no gap"
    );
    assert_eq!(x.balance().await, (d("95.99999"), Decimal::ZERO), "only the completed payout and its fee");
}

#[tokio::test]
async fn live_xrp_payouts_need_the_hot_wallet_seed() {
    let node = FakeRippled::start(5).await;
    let body = json!({"currency": "XRP", "amount": "1", "destination": DEST});
    crate::support::payouts::assert_refused_without_a_key(
        &["xrp"],
        |c| (c.xrp.rpc_url, c.xrp.max_retries) = (node.url.clone(), 1),
        ("xrp", "10"),
        body,
        "xrp",
    )
    .await;
}

/// As deployed: the real `api` binary and a `payout-executor` process configured only through
/// `PAYGATE_*` variables (the node, the operator's address, the hot wallet seed). The payout is
/// created over HTTP, signed and submitted by the executor, and completes once validated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_created_over_http_is_paid_from_the_hot_wallet_by_the_executor_process() {
    let node = FakeRippled::start(5).await;
    let cfg = domain::config::XrpConfig {
        rpc_url: node.url.clone(),
        hot_wallet_key: Some(domain::config::Redacted(ED25519_SEED.into())),
        ..Default::default()
    };
    let wallet = workers::chain::xrp::wallet::XrpSigner::load(&cfg).unwrap().unwrap().address().to_owned();
    node.fund(&wallet, FIRST_SEQUENCE);
    let vars = [
        ("PAYGATE_ADDRESSES__LIVE__XRP_ADDRESS", DEST2),
        ("PAYGATE_XRP__RPC_URL", node.url.as_str()),
        ("PAYGATE_XRP__HOT_WALLET_KEY", ED25519_SEED),
    ];
    let body = json!({"currency": "XRP", "amount": "12.345678", "destination": DEST, "destination_tag": "77"});
    let done = crate::support::payouts::deployed_payout(&vars, ("xrp", "30"), body, async || node.close(1)).await;
    let paid: Vec<_> =
        node.sent_by(&wallet).iter().map(|p| (p.hash.clone(), p.destination.clone(), p.tag, p.amount)).collect();
    assert_eq!(paid, [(done.payout.tx_hash.clone().unwrap(), DEST.to_owned(), Some(77), 12_345_678)], "paid once");
    assert_eq!(done.payout.network_fee.0, d("0.00001"));
    assert_eq!(done.balance, (d("17.654312"), Decimal::ZERO));
}
