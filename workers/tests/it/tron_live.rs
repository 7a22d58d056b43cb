//! The TRON adapter (`tron`, `tron_usdt`) against a fake full node (`support::tron_node`: the
//! java-tron HTTP API's documented JSON over a chain the test builds and forks). The live
//! pipeline (scanner and tracker rules) runs in the test against it:
//!
//! - a TRX and a TRC-20 USDT deposit, confirming until the gate's 19 blocks, then credited
//!   exactly once with the exact ledger; tracking ends at twice that depth;
//! - an underpaid USDT invoice; a reverted USDT call, another contract's transfer and a TRX
//!   transfer to an unknown address credit nothing;
//! - a deposit forked away: one missing answer changes nothing, a span of missing checks
//!   reverses it once (pending released, invoice back to pending);
//! - a scanner started anew resumes at its cursor and misses no block;
//! - `GET /v1/currencies?environment=live` shows both gates online only with `[tron]` set;
//! - balances: TRX from the account, USDT from the contract's `balanceOf`, blocks only.

use std::sync::Arc;

use crate::support::live::{Live, d};
use crate::support::tron_node::{FakeTron, Tx};
use domain::chain::address::tron::{account_id_of, address_of};
use entity::PaymentStatus;
use serde_json::{Value, json};
use testkit::TestApp;
use workers::chain::Chain;

const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

async fn live() -> Live<FakeTron> {
    Live::start(FakeTron::start(10).await, &["tron", "tron_usdt"], |c, url| {
        (c.tron.api_url, c.tron.max_retries, c.tron.retry_backoff_ms) = (url, 1, 10);
    })
    .await
}

fn to(inv: &Value) -> [u8; 20] {
    account_id_of(inv["deposit_address"].as_str().unwrap()).expect("a TRON deposit address")
}

fn trx(tx: &str, inv: &Value, trx: u64) -> Tx {
    Tx::Trx { id: tx.into(), to: to(inv), sun: trx * 1_000_000 }
}

/// An invoice of `trx` TRX and a transfer `tx` of it in a new block, then a pipeline step: the
/// invoice and the block's height.
async fn trx_deposit(l: &Live<FakeTron>, tx: &str, trx_amount: u64) -> (Value, u64) {
    let inv = l.invoice(json!({"currency": "TRX", "amount": trx_amount.to_string()})).await;
    let at = l.node.include(vec![trx(tx, &inv, trx_amount)]);
    l.step().await;
    (inv, at)
}

fn usdt(tx: &str, inv: &Value, units: u64, ok: bool) -> Tx {
    Tx::Token { id: tx.into(), contract: account_id_of(USDT).unwrap(), to: to(inv), units, ok }
}

#[tokio::test]
async fn trx_and_usdt_deposits_confirm_after_19_blocks_and_are_credited_once() {
    let l = live().await;
    let a = l.invoice(json!({"currency": "TRX", "amount": "10"})).await;
    let b = l.invoice(json!({"currency": "USDT", "network": "tron", "amount": "25.5"})).await;
    assert!(a["deposit_address"].as_str().unwrap().starts_with('T'), "{a}");
    l.node.include(vec![trx("a1", &a, 10), usdt("b1", &b, 25_500_000, true)]);
    l.step().await;
    for inv in [&a, &b] {
        let got = l.get(inv).await;
        assert_eq!(got["status"], "confirming", "{got}");
        assert_eq!(got["payments"][0]["confirmations"], 1);
    }
    assert_eq!(l.balance("tron").await, (d("0"), d("10")));
    // 18 confirmations: not yet.
    l.step_over(17).await;
    assert_eq!(l.get(&a).await["status"], "confirming");
    assert_eq!(l.payment(&b).await.confirmations, 18);
    // The 19th block confirms both.
    l.step_over(1).await;
    assert_eq!(l.get(&a).await["status"], "paid");
    assert_eq!(l.get(&b).await["status"], "paid");
    assert_eq!(l.balance("tron").await, (d("10"), d("0")));
    assert_eq!(l.balance("tron_usdt").await, (d("25.5"), d("0")));
    // Watched to twice its depth; nothing credited twice on the way.
    l.step_over(20).await;
    assert_eq!((l.credits(&a).await, l.credits(&b).await), (1, 1));
    assert_eq!(l.balance("tron").await, (d("10"), d("0")));
    assert_eq!(l.payment(&a).await.status, PaymentStatus::Confirmed);
    l.assert_ledger_sums().await;
}

