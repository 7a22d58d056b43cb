//! Live Solana payouts (`solana`, `solana_usdc`) against the fake node
//! (`support::solana_node`), which decodes each sent transaction, checks its ed25519 signature
//! and judges its blockhash as a node's preflight does. The wire format is the signer's, pinned
//! to solders (whose LiteSVM executed the vectors against the real programs) by its unit tests.
//!
//! - a SOL and a USDC payout are sent once and complete when finalized: the SOL one at the fee
//!   its transaction paid, the USDC one at its estimate (its fee and the recipient's token
//!   account rent are paid in SOL), with the exact ledger;
//! - a transaction dropped before any block is sent again while its blockhash may still be
//!   valid, never judged expired by a node whose ledger starts after it, and signed again only
//!   once the finalized height is past its last valid height; the recipient is paid once;
//! - a transaction that failed in a finalized block, and one the node refuses for good (bad signature,
//!   a new account below the rent-exempt minimum, a recipient's frozen token account), fail
//!   their payouts and release the funds; a hot wallet short of funds only delays a payout; a
//!   destination that is a token account, not a wallet, is refused before anything is signed;
//! - live Solana payouts are refused (`gate_offline`) without a hot wallet key;
//! - as deployed: the real `api` and `payout-executor` processes.

use crate::support::live::d;
use crate::support::solana_node::{FakeSolana, VALIDITY};
use crate::support::solana_payouts::{SolanaPayouts, USDC, destination};
use entity::PayoutStatus;
use rust_decimal::Decimal;
use serde_json::json;
use workers::chain::solana::tx::{Payment, pubkey};

#[tokio::test]
async fn sol_and_usdc_payouts_are_sent_once_and_complete_when_finalized_with_the_exact_ledger() {
    let x = SolanaPayouts::start(&[("solana", "10"), ("solana_usdc", "100")]).await;
    let (to_sol, to_usdc) = (destination(0x21), destination(0x22));
    let sol = x.payout("SOL", &to_sol, "1.5").await;
    let usdc = x.payout("USDC", &to_usdc, "25.5").await;
    let e = x.executor();
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    }
    let payments: Vec<_> = x.live.node.sent().iter().map(|t| t.payment().unwrap()).collect();
    assert_eq!(
        payments,
        [
            Payment::Sol { to: pubkey(&to_sol).unwrap(), lamports: 1_500_000_000 },
            Payment::Spl {
                mint: pubkey(USDC).unwrap(),
                decimals: 6,
                owner: pubkey(&to_usdc).unwrap(),
                units: 25_500_000
            },
        ]
    );
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing, "confirmed, not finalized");
    }
    x.finalize_next();
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
    }
    let (a, b) = (x.row(sol).await, x.row(usdc).await);
    assert_eq!((a.status, a.network_fee.0), (PayoutStatus::Completed, d("0.000005")), "the fee it paid");
    assert_eq!((b.status, b.network_fee.0), (PayoutStatus::Completed, d("0.01")), "USDC keeps its estimate");
    assert_eq!(x.live.node.paid_to(&to_sol), [(a.tx_hash.clone().unwrap(), 1_500_000_000)]);
    assert_eq!(x.live.node.paid_to(&to_usdc), [(b.tx_hash.clone().unwrap(), 25_500_000)]);
    assert_eq!(x.balance("solana").await, (d("8.499995"), Decimal::ZERO));
    assert_eq!(x.balance("solana_usdc").await, (d("74.49"), Decimal::ZERO));
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
    }
    assert_eq!(x.live.node.sent().len(), 2, "sent once each");
}

