//! Live TRON payouts (`tron`, `tron_usdt`) against the fake full node (`support::tron_node`),
//! which decodes each broadcast transaction, recovers its signer, validates its contract and
//! judges its expiration and reference block as java-tron does. The protobuf is the signer's,
//! pinned to TronWeb's output by its unit tests.
//!
//! - a TRX and a USDT payout are broadcast once and complete at 19 blocks: the TRX one at the
//!   fee its transaction burnt, the USDT one at its estimate (its energy is paid in TRX), with
//!   the exact ledger;
//! - a transaction lost before any block is sent again while it can still enter one, and signed
//!   again only once its expiration is behind the solidified block and the node holds every
//!   block of its window; the recipient is paid once. The solidified block comes from the full
//!   node's `/wallet/*` port alone (no `/walletsolidity/*` there);
//! - a transaction in a block is never signed again, though a node behind the load balancer
//!   answers the first look-ups (or every look-up by id) "not found";
//! - a reverted USDT transfer fails its payout once its block is 19 deep (not before: a fork
//!   could still include it elsewhere); a bad signature and a transfer to the hot wallet itself
//!   fail theirs at once, each releasing its funds; a hot wallet short of TRX only delays one;
//! - live TRON payouts are refused (`gate_offline`) without a hot wallet key.

use crate::support::live::d;
use crate::support::tron_node::{FakeTron, SOLID_LAG};
use crate::support::tron_payouts::{TronPayouts, USDT, destination, hot_wallet};
use entity::PayoutStatus;
use rust_decimal::Decimal;
use serde_json::json;
use workers::chain::tron::tx::Call;

fn id20(address: &str) -> [u8; 20] {
    domain::chain::address::tron::account_id_of(address).unwrap()
}

#[tokio::test]
async fn trx_and_usdt_payouts_are_broadcast_once_and_complete_at_19_blocks_with_the_exact_ledger() {
    let x = TronPayouts::start(&[("tron", "100"), ("tron_usdt", "100")]).await;
    let (to_trx, to_usdt) = (destination(0x21), destination(0x22));
    let trx = x.payout("TRX", &to_trx, "10").await;
    let usdt = x.payout("USDT", &to_usdt, "25.5").await;
    let e = x.executor();
    for id in [trx, usdt] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    }
    let calls: Vec<Call> = x.broadcasts().into_iter().map(|r| r.call).collect();
    assert_eq!(
        calls,
        [
            Call::Trx { to: id20(&to_trx), sun: 10_000_000 },
            Call::Trc20 {
                contract: id20(USDT),
                to: id20(&to_usdt),
                units: alloy_primitives::U256::from(25_500_000u64),
                fee_limit: 50_000_000
            },
        ]
    );
    x.live.node.mine(1);
    for id in [trx, usdt] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing, "1 of 19 confirmations");
    }
    x.live.node.mine(18);
    for id in [trx, usdt] {
        e.execute(id).await.unwrap();
    }
    let (a, b) = (x.row(trx).await, x.row(usdt).await);
    assert_eq!((a.status, a.network_fee.0), (PayoutStatus::Completed, d("0.267")), "the TRX its bandwidth burnt");
    assert_eq!((b.status, b.network_fee.0), (PayoutStatus::Completed, d("2")), "USDT keeps its estimate");
    assert_eq!(x.paid_to(&to_trx), [(a.tx_hash.clone().unwrap(), 10_000_000)]);
    assert_eq!(x.paid_to(&to_usdt), [(b.tx_hash.clone().unwrap(), 25_500_000)]);
    assert_eq!(x.balance("tron").await, (d("89.733"), Decimal::ZERO));
    assert_eq!(x.balance("tron_usdt").await, (d("72.5"), Decimal::ZERO));
    for id in [trx, usdt] {
        e.execute(id).await.unwrap();
    }
    assert_eq!(x.broadcasts().len(), 2, "broadcast once each");
}

#[tokio::test]
async fn a_transaction_lost_before_any_block_is_signed_again_only_once_its_expiration_is_solid() {
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let e = x.executor();
    let to = destination(0x31);
    x.live.node.with(|l| l.losing = true);
    let id = x.payout("TRX", &to, "5").await;
    e.execute(id).await.unwrap();
    let first = x.row(id).await;
    let lost = x.signed(id).await;
    // Expired on the newest block, not yet behind the solidified one: a block that could hold
    // it may still be replaced, so it is only sent again (the node now refuses it as expired).
    x.live.node.mine(2);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.tx_hash, first.tx_hash);
    assert!(x.broadcasts().iter().all(|r| *r == lost), "only the stored transaction was sent");
    // Behind the solidified block, on a node that no longer holds its reference block: not
    // judged expired.
    x.live.node.mine(SOLID_LAG as usize);
    x.live.node.prune_before(x.live.node.height() - SOLID_LAG);
    let err = e.execute(id).await.unwrap_err().to_string();
    assert!(err.contains("reference block") && err.contains("not judged expired"), "{err}");
    assert_eq!(x.row(id).await.tx_hash, first.tx_hash);
    // A node that holds it: expired unseen, signed again on a new reference block.
    x.live.node.prune_before(0);
    x.live.node.with(|l| l.losing = false);
    e.execute(id).await.unwrap();
    let again = x.row(id).await;
    assert_ne!(again.tx_hash, first.tx_hash);
    assert_eq!(again.status, PayoutStatus::Processing);
    assert!(x.signed(id).await.expiration_ms > lost.expiration_ms, "a new expiration");
    x.live.node.mine(19);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.paid_to(&to), [(again.tx_hash.unwrap(), 5_000_000)], "paid once");
    assert_eq!(x.balance("tron").await, (d("44.733"), Decimal::ZERO));
}

