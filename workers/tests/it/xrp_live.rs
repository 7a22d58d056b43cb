//! The XRP adapter (`xrp`) against a fake rippled (`support::xrp_node`: `ledger`, `account_tx`
//! with paging, `tx`, in rippled's documented JSON shapes). Deposits go to the operator's one
//! address with each invoice's destination tag. The live pipeline (scanner and tracker rules)
//! runs in the test against it:
//!
//! - a tagged payment in a validated ledger is credited exactly once, found across
//!   `account_tx` pages of other payments, with the exact ledger; the same from a node answering
//!   in API v2 (`tx_json`); validated, it is final and its tracking ends;
//! - a partial payment counts only what it delivered (underpaid); an untagged payment, an
//!   unknown tag and a `tec` result credit nothing, the first two recorded once as unclaimed;
//! - a transaction the node cannot find reverses nothing on one answer, and confirms when found;
//! - a scanner started anew resumes at its cursor and misses no ledger;
//! - `GET /v1/currencies?environment=live` shows the gate online only with `[xrp]` set;
//! - an account's balance is its validated `Balance`; an account not found holds 0.

use crate::support::live::d;
use crate::support::xrp_node::{FakeRippled, Pay};
use entity::UnclaimedReason;
use serde_json::{Value, json};
use testkit::TestApp;

type Live = crate::support::live::Live<FakeRippled>;

async fn live() -> Live {
    Live::start(FakeRippled::start(5).await, &["xrp"], |c, url| {
        (c.xrp.rpc_url, c.xrp.max_retries, c.xrp.retry_backoff_ms) = (url, 1, 10);
    })
    .await
}

impl Live {
    fn operator(&self) -> String {
        self.app.state.config.addresses.live.xrp_address.clone().expect("the operator's XRP address")
    }

    async fn xrp(&self, amount: &str) -> Value {
        let inv = self.invoice(json!({"currency": "XRP", "amount": amount})).await;
        assert_eq!(inv["deposit_address"], self.operator().as_str(), "{inv}");
        inv
    }

    /// A payment of `xrp` whole XRP to the invoice's address and tag.
    fn pay(&self, hash: &str, inv: &Value, xrp: u64) -> Pay {
        Pay::new(hash, &self.operator(), Some(tag(inv)), xrp * 1_000_000)
    }
}

fn tag(inv: &Value) -> u32 {
    inv["deposit_address_tag"].as_str().expect("a destination tag").parse().unwrap()
}

#[tokio::test]
async fn a_tagged_payment_in_a_validated_ledger_is_credited_once_across_pages() {
    let l = live().await;
    let inv = l.xrp("25").await;
    let other = l.xrp("1").await;
    // Ten payments for another tag before it: the deposit is on the third page of four.
    let mut pays: Vec<Pay> = (0..10).map(|i| Pay::new(&format!("N{i}"), &l.operator(), Some(777_777), 1)).collect();
    pays.push(l.pay("A1", &inv, 25));
    l.node.include(pays);
    l.step().await;
    let got = l.get(&inv).await;
    assert_eq!(got["status"], "paid", "validated is final: {got}");
    assert_eq!(l.balance("xrp").await, (d("25"), d("0")));
    assert_eq!(l.status(&other).await, "pending");
    l.step_over(3).await;
    l.assert_credited_once(&inv).await;
    assert_eq!(l.live_payments().await.len(), 1);
}

/// API v2 answers (`tx_json`, with `hash` and `ledger_index` beside it): the scanner's
/// `account_tx` and the tracker's `tx` read them as v1's.
#[tokio::test]
async fn a_node_answering_in_api_v2_credits_the_same_deposit_once() {
    let l = live().await;
    l.node.with(|n| n.api_version = 2);
    let inv = l.xrp("7").await;
    let mut pays: Vec<Pay> = (0..5).map(|i| Pay::new(&format!("V{i}"), &l.operator(), Some(777_777), 1)).collect();
    pays.push(l.pay("B1", &inv, 7));
    l.node.include(pays);
    l.step().await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.balance("xrp").await, (d("7"), d("0")));
    l.step_over(3).await;
    l.assert_credited_once(&inv).await;
    assert_eq!(l.live_payments().await.len(), 1);
}

