//! The deployed shape for end-to-end tests: the real `api`, `deposit-scanner` and
//! `confirmation-tracker` binaries as separate processes over one database (a fresh SQLite file,
//! or a fresh PostgreSQL database with `pg-tests`) and one queue backend (the embedded SQLite
//! queue, or a fresh key prefix on Redis with `redis-tests`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Proc {
    pub child: crate::serve::KillOnDrop,
    /// Base URL of its HTTP port (the API, or a worker's /health, /ready, /metrics).
    pub url: String,
}

impl Proc {
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then the exit status (within 60 s: longer than a worker's own shutdown timeout,
    /// 30 s by default, after which it abandons jobs still running and exits).
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "process ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A port nothing listens on, never the same twice in this test process: the kernel may hand a
/// just-released port out again, and two tests running side by side would then start their
/// processes on one port (one fails to bind, and the other's test talks to the wrong process).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A binary of another workspace package, built next to this test (`cargo test --workspace`
/// builds every binary; `.ci/run` builds them before the feature suites).
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join(name);
    assert!(path.exists(), "{} is missing: build it first (cargo build -p api --bins)", path.display());
    path
}

pub struct Fleet {
    pub db_url: String,
    pub env: Vec<(String, String)>,
    pub dir: tempfile::TempDir,
}

impl Fleet {
    /// Settings shared by every process: fast sandbox blocks and polls so tests run in seconds.
    pub fn new(db_url: &str, extra: &[(&str, &str)]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("paygate-e2e-{:016x}", rand::random::<u64>());
        let mut env: Vec<(String, String)> = vec![
            ("PAYGATE_DATABASE_URL".into(), db_url.into()),
            ("PAYGATE_QUEUE__PREFIX".into(), prefix),
            ("PAYGATE_SANDBOX__BLOCK_INTERVAL_MS".into(), "100".into()),
            ("PAYGATE_PIPELINE__SCAN_INTERVAL_MS".into(), "100".into()),
            ("PAYGATE_PIPELINE__TRACK_INTERVAL_MS".into(), "100".into()),
            ("PAYGATE_PIPELINE__SWEEP_INTERVAL_MS".into(), "200".into()),
            ("PAYGATE_EMBEDDED__SEED_DEMO".into(), "false".into()),
            ("PAYGATE_RATES__LIVE__PROVIDER".into(), "static".into()),
            ("RUST_LOG".into(), "warn,sqlx=error".into()),
        ];
        // The suites send hundreds of writes and sandbox deposits in seconds with one key: rate
        // limits stay on, far above that (api/tests/it/rate_limits.rs tests throttling).
        for class in ["READS", "WRITES", "PUBLIC", "TEST_HELPERS"] {
            env.push((format!("PAYGATE_RATE_LIMITS__{class}__LIMIT"), "1000000".into()));
        }
        if cfg!(feature = "redis") {
            let url = std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            env.push(("PAYGATE_QUEUE__BACKEND".into(), "redis".into()));
            env.push(("PAYGATE_QUEUE__REDIS_URL".into(), url));
        } else {
            env.push(("PAYGATE_QUEUE__BACKEND".into(), "sqlite".into()));
            env.push(("PAYGATE_QUEUE__SQLITE_PATH".into(), dir.path().join("jobs.sqlite").display().to_string()));
        }
        for (k, v) in extra {
            env.retain(|(n, _)| n != k);
            env.push(((*k).into(), (*v).into()));
        }
        Fleet { db_url: db_url.to_owned(), env, dir }
    }

    fn spawn(&self, program: &std::path::Path, args: &[&str], port_var: &str) -> Proc {
        let port = free_port();
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env(port_var, format!("127.0.0.1:{port}"))
            .current_dir(self.dir.path())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        Proc { child: crate::serve::KillOnDrop(child), url: format!("http://127.0.0.1:{port}") }
    }

    pub fn api(&self) -> Proc {
        self.spawn(&sibling_binary("api"), &[], "PAYGATE_LISTEN")
    }

    pub fn worker(&self, binary: &str) -> Proc {
        self.spawn(std::path::Path::new(binary), &[], "PAYGATE_WORKER__LISTEN")
    }

    pub fn queue_var(&self, name: &str) -> String {
        self.env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    /// Deletes every queue key of this fleet (Redis only): what a Redis flush does to it.
    pub async fn flush_redis(&self) {
        let client = redis::Client::open(self.queue_var("PAYGATE_QUEUE__REDIS_URL")).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.queue_var("PAYGATE_QUEUE__PREFIX")))
            .query_async(&mut conn)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.unwrap();
        }
    }
}

impl Drop for Fleet {
    /// Its Redis keys go with it, as its SQLite files go with `dir`. Its processes, started after
    /// it, have been dropped (killed) by then.
    fn drop(&mut self) {
        let (url, prefix) = (self.queue_var("PAYGATE_QUEUE__REDIS_URL"), self.queue_var("PAYGATE_QUEUE__PREFIX"));
        if url.is_empty() || prefix.is_empty() {
            return;
        }
        let Ok(mut conn) = redis::Client::open(url).and_then(|c| c.get_connection()) else { return };
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}:*")).query(&mut conn).unwrap_or_default();
        if !keys.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(&keys).query(&mut conn);
        }
    }
}

/// Waits until `GET <url>/ready` answers 200 (and `/health` too).
pub async fn wait_ready(http: &reqwest::Client, p: &Proc) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(format!("{}/ready", p.url)).send().await
            && r.status() == 200
        {
            assert_eq!(http.get(format!("{}/health", p.url)).send().await.unwrap().status(), 200);
            return;
        }
        assert!(Instant::now() < deadline, "{} never became ready", p.url);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The deployed shape under test: a fresh database, the `api` binary on it (ready), the test's
/// own connection to that database, and a merchant with an all-permission key in `env`. Worker
/// binaries are started on it with `fleet.worker(…)`.
pub struct Deployment {
    pub db: crate::Db,
    pub conn: sea_orm::DatabaseConnection,
    pub fleet: Fleet,
    pub api: Proc,
    pub merchant: uuid::Uuid,
    pub key: String,
    pub http: reqwest::Client,
}

impl Deployment {
    /// `vars` are `PAYGATE_*` settings of every process of the fleet.
    pub async fn start(merchant_name: &str, env: entity::Environment, vars: &[(&str, &str)]) -> Deployment {
        let db = crate::Db::fresh().await;
        let fleet = Fleet::new(&db.url, vars);
        let http = reqwest::Client::new();
        let api = fleet.api();
        wait_ready(&http, &api).await;
        let config = domain::config::Config { database_url: db.url.clone(), ..Default::default() };
        let conn = domain::db::connect(&config).await.unwrap();
        let merchant = domain::merchants::create_merchant(&conn, merchant_name, &Default::default()).await.unwrap().id;
        let all = api::auth::Permissions::all();
        let key = domain::merchants::create_api_key(&conn, merchant.into(), env, all, None).await.unwrap().1;
        Deployment { db, conn, fleet, api, merchant, key, http }
    }
}
