//! Test backends: a fresh SQLite file per test, or with `--features redis-tests` a fresh key
//! prefix on the shared Redis (`PAYGATE_TEST_REDIS`, default `redis://127.0.0.1:6379`).

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use workers::platform::{QueueBackend, Queues, Runtime, RuntimeSettings, StageSettings};

pub struct TestQueues {
    pub backend: QueueBackend,
    pub queues: Queues,
    _dir: tempfile::TempDir,
}

fn random_prefix() -> String {
    format!("paygate-test-{:016x}", rand::random::<u64>())
}

impl TestQueues {
    pub async fn new() -> TestQueues {
        let dir = tempfile::tempdir().expect("tempdir");
        let backend = if cfg!(feature = "redis-tests") {
            let url = std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
            QueueBackend::Redis { url, prefix: random_prefix() }
        } else {
            QueueBackend::Sqlite { path: dir.path().join("jobs.sqlite"), prefix: random_prefix() }
        };
        let queues = Queues::connect(&backend)
            .await
            .unwrap_or_else(|e| panic!("queue backend {backend:?} is unreachable: {e:#}"));
        TestQueues { backend, queues, _dir: dir }
    }

    /// A second, independent connection to the same queues (another process's view).
    pub async fn reconnect(&self) -> Queues {
        Queues::connect(&self.backend).await.expect("reconnect")
    }

    /// Deletes a worker's registration behind its back, as an expired or flushed backend would:
    /// its next heartbeat or fetch fails.
    pub async fn unregister_worker(&self, queue: &str, worker: &str) {
        match &self.backend {
            QueueBackend::Redis { url, .. } => {
                let client = redis::Client::open(url.as_str()).unwrap();
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                let removed: u32 = redis::cmd("ZREM")
                    .arg(format!("{queue}:workers"))
                    .arg(worker)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert_eq!(removed, 1, "worker {worker} was not registered");
            }
            QueueBackend::Sqlite { path, .. } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path).foreign_keys(false);
                let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
                let removed = sqlx::query("DELETE FROM Workers WHERE id = ?1")
                    .bind(worker)
                    .execute(&pool)
                    .await
                    .unwrap()
                    .rows_affected();
                assert_eq!(removed, 1, "worker {worker} was not registered");
            }
        }
    }

    /// Jobs of `queue` still stored in the backend, in any state.
    pub async fn stored_jobs(&self, queue: &str) -> u64 {
        match &self.backend {
            QueueBackend::Redis { url, .. } => {
                let client = redis::Client::open(url.as_str()).unwrap();
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                redis::cmd("HLEN").arg(format!("{queue}:data")).query_async(&mut conn).await.unwrap()
            }
            QueueBackend::Sqlite { path, .. } => {
                let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(path))
                    .await
                    .unwrap();
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM Jobs WHERE job_type = ?1")
                    .bind(queue)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                n.try_into().unwrap()
            }
        }
    }

    /// Takes every due job of `queue` off it, as busy workers would (they are not run).
    #[allow(dead_code)] // the deliverer suite's
    pub async fn take_waiting(&self, queue: &str) {
        match &self.backend {
            QueueBackend::Redis { url, .. } => {
                let client = redis::Client::open(url.as_str()).unwrap();
                let mut conn = client.get_multiplexed_async_connection().await.unwrap();
                let lists = [format!("{queue}:active"), format!("{queue}:scheduled")];
                redis::cmd("DEL").arg(&lists).query_async::<()>(&mut conn).await.unwrap();
            }
            QueueBackend::Sqlite { path, .. } => {
                let pool = sqlx::SqlitePool::connect_with(sqlx::sqlite::SqliteConnectOptions::new().filename(path))
                    .await
                    .unwrap();
                sqlx::query("DELETE FROM Jobs WHERE job_type = ?1").bind(queue).execute(&pool).await.unwrap();
            }
        }
    }
}

/// Removes the test's Redis keys when it ends, passed or failed (SQLite files go with the temp
/// dir): the prefix's keys and its entries in apalis' global list of worker sets.
impl Drop for TestQueues {
    fn drop(&mut self) {
        let QueueBackend::Redis { url, prefix } = &self.backend else { return };
        let Ok(mut conn) = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) else { return };
        let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}:*")).query(&mut conn).unwrap_or_default();
        if !keys.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("DEL").arg(keys).query(&mut conn);
        }
        let lists: Vec<String> =
            redis::cmd("ZRANGE").arg("core:apalis:queues:list").arg(0).arg(-1).query(&mut conn).unwrap_or_default();
        let ours: Vec<&String> = lists.iter().filter(|k| k.starts_with(&format!("{prefix}:"))).collect();
        if !ours.is_empty() {
            let _: redis::RedisResult<()> =
                redis::cmd("ZREM").arg("core:apalis:queues:list").arg(ours).query(&mut conn);
        }
    }
}

/// Short intervals so tests run in seconds.
pub fn fast_runtime() -> RuntimeSettings {
    RuntimeSettings {
        poll_interval: Duration::from_millis(50),
        heartbeat_interval: Duration::from_secs(1),
        shutdown_timeout: Duration::from_secs(10),
        janitor_interval: Duration::from_millis(300),
    }
}

pub fn stage(max_attempts: u32) -> StageSettings {
    StageSettings {
        concurrency: 2,
        max_attempts,
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
    }
}

/// A runtime running in the background.
pub struct Running {
    pub token: CancellationToken,
    pub handle: JoinHandle<anyhow::Result<()>>,
}

impl Running {
    pub fn start(runtime: Runtime) -> Running {
        let token = CancellationToken::new();
        let handle = tokio::spawn(runtime.with_settings(fast_runtime()).run(token.clone().cancelled_owned()));
        Running { token, handle }
    }

    /// Graceful stop: waits for in-flight jobs.
    pub async fn stop(self) {
        self.token.cancel();
        self.handle.await.expect("runtime task").expect("runtime");
    }

    /// Like a killed process: everything is dropped mid-flight.
    pub async fn kill(self) {
        self.handle.abort();
        let _ = self.handle.await;
    }
}

/// Polls `check` until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of `name{queue="<queue>"}` in a Prometheus text rendering.
pub fn metric(rendered: &str, name: &str, queue: &str) -> Option<f64> {
    let prefix = format!("{name}{{queue=\"{queue}\"}} ");
    rendered.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.trim().parse().expect("metric value"))
}