#[tokio::test]
async fn a_dropped_transaction_is_signed_again_only_once_its_blockhash_expired_at_finalized() {
    let x = SolanaPayouts::start(&[("solana", "50")]).await;
    let e = x.executor();
    let to = destination(0x31);
    x.live.node.with(|c| c.losing = true);
    let id = x.payout("SOL", &to, "5").await;
    e.execute(id).await.unwrap();
    let first = x.row(id).await;
    let lost = x.signed(id).await;
    // Past its last valid height on the newest slot, not on the finalized one: a block that
    // could include it may still come, so it is only sent again (the node refuses its blockhash).
    x.live.node.produce(VALIDITY as usize + 1);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.tx_hash, first.tx_hash);
    assert!(x.live.node.sent().iter().all(|t| *t == lost), "only the stored transaction was sent");
    // Finalized past it, but the status comes from a node that has not processed the finalized
    // slot, or whose ledger starts after the blockhash was read: a signature it does not know
    // says nothing.
    x.live.node.finalize();
    x.live.node.with(|c| c.status_lag = 1);
    let err = e.execute(id).await.unwrap_err().to_string();
    assert!(err.contains("not judged expired"), "{err}");
    x.live.node.with(|c| c.status_lag = 0);
    x.live.node.prune_before(x.live.node.slot());
    let err = e.execute(id).await.unwrap_err().to_string();
    assert!(err.contains("not judged expired"), "{err}");
    assert_eq!(x.row(id).await.tx_hash, first.tx_hash);
    // A node that holds it: expired unseen, signed again on a new blockhash.
    x.live.node.prune_before(0);
    x.live.node.with(|c| c.losing = false);
    e.execute(id).await.unwrap();
    let again = x.row(id).await;
    assert_ne!(again.tx_hash, first.tx_hash);
    assert_eq!(again.status, PayoutStatus::Processing);
    assert_ne!(x.signed(id).await.blockhash, lost.blockhash, "a new blockhash");
    e.execute(id).await.unwrap();
    x.finalize_next();
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.live.node.paid_to(&to), [(again.tx_hash.unwrap(), 5_000_000_000)], "paid once");
    assert_eq!(x.balance("solana").await, (d("44.999995"), Decimal::ZERO));
}

#[tokio::test]
async fn a_failed_transaction_and_refused_ones_fail_their_payouts_and_release_the_funds() {
    let x = SolanaPayouts::start(&[("solana", "10"), ("solana_usdc", "100")]).await;
    let e = x.executor();
    x.live.node.with(|c| c.fail_next = true);
    let failed = x.payout("USDC", &destination(0x41), "30").await;
    e.execute(failed).await.unwrap();
    e.execute(failed).await.unwrap();
    assert_eq!(x.row(failed).await.status, PayoutStatus::Processing, "failed on a fork that may be abandoned");
    x.finalize_next();
    e.execute(failed).await.unwrap();
    let p = x.row(failed).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("InstructionError"), "{p:?}");
    assert_eq!(x.balance("solana_usdc").await, (d("100"), Decimal::ZERO), "released exactly");

    let refusals = [
        (json!({"code": -32003, "message": "Transaction signature verification failure"}), "signature verification"),
        (
            json!({"code": -32002, "message": "Transaction simulation failed: Transaction results in an account (1) with insufficient funds for rent",
                   "data": {"err": {"InsufficientFundsForRent": {"account_index": 1}}}}),
            "rent-exempt minimum",
        ),
    ];
    for (i, (error, why)) in refusals.into_iter().enumerate() {
        let to = destination(0x42 + i as u8);
        x.live.node.with(|c| c.refuse_next = Some(error));
        let refused = x.payout("SOL", &to, "0.01").await;
        e.execute(refused).await.unwrap();
        let p = x.row(refused).await;
        assert_eq!(p.status, PayoutStatus::Failed, "no nonce to fill: it fails at once");
        assert!(p.failure_reason.as_deref().unwrap_or("").contains(why), "{p:?}");
        assert!(x.live.node.paid_to(&to).is_empty());
    }
    assert_eq!(x.balance("solana").await, (d("10"), Decimal::ZERO));

    // A token account given as the destination: refused before anything is signed.
    let token_account = destination(0x49);
    x.live.node.with(|c| c.token_program_owned.insert(token_account.clone()));
    let sent = x.live.node.sent().len();
    let refused = x.payout("USDC", &token_account, "10").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!((p.status, p.signed_tx.as_deref()), (PayoutStatus::Failed, None), "never signed");
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("not a wallet address"), "{p:?}");
    assert_eq!(x.live.node.sent().len(), sent, "nothing sent");
    assert_eq!(x.balance("solana_usdc").await, (d("100"), Decimal::ZERO));
}

