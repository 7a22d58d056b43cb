//! The `payout-executor` binary as deployed (PostgreSQL + Redis with `--features
//! redis-tests,pg-tests`, else SQLite), next to the real API: payouts created over HTTP
//! complete or fail on the sandbox chain, with balances exact to the last decimal and their
//! events written.
//!
//! With `--features failpoints`, the fault test: the executor pauses right after storing a
//! signed transaction and right after broadcasting it, and the test SIGKILLs it inside those
//! windows, again and again; every payout still ends with exactly one transaction on the chain.

use testkit::fleet;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use entity::{Environment, PayoutStatus, event, payout, refund, sandbox_broadcast};
use fleet::{Deployment, Proc, wait_ready};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use testkit::{TRON_DEST, d};
use uuid::Uuid;

struct Setup(Deployment);

impl std::ops::Deref for Setup {
    type Target = Deployment;
    fn deref(&self) -> &Deployment {
        &self.0
    }
}

/// tron_usdt fees: payout 1, network estimate 2 (the sandbox charges 1.8); merchant pays both;
/// auto-approval without delay; `fund` USDT available.
async fn setup(fund: &str, extra: &[(&str, &str)]) -> Setup {
    let mut env = vec![
        ("PAYGATE_FEES__TRON_USDT__PAYOUT_FEE", "1"),
        ("PAYGATE_FEES__TRON_USDT__NETWORK_FEE", "2"),
        ("PAYGATE_PAYOUTS__POLL_INTERVAL_MS", "100"),
        ("PAYGATE_PAYOUTS__RECHECK_MS", "100"),
        ("PAYGATE_PAYOUTS__STALE_AFTER_SECS", "1"),
    ];
    env.extend_from_slice(extra);
    let dep = Deployment::start("Payouts", Environment::Test, &env).await;
    let (conn, m) = (&dep.conn, dep.merchant);
    testkit::auto_approve_payouts_merchant_pays(conn, m, Environment::Test).await;
    testkit::fund(conn, m, Environment::Test, "tron_usdt", fund).await;
    Setup(dep)
}

impl Setup {
    async fn payout(&self, amount: &str, destination: &str) -> Uuid {
        let body = json!({"currency": "USDT", "network": "tron", "amount": amount, "destination": destination});
        Uuid::parse_str(self.post("/v1/payouts", body, None).await["id"].as_str().unwrap()).unwrap()
    }

    /// POSTs as the merchant; returns `data`.
    async fn post(&self, path: &str, body: serde_json::Value, idempotency_key: Option<&str>) -> serde_json::Value {
        let mut rb = self.http.post(format!("{}{path}", self.api.url)).header("X-API-Key", &self.key).json(&body);
        if let Some(k) = idempotency_key {
            rb = rb.header("Idempotency-Key", k);
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status(), 201);
        r.json::<serde_json::Value>().await.unwrap()["data"].clone()
    }

    /// A tron USDT invoice credited `credited` (as the tracker would), and a refund of `amount`
    /// to TRON_DEST: (refund id, its payout id).
    async fn refund_of_credited_invoice(&self, credited: &str, amount: &str) -> (String, Uuid) {
        let inv =
            self.post("/v1/invoices", json!({"currency": "USDT", "network": "tron", "amount": credited}), None).await;
        let invoice_id = Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap();
        testkit::credit_invoice_on(&self.conn, self.merchant, invoice_id, "tron_usdt", credited).await;
        let body = json!({"invoice_id": invoice_id, "currency": "USDT", "network": "tron", "amount": amount, "destination": TRON_DEST});
        let r = self.post("/v1/refunds", body, Some("e2e-refund")).await;
        (r["id"].as_str().unwrap().to_owned(), Uuid::parse_str(r["payout_id"].as_str().unwrap()).unwrap())
    }

    async fn executor(&self) -> Proc {
        let p = self.fleet.worker(env!("CARGO_BIN_EXE_payout-executor"));
        wait_ready(&self.http, &p).await;
        p
    }

    async fn rows(&self) -> Vec<payout::Model> {
        payout::Entity::find().filter(payout::Column::MerchantId.eq(self.merchant)).all(&self.conn).await.unwrap()
    }

