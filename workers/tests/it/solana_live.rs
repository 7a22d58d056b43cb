//! The Solana adapter (`solana`, `solana_usdc`) against a fake JSON-RPC node
//! (`support::solana_node`: `getSlot`, `getBlock` jsonParsed, `getSignatureStatuses` in the
//! cluster's documented shapes over slots the test fills, finalizes and forks). The live
//! pipeline (scanner and tracker rules) runs in the test against it:
//!
//! - a SOL and a USDC deposit are `confirming` at `confirmed` commitment (0 confirmations) and
//!   credited exactly once when finalized, with the exact ledger, where their tracking ends;
//!   skipped slots are read past;
//! - an underpaid USDC invoice; a failed transaction and another mint credit nothing;
//! - a confirmed deposit forked away before finalization is reversed only once it stayed missing
//!   past its blockhash's validity (151 slots), never on a few missing answers;
//! - a scanner started anew resumes at its cursor and misses no slot;
//! - `GET /v1/currencies?environment=live` shows both gates online only with `[solana]` set.

use crate::support::live::{Live, d};
use crate::support::solana_node::{FakeSolana, Tx};
use entity::PaymentStatus;
use serde_json::{Value, json};
use testkit::TestApp;

const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";

/// A live pool of valid Solana addresses (base58 of 32 bytes), one per invoice.
const POOL: [&str; 4] = [
    "4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi",
    "8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR",
    "GgBaCs3NCBuZN12kCJgAW63ydqohFkHEdfdEXBPzLHq",
    "LbUiWL3xVV8hTFYBVdbTNrpDo41NKS6o3LHHuDzjfcY",
];

fn pool() -> Vec<String> {
    POOL.iter().map(|a| (*a).to_owned()).collect()
}

async fn live() -> Live<FakeSolana> {
    Live::start(FakeSolana::start(5).await, &["solana", "solana_usdc"], |c, url| {
        (c.solana.rpc_url, c.solana.max_retries, c.solana.retry_backoff_ms) = (url, 1, 10);
        c.addresses.live.solana_pool = pool();
    })
    .await
}

fn address(inv: &Value) -> String {
    inv["deposit_address"].as_str().unwrap().to_owned()
}

fn sol(sig: &str, inv: &Value, lamports: u64, ok: bool) -> Tx {
    Tx::Sol { sig: sig.into(), to: address(inv), lamports, ok }
}

fn usdc(sig: &str, inv: &Value, units: u64, ok: bool) -> Tx {
    Tx::Spl { sig: sig.into(), mint: USDC.into(), owner: address(inv), units, ok }
}

#[tokio::test]
async fn sol_and_usdc_deposits_confirm_when_finalized_and_are_credited_once() {
    let l = live().await;
    let a = l.invoice(json!({"currency": "SOL", "amount": "1.5"})).await;
    let b = l.invoice(json!({"currency": "USDC", "network": "solana", "amount": "12.5"})).await;
    l.node.skip(3);
    l.node.include(vec![sol("sigA", &a, 1_500_000_000, true), usdc("sigB", &b, 12_500_000, true)]);
    l.node.skip(2);
    l.step_over(5).await;
    // Confirmed, not finalized: confirming, pending balance.
    assert_eq!((l.status(&a).await, l.status(&b).await), ("confirming".into(), "confirming".into()));
    assert_eq!(l.balance("solana").await, (d("0"), d("1.5")));
    assert_eq!(l.balance("solana_usdc").await, (d("0"), d("12.5")));
    l.node.finalize();
    l.step().await;
    assert_eq!((l.status(&a).await, l.status(&b).await), ("paid".into(), "paid".into()));
    assert_eq!(l.balance("solana").await, (d("1.5"), d("0")));
    assert_eq!(l.balance("solana_usdc").await, (d("12.5"), d("0")));
    l.step_over(5).await;
    assert_eq!((l.credits(&a).await, l.credits(&b).await), (1, 1));
    l.assert_ledger_sums().await;
}

#[tokio::test]
async fn underpaid_failed_and_foreign_mint_transfers_are_told_apart() {
    let l = live().await;
    let short = l.invoice(json!({"currency": "USDC", "network": "solana", "amount": "10"})).await;
    let untouched = l.invoice(json!({"currency": "SOL", "amount": "2"})).await;
    let other_mint = Tx::Spl {
        sig: "sig3".into(),
        mint: "So11111111111111111111111111111111111111112".into(),
        owner: address(&short),
        units: 10_000_000,
        ok: true,
    };
    l.node.include(vec![
        usdc("sig1", &short, 7_000_000, true),
        sol("sig2", &untouched, 2_000_000_000, false),
        other_mint,
    ]);
    l.node.finalize();
    l.step_over(2).await;
    assert_eq!(l.status(&short).await, "underpaid");
    assert_eq!(l.status(&untouched).await, "pending", "a failed transaction pays nothing");
    assert_eq!(l.live_payments().await.len(), 1, "another mint is not USDC");
    assert_eq!(l.balance("solana_usdc").await, (d("7"), d("0")));
}