#[tokio::test]
async fn underpaid_reverted_and_foreign_transfers_are_told_apart() {
    let l = live().await;
    let short = l.invoice(json!({"currency": "USDT", "network": "tron", "amount": "25"})).await;
    let untouched = l.invoice(json!({"currency": "USDT", "network": "tron", "amount": "5"})).await;
    let other_contract = Tx::Token {
        id: "c3".into(),
        contract: account_id_of("TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP").unwrap(),
        to: to(&untouched),
        units: 5_000_000,
        ok: true,
    };
    let stranger = Tx::Trx { id: "c4".into(), to: [7; 20], sun: 1_000_000 };
    l.node.include(vec![
        usdt("c1", &short, 20_000_000, true),
        usdt("c2", &untouched, 5_000_000, false),
        other_contract,
        stranger,
    ]);
    l.step().await;
    let why = "a reverted call and another token pay nothing";
    l.assert_only_underpaid_after(18, (&short, "20"), (&untouched, why), "tron_usdt").await;
}

#[tokio::test]
async fn a_deposit_forked_away_is_reversed_only_after_a_span_of_missing_checks() {
    let l = live().await;
    let (inv, at) = trx_deposit(&l, "f1", 3).await;
    l.step_over(2).await;
    assert_eq!(l.get(&inv).await["status"], "confirming");
    assert_eq!(l.balance("tron").await, (d("0"), d("3")));

    // A fork without the transaction (double spent: not in the mempool either).
    l.node.fork_from(at, false);
    l.step().await;
    assert_eq!(l.get(&inv).await["status"], "confirming", "one missing answer reverses nothing");
    assert!(l.payment(&inv).await.missing_since_height.is_some());
    // Missing over the gate's 19 blocks and 3 checks: reversed, once.
    l.step_over(19).await;
    l.assert_reversed_unconfirmed(&inv, "tron").await;
}

#[tokio::test]
async fn a_forked_transaction_back_in_the_mempool_is_unconfirmed_not_reversed() {
    let l = live().await;
    let (inv, at) = trx_deposit(&l, "m1", 4).await;
    l.node.fork_from(at, true);
    l.step_over(25).await;
    let p = l.payment(&inv).await;
    assert_eq!((p.status, p.confirmations), (PaymentStatus::Confirming, 0), "{p:?}");
    assert_eq!(p.missing_since_height, None);
    // Mined again: it confirms and is credited once.
    l.node.include(vec![trx("m1", &inv, 4)]);
    l.step().await;
    l.step_over(18).await;
    assert_eq!(l.get(&inv).await["status"], "paid");
    assert_eq!(l.credits(&inv).await, 1);
}

/// A lite full node keeps only recent blocks: a transaction in a block it no longer holds is
/// unknown to it. That is an error the tracker retries, never `Gone`.
#[tokio::test]
async fn a_node_without_the_payments_block_never_makes_a_deposit_look_missing() {
    use workers::chain::TxStatus;
    let l = live().await;
    let (inv, at) = trx_deposit(&l, "p1", 5).await;
    assert_eq!(l.payment(&inv).await.block_height, Some(at as i64));
    let chain = l.chains.get(entity::Environment::Live, "tron").unwrap();
    l.node.prune_before(at + 1);
    let err = chain.status("p1", 0, Some(at)).await.unwrap_err();
    assert!(err.to_string().contains("does not hold block"), "{err}");
    // A node that holds the block and knows no such transaction: missing.
    l.node.prune_before(0);
    assert!(matches!(chain.status("p1", 0, Some(at)).await.unwrap(), TxStatus::Confirmations(_)));
    assert_eq!(chain.status("nope", 0, Some(at)).await.unwrap(), TxStatus::Gone);
}

/// A node that does not serve a block yet (`{}`, or no transaction infos: a node behind a load
/// balancer) fails the scan on both gates instead of passing for an empty block.
#[tokio::test]
async fn a_block_the_node_does_not_serve_yet_fails_the_scan() {
    let l = live().await;
    let next = l.node.height() + 1;
    for gate in ["tron", "tron_usdt"] {
        let chain = l.chains.get(entity::Environment::Live, gate).unwrap();
        let err = chain.transfers(next, next).await.unwrap_err();
        assert!(err.to_string().contains(&format!("block {next} is not available")), "{gate}: {err}");
        assert!(chain.transfers(next - 1, next - 1).await.unwrap().is_empty(), "{gate}: an empty block is fine");
    }
}