    async fn wait_final(&self, n: usize, within: Duration) -> Vec<payout::Model> {
        let deadline = Instant::now() + within;
        loop {
            let rows = self.rows().await;
            let open: Vec<_> =
                rows.iter().filter(|p| !matches!(p.status, PayoutStatus::Completed | PayoutStatus::Failed)).collect();
            if rows.len() == n && open.is_empty() {
                return rows;
            }
            assert!(
                Instant::now() < deadline,
                "{} payouts still open: {:?}",
                open.len(),
                open.iter().map(|p| p.status).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every payout ends with exactly one transaction on the chain (none for a refused one),
    /// the ledger sums hold, and the balance is exact.
    async fn verify(&self, fund: Decimal, rows: &[payout::Model]) {
        let sent = sandbox_broadcast::Entity::find().all(&self.conn).await.unwrap();
        let mut per_payout: HashMap<String, Vec<&sandbox_broadcast::Model>> = HashMap::new();
        for b in &sent {
            per_payout.entry(b.reference.clone()).or_default().push(b);
        }
        let mut spent = Decimal::ZERO;
        for p in rows {
            let txs = per_payout.get(&p.id.to_string()).map(Vec::as_slice).unwrap_or_default();
            match p.status {
                PayoutStatus::Completed => {
                    assert_eq!(txs.len(), 1, "payout {} has {} transactions", p.id, txs.len());
                    assert_eq!(Some(txs[0].tx_hash.as_str()), p.tx_hash.as_deref());
                    assert_eq!(p.network_fee.0, d("1.8"));
                    // Merchant-paid fees: the payout fee (1; a refund's refund fee is 0 here) and the
                    // network fee the sandbox charged.
                    let fee = if refund::Entity::find()
                        .filter(refund::Column::PayoutId.eq(p.id))
                        .one(&self.conn)
                        .await
                        .unwrap()
                        .is_some()
                    {
                        Decimal::ZERO
                    } else {
                        d("1")
                    };
                    assert_eq!(p.fee_amount.0, fee);
                    spent += p.amount.0 + fee + d("1.8");
                }
                PayoutStatus::Failed => assert!(txs.is_empty(), "a refused payout sent nothing"),
                other => panic!("payout {} ended {other:?}", p.id),
            }
        }
        assert_eq!(sent.len(), rows.iter().filter(|p| p.status == PayoutStatus::Completed).count());
        let (b, _) = testkit::assert_ledger_sums(&self.conn, self.merchant, "tron_usdt").await;
        assert_eq!((b.available.0, b.reserved.0), (fund - spent, Decimal::ZERO));
        let count =
            |kind: &'static str| event::Entity::find().filter(event::Column::EventType.eq(kind)).count(&self.conn);
        let completed = rows.iter().filter(|p| p.status == PayoutStatus::Completed).count() as u64;
        assert_eq!(count("payout.completed").await.unwrap(), completed);
        assert_eq!(count("payout.failed").await.unwrap(), rows.len() as u64 - completed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_complete_and_fail_through_the_executor_process() {
    let s = setup("500", &[]).await;
    let fail_to = domain::chain::sandbox::failure_destination(domain::gates::find("tron_usdt").unwrap().family);
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(s.payout(&format!("{}.5", 10 + i), TRON_DEST).await);
    }
    let failing = s.payout("7", &fail_to).await;
    // A refund of a credited invoice runs over the same executor.
    let (refund_id, refund_payout) = s.refund_of_credited_invoice("40", "15").await;
    let _executor = s.executor().await;
    let rows = s.wait_final(8, Duration::from_secs(60)).await;
    let r: serde_json::Value = s
        .http
        .get(format!("{}/v1/refunds/{refund_id}", s.api.url))
        .header("X-API-Key", &s.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["data"]["status"], "completed", "{r}");
    assert_eq!(r["data"]["network_fee"], "1.8");
    assert_eq!(r["data"]["payout_id"], json!(refund_payout));
    assert!(r["data"]["tx_hash"].is_string());
    let failed = rows.iter().find(|p| p.id == failing).unwrap();
    assert_eq!(failed.status, PayoutStatus::Failed);
    assert!(failed.failure_reason.as_deref().unwrap().contains("forced failure"));
    s.verify(d("540"), &rows).await;
    // 500 + 40 credited - (10.5 + … + 15.5) - 6 × (1 + 1.8) - refund 15 - 1.8
    let (b, _) = testkit::assert_ledger_sums(&s.conn, s.merchant, "tron_usdt").await;
    assert_eq!(b.available.0, d("540") - d("78") - d("16.8") - d("15") - d("1.8"));
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_executor_around_broadcasts_never_sends_twice() {
    const PAYOUTS: usize = 30;
    let s =
        setup("10000", &[("FAILPOINTS", "payout-after-persist=sleep(700);payout-after-broadcast=sleep(700)")]).await;
    let fail_to = domain::chain::sandbox::failure_destination(domain::gates::find("tron_usdt").unwrap().family);
    for i in 0..PAYOUTS {
        let dest = if i % 10 == 9 { fail_to.as_str() } else { TRON_DEST };
        s.payout(&format!("{}", 5 + i), dest).await;
    }
    let mut executor = s.executor().await;
    let (mut after_persist, mut after_broadcast) = (0, 0);
    let mut killed = std::collections::HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while (after_persist < 8 || after_broadcast < 8) && Instant::now() < deadline {
        let queued: Vec<payout::Model> = payout::Entity::find()
            .filter(payout::Column::Status.eq(PayoutStatus::Queued))
            .filter(payout::Column::SignedTx.is_not_null())
            .all(&s.conn)
            .await
            .unwrap();
        for p in &queued {
            let sent = sandbox_broadcast::Entity::find_by_id(p.tx_hash.clone().unwrap()).one(&s.conn).await.unwrap();
            // Each payout is killed at most once per window, so the restarted executor moves it on.
            if !killed.insert((p.id, sent.is_some())) {
                continue;
            }
            executor.kill();
            if sent.is_some() {
                after_broadcast += 1
            } else {
                after_persist += 1
            }
            executor = s.executor().await;
            break;
        }
        if s.rows().await.iter().all(|p| matches!(p.status, PayoutStatus::Completed | PayoutStatus::Failed)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    eprintln!("SIGKILLs: {after_persist} after storing, {after_broadcast} after broadcasting");
    assert!(after_persist >= 8 && after_broadcast >= 8, "kills landed: {after_persist} / {after_broadcast}");
    let rows = s.wait_final(PAYOUTS, Duration::from_secs(120)).await;
    s.verify(d("10000"), &rows).await;
    assert_eq!(rows.iter().filter(|p| p.status == PayoutStatus::Failed).count(), PAYOUTS / 10);
}