#[tokio::test]
async fn a_confirmed_deposit_forked_away_before_finalization_is_reversed_after_the_gone_span() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "SOL", "amount": "1"})).await;
    let at = l.node.include(vec![sol("sigF", &inv, 1_000_000_000, true)]);
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming");
    l.node.fork_from(at);
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming", "one missing answer reverses nothing");
    // Missing on 3 checks but within the blockhash's 150 slots: it could still land.
    l.step_over(3).await;
    assert_eq!(l.status(&inv).await, "confirming", "a dropped transaction may land for 150 slots");
    // Past 151 slots of missing checks: reversed, once.
    for _ in 0..3 {
        l.node.produce(60);
        l.step().await;
    }
    let p = l.payment(&inv).await;
    assert_eq!(p.status, PaymentStatus::Reversed, "{p:?}");
    assert_eq!(l.status(&inv).await, "pending");
    assert_eq!(l.balance("solana").await, (d("0"), d("0")));
}

/// An RPC node keeps a bounded ledger: a signature from a slot it no longer holds is unknown to
/// it. That is an error the tracker retries, never `Gone`, so no deposit is reversed because the
/// node pruned its ledger or restarted from a snapshot.
#[tokio::test]
async fn a_node_whose_ledger_no_longer_holds_the_slot_never_makes_a_deposit_look_missing() {
    use workers::chain::TxStatus;
    let l = live().await;
    let inv = l.invoice(json!({"currency": "SOL", "amount": "1"})).await;
    let at = l.node.include(vec![sol("sigP", &inv, 1_000_000_000, true)]);
    l.node.finalize();
    l.step().await;
    assert_eq!(l.payment(&inv).await.block_height, Some(at as i64));
    let chain = l.chains.get(entity::Environment::Live, "solana").unwrap();
    l.node.prune_before(at + 1);
    let err = chain.status("sigP", 1, Some(at)).await.unwrap_err();
    assert!(err.to_string().contains("ledger starts at slot"), "{err}");
    // The node that holds the slot and does not know the signature: missing.
    l.node.prune_before(0);
    assert!(matches!(chain.status("sigP", 1, Some(at)).await.unwrap(), TxStatus::Confirmations(_)));
    assert_eq!(chain.status("sigNone", 1, Some(at)).await.unwrap(), TxStatus::Gone);
}

/// A slot `getBlocks` lists but whose block the node cannot serve yet (a node behind a load
/// balancer) fails the scan instead of passing for empty; skipped slots are passed over.
#[tokio::test]
async fn a_listed_block_the_node_cannot_serve_yet_fails_the_scan_and_is_read_later() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "SOL", "amount": "1"})).await;
    l.node.skip(2);
    let at = l.node.include(vec![sol("sigU", &inv, 1_000_000_000, true)]);
    let chain = l.chains.get(entity::Environment::Live, "solana").unwrap();
    l.node.set_unavailable(at, true);
    let err = chain.transfers(at - 2, at).await.unwrap_err();
    assert!(err.to_string().contains("not available"), "{err}");
    l.node.set_unavailable(at, false);
    let got = chain.transfers(at - 2, at).await.unwrap();
    assert_eq!(got.iter().map(|t| (t.tx_hash.as_str(), t.block_height)).collect::<Vec<_>>(), [("sigU", at)]);
}

#[tokio::test]
async fn a_scanner_started_anew_resumes_at_its_cursor_and_misses_no_slot() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "USDC", "network": "solana", "amount": "3"})).await;
    l.node.produce(40);
    l.node.skip(5);
    let at = l.node.include(vec![usdc("sigR", &inv, 3_000_000, true)]);
    l.node.produce(30);
    l.node.finalize();
    l.scan_as_a_new_process().await;
    l.assert_recorded_at_then_paid(&inv, "3", at, "").await;
}

#[tokio::test]
async fn live_solana_gates_are_online_only_with_a_node() {
    let without = TestApp::spawn_with(|c| c.addresses.live.solana_pool = pool()).await;
    live().await.assert_online_only_with_a_node(without, None).await;
}

/// Tracking ends at finalization: `finalized` is final, and the adapter reports it at the gate's
/// 1 confirmation, its final depth. Before, a block read at `confirmed` commitment counts 0,
/// from the scan that records it on. Once finalized: no job, no hand-over, no look at it again.
#[tokio::test]
async fn tracking_ends_when_a_deposit_is_finalized() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "SOL", "amount": "1"})).await;
    l.node.include(vec![sol("sigE", &inv, 1_000_000_000, true)]);
    l.scan(&l.chains, 100).await;
    assert_eq!(l.status(&inv).await, "confirming");
    assert_eq!(l.get(&inv).await["payments"][0]["confirmations"], 0, "confirmed commitment, before any tracker look");
    l.step_over(3).await;
    assert_eq!(l.payment(&inv).await.confirmations, 0, "not finalized");
    l.node.finalize();
    l.step().await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.payment(&inv).await.confirmations, 1);
    l.assert_tracking_ended(&inv, 3).await;
}
