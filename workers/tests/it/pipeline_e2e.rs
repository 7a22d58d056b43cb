//! The deposit pipeline end to end, as deployed: the real `deposit-scanner` and
//! `confirmation-tracker` binaries as separate processes, the API router in this process, one
//! database (SQLite, or PostgreSQL with `pg-tests`) and one queue backend (the embedded SQLite
//! queue, or Redis with `redis-tests`, under a fresh key prefix).

use std::time::{Duration, Instant};

use testkit::fleet;

use fleet::{Fleet, wait_ready};
use serde_json::{Value, json};
use testkit::{Db, TestApp};

async fn wait_status(app: &TestApp, key: &str, invoice: &str, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let inv = app.get(&format!("/v1/invoices/{invoice}"), Some(key)).await.data().clone();
        if inv["status"] == want {
            return inv;
        }
        assert!(Instant::now() < deadline, "invoice stuck at {} (wanted {want}): {inv}", inv["status"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_are_scanned_confirmed_and_credited_by_separate_processes() {
    let db = std::sync::Arc::new(Db::fresh().await);
    let app = TestApp::spawn_on(db.clone(), |c| c.sandbox.block_interval_ms = 100).await;
    let (_, key) = app.test_key().await;
    let workers = Fleet::new(&db.url, &[]);
    let mut scanner = workers.worker(env!("CARGO_BIN_EXE_deposit-scanner"));
    let mut tracker = workers.worker(env!("CARGO_BIN_EXE_confirmation-tracker"));
    wait_ready(&app.http, &scanner).await;
    wait_ready(&app.http, &tracker).await;

    // A payment goes through confirming to paid and is credited.
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let id = inv["id"].as_str().unwrap().to_owned();
    let r = app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": id, "amount": "0.01"})).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    let paid = wait_status(&app, &key, &id, "paid").await;
    assert_eq!(paid["payments"][0]["status"], "confirmed");
    assert_eq!(paid["amount_paid"], "0.01");
    // The job's outcome is counted when its handler returns, which may be just after the
    // credit is visible: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = app.http.get(format!("{}/metrics", tracker.url)).send().await.unwrap().text().await.unwrap();
        if metrics.contains("paygate_jobs_processed_total") {
            break;
        }
        assert!(Instant::now() < deadline, "no processed job counted: {metrics}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The tracker dies; a deposit is scanned meanwhile and its job is flushed from the queue.
    // A new tracker re-derives the work from the database: nothing is lost.
    tracker.kill();
    let inv2 = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.02"})).await;
    let id2 = inv2["id"].as_str().unwrap().to_owned();
    app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": id2, "amount": "0.02"})).await;
    wait_status(&app, &key, &id2, "confirming").await;
    if cfg!(feature = "redis-tests") {
        workers.flush_redis().await;
    }
    let mut tracker = workers.worker(env!("CARGO_BIN_EXE_confirmation-tracker"));
    wait_ready(&app.http, &tracker).await;
    wait_status(&app, &key, &id2, "paid").await;

    let balances = app.get("/v1/balances", Some(&key)).await.data().clone();
    let btc = balances.as_array().unwrap().iter().find(|b| b["gate_id"] == "bitcoin").unwrap().clone();
    assert_eq!(btc["available"], "0.03");
    assert_eq!(btc["pending"], "0");
    let credited = entity::event::Entity::find()
        .filter(entity::event::Column::EventType.eq("balance.credited"))
        .all(&app.state.db)
        .await
        .unwrap();
    assert_eq!(credited.len(), 2, "each payment credited exactly once");

    // Graceful shutdown on SIGTERM.
    assert!(tracker.terminate().success());
    assert!(scanner.terminate().success());
}

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