#[tokio::test]
async fn a_reverted_usdt_transfer_and_a_refused_transaction_fail_their_payouts_and_release_the_funds() {
    let x = TronPayouts::start(&[("tron", "10"), ("tron_usdt", "100")]).await;
    let e = x.executor();
    x.live.node.with(|l| l.revert_next = true);
    let reverted = x.payout("USDT", &destination(0x41), "30").await;
    e.execute(reverted).await.unwrap();
    x.live.node.mine(1);
    e.execute(reverted).await.unwrap();
    let p = x.row(reverted).await;
    assert_eq!(p.status, PayoutStatus::Processing, "reverted in a block a fork may still replace: it waits");
    assert_eq!(x.balance("tron_usdt").await.1, d("32"), "still reserved");
    x.live.node.mine(18);
    e.execute(reverted).await.unwrap();
    let p = x.row(reverted).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("REVERT"), "{p:?}");
    assert_eq!(x.balance("tron_usdt").await, (d("100"), Decimal::ZERO), "released exactly");

    x.live.node.with(|l| l.refuse_next = Some("SIGERROR"));
    let refused = x.payout("TRX", &destination(0x42), "4").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Failed, "no nonce to fill: it fails at once");
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("SIGERROR"), "{p:?}");
    assert_eq!(x.balance("tron").await, (d("10"), Decimal::ZERO));
    assert!(x.paid_to(&destination(0x42)).is_empty());
}