#[tokio::test]
async fn a_scanner_started_anew_resumes_at_its_cursor_and_misses_no_block() {
    let l = live().await;
    let inv = l.invoice(json!({"currency": "USDT", "network": "tron", "amount": "7"})).await;
    // The scanner is down while 60 blocks pass, the deposit among them.
    l.node.mine(30);
    l.node.include(vec![usdt("r1", &inv, 7_000_000, true)]);
    l.node.mine(29);
    // A new process: new chains, the cursor from the database, bounded batches of 10 blocks.
    let calls = l.node.calls();
    l.scan_as_a_new_process().await;
    assert!(l.node.calls() > calls);
    let height = l.node.height() - 29;
    l.assert_recorded_at_then_paid(&inv, "7", height, "60 blocks deep: confirmed at once").await;
}

#[tokio::test]
async fn live_tron_gates_are_online_only_with_a_node() {
    live().await.assert_online_only_with_a_node(TestApp::spawn().await, Some("TRX")).await;
}

/// Tracking ends at the final depth, twice the gate's 19 blocks (a reversal is watched for until
/// there): from then on no job, no hand-over, no look at it again.
#[tokio::test]
async fn tracking_ends_at_twice_the_gates_depth() {
    let l = live().await;
    let (inv, _) = trx_deposit(&l, "e1", 5).await;
    l.step_over(18).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert!(l.payment(&inv).await.next_check_at.is_some(), "watched for a reversal");
    l.step_over(19).await;
    assert_eq!(l.payment(&inv).await.confirmations, 38);
    l.assert_tracking_ended(&inv, 3).await;
}

/// The live TRON chains on `node`, by gate, without an app: what treasury reconciliation reads.
fn tron_chains(node: &FakeTron) -> (Arc<dyn Chain>, Arc<dyn Chain>) {
    let cfg = domain::config::TronConfig {
        api_url: node.url.clone(),
        max_retries: 1,
        retry_backoff_ms: 10,
        ..Default::default()
    };
    let chains = workers::chain::tron::chains(&cfg);
    let gate = |id: &str| chains.iter().find(|c| c.gate().id == id).cloned().unwrap_or_else(|| panic!("no {id}"));
    (gate("tron"), gate("tron_usdt"))
}

/// TRX from `/wallet/getaccount` (an account never reached is 0) and USDT from the contract's
/// `balanceOf`, counting only blocks: a transfer forked back to the mempool is not held, a
/// reverted call and another contract's token pay nothing.
#[tokio::test]
async fn trx_and_usdt_balances_are_read_from_the_account_and_the_contract() {
    let node = FakeTron::start(3).await;
    let (trx_chain, usdt_chain) = tron_chains(&node);
    let (a, b) = (address_of(&[0xA1; 20]), address_of(&[0xB2; 20]));
    for chain in [&trx_chain, &usdt_chain] {
        assert_eq!(chain.balance(&a).await.unwrap(), d("0"), "{}: never reached", chain.gate().id);
    }
    let usdt_to = |id: &str, to: u8, units: u64, ok: bool| Tx::Token {
        id: id.into(),
        contract: account_id_of(USDT).unwrap(),
        to: [to; 20],
        units,
        ok,
    };
    node.include(vec![
        Tx::Trx { id: "t1".into(), to: [0xA1; 20], sun: 10_500_000 },
        Tx::Trx { id: "t2".into(), to: [0xA1; 20], sun: 1 },
        usdt_to("u1", 0xA1, 25_500_000, true),
        usdt_to("u2", 0xA1, 7_000_000, false),
        Tx::Token { id: "u3".into(), contract: [0x77; 20], to: [0xA1; 20], units: 9, ok: true },
        usdt_to("u4", 0xB2, 3, true),
    ]);
    assert_eq!(trx_chain.balance(&a).await.unwrap(), d("10.500001"));
    assert_eq!(usdt_chain.balance(&a).await.unwrap(), d("25.5"), "the reverted call and the other token left out");
    let both: Vec<_> = usdt_chain.balances(&[&b, &a, "not an address"]).await;
    assert_eq!(both[0].as_ref().unwrap(), &d("0.000003"));
    assert_eq!(both[1].as_ref().unwrap(), &d("25.5"));
    assert!(both[2].is_err(), "a bad address fails alone");
    assert_eq!(trx_chain.balance(&b).await.unwrap(), d("0"), "tokens alone do not activate an account");
    // Forked back to the mempool: no longer in a block, so not held.
    node.fork_from(node.height(), true);
    assert_eq!(trx_chain.balance(&a).await.unwrap(), d("0"));
    assert_eq!(usdt_chain.balance(&a).await.unwrap(), d("0"));
}
