//! The XRP adapter (`xrp`) against a fake rippled (`support::xrp_node`: `ledger`, `account_tx`
//! with paging, `tx`, in rippled's documented JSON shapes). Deposits go to the operator's one
//! address with each invoice's destination tag. The live pipeline (scanner and tracker rules)
//! runs in the test against it:
//!
//! - a tagged payment in a validated ledger is credited exactly once, found across
//!   `account_tx` pages of other payments, with the exact ledger;
//! - a partial payment counts only what it delivered (underpaid); an untagged payment, an
//!   unknown tag and a `tec` result credit nothing;
//! - a transaction the node cannot find reverses nothing on one answer, and confirms when found;
//! - a scanner started anew resumes at its cursor and misses no ledger;
//! - `GET /v1/currencies?environment=live` shows the gate online only with `[xrp]` set.

mod support;

use entity::{Environment, PaymentStatus};
use serde_json::{Value, json};
use support::live::{LiveApp, d};
use support::xrp_node::{FakeRippled, Pay};
use testkit::TestApp;

const GATES: &[&str] = &["xrp"];

struct Live {
    node: FakeRippled,
    l: LiveApp,
}

impl std::ops::Deref for Live {
    type Target = LiveApp;
    fn deref(&self) -> &LiveApp {
        &self.l
    }
}

async fn live() -> Live {
    let node = FakeRippled::start(5).await;
    let url = node.url.clone();
    let l = LiveApp::start(GATES, |c| {
        c.xrp.rpc_url = url;
        c.xrp.max_retries = 1;
        c.xrp.retry_backoff_ms = 10;
    })
    .await;
    Live { node, l }
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

    /// Closes `ledgers` empty ledgers one by one, a pipeline step after each.
    async fn step_over(&self, ledgers: usize) {
        for _ in 0..ledgers {
            self.node.close(1);
            self.step().await;
        }
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
    assert_eq!(l.credits(&inv).await, 1);
    assert_eq!(l.payment(&inv).await.status, PaymentStatus::Confirmed);
    assert_eq!(l.live_payments().await.len(), 1);
    l.assert_ledger_sums().await;
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
    l.step_over(1).await;
    let got = l.get(&partial).await;
    assert_eq!(got["status"], "underpaid", "{got}");
    assert_eq!(got["amount_paid"], "4");
    assert_eq!(l.status(&untouched).await, "pending");
    assert_eq!(l.live_payments().await.len(), 1);
    assert_eq!(l.balance("xrp").await, (d("4"), d("0")));
}

#[tokio::test]
async fn a_transaction_the_node_cannot_find_reverses_nothing_on_one_answer() {
    let l = live().await;
    let inv = l.xrp("3").await;
    l.node.include(vec![l.pay("F1", &inv, 3)]);
    l.node.forget("F1");
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming", "one missing answer reverses nothing");
    assert!(l.payment(&inv).await.missing_since_height.is_some());
    l.node.recall("F1");
    l.step_over(1).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.payment(&inv).await.missing_since_height, None);
    assert_eq!(l.credits(&inv).await, 1);
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
    l.scan(&l.new_chains(), 10).await;
    assert!(l.node.calls() > calls);
    let p = l.payment(&inv).await;
    assert_eq!((p.amount.0, p.block_height), (d("7"), Some(at as i64)));
    l.step().await;
    assert_eq!(l.status(&inv).await, "paid");
}

#[tokio::test]
async fn the_live_xrp_gate_is_online_only_with_a_node() {
    let l = live().await;
    assert_eq!(l.live_statuses(&l.app).await, ["online"]);
    let without = TestApp::spawn().await;
    assert_eq!(l.live_statuses(&without).await, ["offline"]);
    let m = without.merchant().await;
    let key = without.key(m, Environment::Live, &[]).await;
    let refused = without.post("/v1/invoices", Some(&key), &json!({"currency": "XRP", "amount": "1"})).await;
    refused.assert_error(503, "gate_offline", None);
}
