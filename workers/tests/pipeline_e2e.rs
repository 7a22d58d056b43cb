//! The deposit pipeline end to end, as deployed: the real `deposit-scanner` and
//! `confirmation-tracker` binaries as separate processes, the API router in this process, one
//! database (SQLite, or PostgreSQL with `pg-tests`) and one queue backend (the embedded SQLite
//! queue, or Redis with `redis-tests`, under a fresh key prefix).

#[path = "../../api/tests/common/mod.rs"]
mod api_common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use api_common::{Db, TestApp};
use serde_json::{Value, json};

struct Workers {
    db_url: String,
    queue_env: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

struct Proc {
    child: Child,
    ops: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Workers {
    fn new(db_url: &str) -> Workers {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("paygate-e2e-{:016x}", rand::random::<u64>());
        let mut queue_env = vec![("PAYGATE_QUEUE__PREFIX".to_owned(), prefix)];
        if cfg!(feature = "redis-tests") {
            let url = std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            queue_env.push(("PAYGATE_QUEUE__BACKEND".into(), "redis".into()));
            queue_env.push(("PAYGATE_QUEUE__REDIS_URL".into(), url));
        } else {
            queue_env.push(("PAYGATE_QUEUE__BACKEND".into(), "sqlite".into()));
            let path = dir.path().join("jobs.sqlite").display().to_string();
            queue_env.push(("PAYGATE_QUEUE__SQLITE_PATH".into(), path));
        }
        Workers { db_url: db_url.to_owned(), queue_env, _dir: dir }
    }

    fn start(&self, binary: &str) -> Proc {
        let port = free_port();
        let mut cmd = Command::new(binary);
        cmd.env("PAYGATE_DATABASE_URL", &self.db_url)
            .env("PAYGATE_WORKER__LISTEN", format!("127.0.0.1:{port}"))
            .env("PAYGATE_SANDBOX__BLOCK_INTERVAL_MS", "100")
            .env("PAYGATE_PIPELINE__SCAN_INTERVAL_MS", "100")
            .env("PAYGATE_PIPELINE__TRACK_INTERVAL_MS", "100")
            .env("PAYGATE_PIPELINE__SWEEP_INTERVAL_MS", "200")
            .env("RUST_LOG", "warn")
            .current_dir(self._dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in &self.queue_env {
            cmd.env(k, v);
        }
        Proc {
            child: cmd.spawn().unwrap_or_else(|e| panic!("start {binary}: {e}")),
            ops: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn flush_queues(&self) {
        if cfg!(feature = "redis-tests") {
            let get = |k: &str| self.queue_env.iter().find(|(n, _)| n == k).unwrap().1.clone();
            let client = redis::Client::open(get("PAYGATE_QUEUE__REDIS_URL")).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}*", get("PAYGATE_QUEUE__PREFIX")))
                .query_async(&mut conn)
                .await
                .unwrap();
            if !keys.is_empty() {
                let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
            }
        }
    }
}

async fn wait_ready(http: &reqwest::Client, p: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http.get(format!("{}/ready", p.ops)).send().await
            && r.status() == 200
        {
            let h = http.get(format!("{}/health", p.ops)).send().await.unwrap();
            assert_eq!(h.status(), 200);
            return;
        }
        assert!(Instant::now() < deadline, "worker at {} never became ready", p.ops);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

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

fn sigterm(p: &mut Proc) -> std::process::ExitStatus {
    let pid = p.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = p.child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "worker ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_are_scanned_confirmed_and_credited_by_separate_processes() {
    let db = std::sync::Arc::new(Db::fresh().await);
    let app = TestApp::spawn_on(db.clone(), |c| c.sandbox.block_interval_ms = 100).await;
    let (_, key) = app.test_key().await;
    let workers = Workers::new(&db.url);
    let scanner = workers.start(env!("CARGO_BIN_EXE_deposit-scanner"));
    let mut tracker = workers.start(env!("CARGO_BIN_EXE_confirmation-tracker"));
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
    let metrics = app.http.get(format!("{}/metrics", tracker.ops)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("paygate_jobs_processed_total"), "{metrics}");

    // The tracker dies; a deposit is scanned meanwhile and its job is flushed from the queue.
    // A new tracker re-derives the work from the database: nothing is lost.
    tracker.child.kill().unwrap();
    tracker.child.wait().unwrap();
    let inv2 = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.02"})).await;
    let id2 = inv2["id"].as_str().unwrap().to_owned();
    app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": id2, "amount": "0.02"})).await;
    wait_status(&app, &key, &id2, "confirming").await;
    workers.flush_queues().await;
    let mut tracker = workers.start(env!("CARGO_BIN_EXE_confirmation-tracker"));
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
    assert!(sigterm(&mut tracker).success());
    let mut scanner = scanner;
    assert!(sigterm(&mut scanner).success());
}

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