/// A java-tron full node's HTTP port (what `api_url` names) serves `/wallet/*` only; the
/// solidified block that judges expiry is read there (`/wallet/getnodeinfo`).
#[tokio::test]
async fn expiry_is_judged_on_the_full_nodes_wallet_port_alone() {
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let solidity = reqwest::Client::new()
        .post(format!("{}/walletsolidity/getnowblock", x.live.node.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(solidity.status().as_u16(), 404, "as on a java-tron full node's HTTP port");
    let e = x.executor();
    x.live.node.with(|l| l.losing = true);
    let id = x.payout("TRX", &destination(0x35), "5").await;
    e.execute(id).await.unwrap();
    let first = x.row(id).await.tx_hash;
    x.live.node.mine(SOLID_LAG as usize + 2);
    x.live.node.with(|l| l.losing = false);
    e.execute(id).await.unwrap();
    let again = x.row(id).await;
    assert_ne!(again.tx_hash, first, "expired unseen: signed again");
    x.live.node.mine(19);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.paid_to(&destination(0x35)), [(again.tx_hash.unwrap(), 5_000_000)], "paid once");
}

/// One URL behind a load balancer: the first look-ups reach a node that has not reached the
/// transaction's block; the solidified block, read next from an up-to-date node, is past its
/// expiration. The transaction landed: the payout completes with it and is never signed again.
#[tokio::test]
async fn a_transaction_in_a_block_is_never_signed_again_because_a_node_behind_answered_first() {
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let e = x.executor();
    let to = destination(0x36);
    let id = x.payout("TRX", &to, "5").await;
    e.execute(id).await.unwrap();
    let sent = x.row(id).await;
    assert_eq!(sent.status, PayoutStatus::Processing);
    let block = x.live.node.height() + 1;
    x.live.node.mine(SOLID_LAG as usize + 3);
    // A node whose newest block is the one before the transaction's answers the next two calls
    // (its transaction info and its pending look-up).
    let behind = x.live.node.height() - (block - 1);
    x.live.node.with(|l| l.lagging.extend([behind, behind]));
    e.execute(id).await.unwrap();
    let p = x.row(id).await;
    assert_eq!((p.status, p.tx_hash.as_deref()), (PayoutStatus::Completed, sent.tx_hash.as_deref()));
    assert_eq!(x.live.node.with(|l| l.lagging.len()), 0, "the node behind was asked");
    assert_eq!(x.broadcasts().len(), 1, "never signed again");
    assert_eq!(x.paid_to(&to), [(sent.tx_hash.unwrap(), 5_000_000)], "paid once");
    assert_eq!(x.balance("tron").await, (d("44.733"), Decimal::ZERO));
}

/// Every look-up by id reaches a node behind (it never shows the transaction), while blocks
/// come from nodes that hold them: the window's blocks show it landed, so it is not judged
/// expired; once a node shows it, the payout completes with it.
#[tokio::test]
async fn a_transaction_in_a_block_of_its_window_is_not_judged_expired_whatever_the_lookups_say() {
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let e = x.executor();
    let to = destination(0x37);
    let id = x.payout("TRX", &to, "5").await;
    e.execute(id).await.unwrap();
    let sent = x.row(id).await;
    let block = x.live.node.height() + 1;
    x.live.node.mine(SOLID_LAG as usize + 3);
    let behind = x.live.node.height() - (block - 1);
    x.live.node.with(|l| l.info_lag = behind);
    let err = e.execute(id).await.unwrap_err().to_string();
    assert!(err.contains(&format!("is in block {block}")) && err.contains("not judged expired"), "{err}");
    assert_eq!(x.row(id).await.tx_hash, sent.tx_hash, "never signed again");
    x.live.node.with(|l| l.info_lag = 0);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(x.broadcasts().len(), 1);
    assert_eq!(x.paid_to(&to), [(sent.tx_hash.unwrap(), 5_000_000)], "paid once");
}

/// `CONTRACT_VALIDATE_ERROR` as java-tron's `TransferActuator` words it: a payout to the hot
/// wallet's own address can never be valid (failed at once, funds released); a hot wallet short
/// of TRX can pass once funded (the same transaction is sent again, and goes through).
#[tokio::test]
async fn a_payout_to_the_hot_wallet_itself_fails_and_one_short_of_trx_waits_for_funds() {
    let x = TronPayouts::start(&[("tron", "50")]).await;
    let e = x.executor();
    let refused = x.payout("TRX", &hot_wallet(), "5").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("Cannot transfer TRX to yourself"), "{p:?}");
    assert_eq!(x.balance("tron").await, (d("50"), Decimal::ZERO), "released exactly");

    x.live.node.with(|l| l.underfunded = true);
    let to = destination(0x38);
    let id = x.payout("TRX", &to, "5").await;
    e.execute(id).await.unwrap();
    let waiting = x.row(id).await;
    assert_eq!(waiting.status, PayoutStatus::Queued, "kept, to be sent again");
    assert_eq!(x.balance("tron").await, (d("44"), d("6")), "still reserved (5 and the 1 TRX estimate)");
    x.live.node.with(|l| l.underfunded = false);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    x.live.node.mine(19);
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    let sent: Vec<_> = x.broadcasts().into_iter().map(|r| hex::encode(r.id())).collect();
    assert_eq!(sent.len(), 3, "the refused one, then one transaction sent twice: {sent:?}");
    assert_eq!(sent[1], sent[2]);
    assert_eq!(x.paid_to(&to), [(waiting.tx_hash.unwrap(), 5_000_000)], "paid once");
}

#[tokio::test]
async fn live_tron_payouts_need_the_hot_wallet_key() {
    let node = FakeTron::start(3).await;
    let body = json!({"currency": "USDT", "network": "tron", "amount": "1", "destination": destination(0x51)});
    crate::support::payouts::assert_refused_without_a_key(
        &["tron", "tron_usdt"],
        |c| (c.tron.api_url, c.tron.max_retries) = (node.url.clone(), 1),
        ("tron_usdt", "10"),
        body,
        "tron",
    )
    .await;
}

/// As deployed: the real `api` binary and a `payout-executor` process configured only through
/// `PAYGATE_*` variables (the node, the deposit key, the hot wallet key). The USDT payout is
/// created over HTTP, signed and broadcast by the executor, and completes at 19 blocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_created_over_http_is_paid_from_the_hot_wallet_by_the_executor_process() {
    let node = FakeTron::start(3).await;
    let tron_xpub = testkit::live_keys().tron_xpub.unwrap();
    let vars = [
        ("PAYGATE_ADDRESSES__LIVE__TRON_XPUB", tron_xpub.as_str()),
        ("PAYGATE_TRON__API_URL", node.url.as_str()),
        ("PAYGATE_TRON__HOT_WALLET_KEY", crate::support::tron_payouts::KEY),
    ];
    let to = destination(0x71);
    let body = json!({"currency": "USDT", "network": "tron", "amount": "40", "destination": to});
    let done = crate::support::payouts::deployed_payout(&vars, ("tron_usdt", "50"), body, async || node.mine(1)).await;
    let paid = node.paid_to(&id20(&to));
    assert_eq!(paid, [(done.payout.tx_hash.clone().unwrap(), 40_000_000)], "paid once");
    assert_eq!(done.balance, (d("8"), Decimal::ZERO), "50 less 40 and the 2 USDT estimate");
}