/// Preflight refusals as the programs word them: a transfer into a token account the issuer
/// froze (SPL Token `AccountFrozen`, custom error 17 of the transfer instruction) can never pass,
/// so the payout fails and its funds are released; a hot wallet short of USDC (`InsufficientFunds`,
/// custom error 1) can, so the same transaction is sent again and goes through once funded.
#[tokio::test]
async fn a_frozen_token_account_fails_the_payout_and_a_hot_wallet_short_of_funds_only_delays_one() {
    let x = SolanaPayouts::start(&[("solana_usdc", "100")]).await;
    let e = x.executor();
    let frozen = destination(0x4a);
    x.live.node.with(|c| c.frozen.insert(frozen.clone()));
    let refused = x.payout("USDC", &frozen, "10").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    let reason = p.failure_reason.clone().unwrap_or_default();
    assert!(reason.contains("InstructionError") && reason.contains("17"), "{reason}");
    assert_eq!(x.balance("solana_usdc").await, (d("100"), Decimal::ZERO), "released exactly");

    x.live.node.with(|c| c.short_of_funds = true);
    let to = destination(0x4b);
    let id = x.payout("USDC", &to, "10").await;
    e.execute(id).await.unwrap();
    let waiting = x.row(id).await;
    assert_eq!(waiting.status, PayoutStatus::Queued, "kept, to be sent again");
    assert_eq!(x.balance("solana_usdc").await, (d("89.99"), d("10.01")), "still reserved");
    x.live.node.with(|c| c.short_of_funds = false);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    x.finalize_next();
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.live.node.paid_to(&to), [(waiting.tx_hash.unwrap(), 10_000_000)], "paid once");
    assert_eq!(x.balance("solana_usdc").await, (d("89.99"), Decimal::ZERO));
}

#[tokio::test]
async fn live_solana_payouts_need_the_hot_wallet_key() {
    let node = FakeSolana::start(3).await;
    let body = json!({"currency": "USDC", "network": "solana", "amount": "1", "destination": destination(0x51)});
    crate::support::payouts::assert_refused_without_a_key(
        &["solana", "solana_usdc"],
        |c| (c.solana.rpc_url, c.solana.max_retries) = (node.url.clone(), 1),
        ("solana_usdc", "10"),
        body,
        "solana",
    )
    .await;
}

/// As deployed: the real `api` binary and a `payout-executor` process configured only through
/// `PAYGATE_*` variables (the node and the hot wallet keypair). The USDC payout is created over
/// HTTP, signed and sent by the executor, and completes once finalized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_created_over_http_is_paid_from_the_hot_wallet_by_the_executor_process() {
    let node = FakeSolana::start(3).await;
    let key = crate::support::solana_payouts::keypair();
    let vars = [
        ("PAYGATE_SOLANA__RPC_URL", node.url.as_str()),
        ("PAYGATE_ADDRESSES__LIVE__SOLANA_POOL", r#"["4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi"]"#),
        ("PAYGATE_SOLANA__HOT_WALLET_KEY", key.as_str()),
    ];
    let to = destination(0x71);
    let body = json!({"currency": "USDC", "network": "solana", "amount": "40", "destination": to});
    let done = crate::support::payouts::deployed_payout(&vars, ("solana_usdc", "50"), body, async || {
        node.produce(1);
        node.finalize();
    })
    .await;
    assert_eq!(node.paid_to(&to), [(done.payout.tx_hash.clone().unwrap(), 40_000_000)], "paid once");
    assert_eq!(done.balance, (d("9.99"), Decimal::ZERO), "50 less 40 and the 0.01 USDC estimate");
}