#[tokio::test]
async fn partial_payments_count_what_arrived_and_untagged_unknown_or_failed_ones_credit_nothing() {
    let l = live().await;
    let partial = l.xrp("10").await;
    let untouched = l.xrp("5").await;
    let mut short = l.pay("P1", &partial, 10);
    short.delivered = 4_000_000;
    let untagged = Pay::new("U1", &l.operator(), None, 5_000_000);
    let unknown_tag = Pay::new("U2", &l.operator(), Some(4_000_000_000), 5_000_000);
    let mut failed = l.pay("U3", &untouched, 5);
    failed.result = "tecPATH_PARTIAL";
    l.node.include(vec![short, untagged, unknown_tag, failed]);
    l.assert_only_underpaid_after(1, (&partial, "4"), (&untouched, ""), "xrp").await;
    // The untagged and unknown-tag payments reached the operator's account: each is recorded
    // once as unclaimed for the operator to refund (the failed one delivered nothing), and a
    // scan of the same ledgers again adds nothing.
    let op = l.operator();
    let expected = vec![
        ("xrp".to_owned(), "U1".to_owned(), d("5"), UnclaimedReason::NoInvoice, format!("xrp:{op}:")),
        ("xrp".to_owned(), "U2".to_owned(), d("5"), UnclaimedReason::NoInvoice, format!("xrp:{op}:4000000000")),
    ];
    assert_eq!(testkit::unclaimed_deposits(&l.app.state.db).await, expected);
    let ledger = l.payment(&partial).await.block_height.expect("validated in a ledger");
    testkit::rescan_from(&l.app.state.db, entity::Environment::Live, "xrp", ledger).await;
    l.step().await;
    assert_eq!(testkit::unclaimed_deposits(&l.app.state.db).await, expected);
    assert_eq!(l.live_payments().await.len(), 1);
}

#[tokio::test]
async fn a_transaction_missing_from_its_ledger_reverses_nothing_on_one_answer() {
    let l = live().await;
    let inv = l.xrp("3").await;
    l.node.include(vec![l.pay("F1", &inv, 3)]);
    l.node.lose("F1");
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming", "one missing answer reverses nothing");
    assert!(l.payment(&inv).await.missing_since_height.is_some());
    l.node.recall("F1");
    l.step_over(1).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.payment(&inv).await.missing_since_height, None);
    assert_eq!(l.credits(&inv).await, 1);
}

/// rippled keeps only part of the history (`online_delete`): asked within the payment's ledger,
/// a node without it answers `txnNotFound` with `searched_all: false`. That is an error the
/// tracker retries, never `Gone`: no deposit is reversed because the node pruned its history.
#[tokio::test]
async fn a_node_without_the_ledgers_history_never_makes_a_deposit_look_missing() {
    use workers::chain::TxStatus;
    let l = live().await;
    let inv = l.xrp("3").await;
    l.node.include(vec![l.pay("H1", &inv, 3)]);
    l.step().await;
    let ledger = l.payment(&inv).await.block_height.map(|h| h as u64);
    let chain = l.chains.get(entity::Environment::Live, "xrp").unwrap();
    l.node.forget("H1");
    let err = chain.status("H1", 0, ledger).await.unwrap_err();
    assert!(err.to_string().contains("searched_all"), "{err}");
    assert!(chain.status("H1", 0, None).await.is_err(), "without a ledger: not `Gone` either");
    // A node that holds the ledger and searched it all: missing.
    l.node.recall("H1");
    l.node.lose("H1");
    assert_eq!(chain.status("H1", 0, ledger).await.unwrap(), TxStatus::Gone);
    l.node.recall("H1");
    assert!(matches!(chain.status("H1", 0, ledger).await.unwrap(), TxStatus::Confirmations(n) if n > 0));
}

