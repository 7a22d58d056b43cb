//! The reconciliation (`workers::treasury::report`) on the test environment's sandbox chains,
//! whose balance reads are the stored transfers: paid invoices balance to zero difference, money
//! owed that no chain holds shows as a shortfall, and the house's own balance is apart.

use entity::Environment;
use rust_decimal::Decimal;
use testkit::d;
use workers::treasury::{self, GateReport};

use crate::support::steps::{Pipe, pipe};

async fn report(p: &Pipe, gate: &str) -> GateReport {
    let all = treasury::report(&p.app.state.db, &p.chains, &p.app.state.config, Environment::Test).await.unwrap();
    all.into_iter().find(|r| r.gate == gate).unwrap_or_else(|| panic!("no report of {gate}"))
}

#[tokio::test]
async fn paid_invoices_balance_and_money_owed_without_funds_is_a_shortfall() {
    let p = pipe().await;
    let (a, _) = p.paid_invoice("BTC", "bitcoin", "0.5").await;
    let (_, _) = p.paid_invoice("BTC", "bitcoin", "0.25").await;
    p.mine("bitcoin", 3).await;
    p.step().await;
    p.step().await;
    assert_eq!(p.balance("bitcoin").await, (d("0.75"), d("0")));

    let r = report(&p, "bitcoin").await;
    assert_eq!((r.owed.merchants, r.owed.unclaimed, r.owed.house), (d("0.75"), d("0"), d("0")));
    assert_eq!((r.holdings.deposits, r.holdings.deposit_addresses), (d("0.75"), 2));
    assert_eq!(r.difference, Some(Decimal::ZERO));
    assert!(!r.short() && r.unread.is_empty());

    // A second payment to the same address is read once, with both transfers.
    p.pay(a, "0.1").await;
    p.mine("bitcoin", 3).await;
    p.step().await;
    p.step().await;
    let r = report(&p, "bitcoin").await;
    assert_eq!((r.holdings.deposits, r.holdings.deposit_addresses), (d("0.85"), 2));
    assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");

    // Money credited that no chain holds (an operator's adjustment): a shortfall of its amount.
    let gate = domain::gates::find("bitcoin").unwrap();
    domain::ledger::adjust(&p.app.state.db, p.merchant.into(), Environment::Test, gate, d("0.05"), "goodwill")
        .await
        .unwrap();
    let r = report(&p, "bitcoin").await;
    assert_eq!(r.difference, Some(d("-0.05")));
    assert!(r.short());

    // The house's own money is apart from what is owed: funding it without moving coins shows
    // as a shortfall too (the house's inventory must be on the chain as well).
    let txn = domain::db::begin_write(&p.app.state.db).await.unwrap();
    domain::treasury::fund(&txn, Environment::Test, gate, d("0.05"), "inventory").await.unwrap();
    txn.commit().await.unwrap();
    let r = report(&p, "bitcoin").await;
    assert_eq!((r.owed.house, r.difference), (d("0.05"), Some(d("-0.1"))));
}

/// The payout executor's process exports the live reconciliation: a gate whose node cannot be
/// read says so (`paygate_treasury_unread` = 1) rather than a difference it does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payout_executor_exports_the_reconciliation_metric() {
    use std::time::{Duration, Instant};
    let db = std::sync::Arc::new(testkit::Db::fresh().await);
    // The API migrates the fresh database, as a deployment's first process does.
    let _app = testkit::TestApp::spawn_on(db.clone(), |_| {}).await;
    let fleet = testkit::fleet::Fleet::new(
        &db.url,
        &[
            ("PAYGATE_EVM__NETWORKS__ETHEREUM__RPC_URL", "http://127.0.0.1:9"),
            ("PAYGATE_TREASURY__REPORT_INTERVAL_SECS", "1"),
            ("PAYGATE_TREASURY__GATES__ETHEREUM__HOT_ADDRESS", "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"),
        ],
    );
    let executor = fleet.worker(env!("CARGO_BIN_EXE_payout-executor"));
    let http = reqwest::Client::new();
    testkit::fleet::wait_ready(&http, &executor).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = http.get(format!("{}/metrics", executor.url)).send().await.unwrap().text().await.unwrap();
        if metrics.contains("paygate_treasury_unread{gate=\"ethereum\"} 1") {
            assert!(!metrics.contains("paygate_treasury_difference{gate=\"ethereum\"}"), "{metrics}");
            break;
        }
        assert!(Instant::now() < deadline, "no reconciliation metric: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