/// `account_tx` searches only the ledgers the node holds and says which: a range it does not
/// cover fails the scan instead of passing for ledgers without payments.
#[tokio::test]
async fn ledgers_the_node_does_not_hold_fail_the_scan() {
    let l = live().await;
    let inv = l.xrp("2").await;
    let at = l.node.include(vec![l.pay("G1", &inv, 2)]);
    let chain = l.chains.get(entity::Environment::Live, "xrp").unwrap();
    l.node.prune_before(at + 1);
    let err = chain.transfers(at, at).await.unwrap_err();
    assert!(err.to_string().contains("does not hold them all"), "{err}");
    l.node.prune_before(0);
    let behind = chain.transfers(at, at + 1).await.unwrap_err();
    assert!(behind.to_string().contains("does not hold them all"), "a ledger not validated on this node: {behind}");
    let got = chain.transfers(at, at).await.unwrap();
    assert_eq!(got.iter().map(|t| t.block_height).collect::<Vec<_>>(), [at]);
}

#[tokio::test]
async fn a_scanner_started_anew_resumes_at_its_cursor_and_misses_no_ledger() {
    let l = live().await;
    let inv = l.xrp("7").await;
    // The scanner is down while 60 ledgers close, the deposit among them.
    l.node.close(30);
    let at = l.node.include(vec![l.pay("R1", &inv, 7)]);
    l.node.close(29);
    let calls = l.node.calls();
    l.scan_as_a_new_process().await;
    assert!(l.node.calls() > calls);
    l.assert_recorded_at_then_paid(&inv, "7", at, "").await;
}

#[tokio::test]
async fn the_live_xrp_gate_is_online_only_with_a_node() {
    live().await.assert_online_only_with_a_node(TestApp::spawn().await, Some("XRP")).await;
}

/// Tracking ends at validation: a validated ledger is never replaced, so a payment is final at
/// the gate's 1 confirmation. From then on: no job, no hand-over, no look at it again.
#[tokio::test]
async fn tracking_ends_when_a_deposit_is_validated() {
    let l = live().await;
    let inv = l.xrp("4").await;
    l.node.include(vec![l.pay("E1", &inv, 4)]);
    l.step().await;
    assert_eq!(l.status(&inv).await, "paid");
    l.assert_tracking_ended(&inv, 3).await;
}

/// `account_info` in the validated ledger: the account's `Balance` in drops (what partial and
/// failed payments delivered, not what they asked for), and 0 for an account the ledger does
/// not have (`actNotFound`), each in its place when several are asked.
#[tokio::test]
async fn an_accounts_balance_is_its_validated_drops_and_an_unknown_account_holds_nothing() {
    let node = FakeRippled::start(3).await;
    let cfg = domain::config::XrpConfig {
        rpc_url: node.url.clone(),
        max_retries: 1,
        retry_backoff_ms: 10,
        ..Default::default()
    };
    let operator = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh";
    let chain = workers::chain::xrp::chains(&cfg, Some(operator)).pop().expect("the xrp chain");
    let hot = "rN7n7otQDd6FczFgLdSqtcsAUxDkw6fzRH";
    assert_eq!(chain.balance(operator).await.unwrap(), d("0"), "not created yet");
    let mut partial = Pay::new("P1", operator, Some(1), 10_000_000);
    partial.delivered = 4_000_000;
    let mut failed = Pay::new("F1", operator, Some(2), 5_000_000);
    failed.result = "tecPATH_PARTIAL";
    node.include(vec![Pay::new("A1", operator, Some(3), 25_000_001), partial, failed]);
    node.fund(hot, 5);
    let got = chain.balances(&[hot, operator, "rrrrrrrrrrrrrrrrrrrrBZbvji"]).await;
    let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, vec![d("100000"), d("29.000001"), d("0")]);
}
