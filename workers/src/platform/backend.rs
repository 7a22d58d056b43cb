//! The connection to the queue backend and the enqueue API.
//!
//! Every stored job is an [`Envelope`]: the job's own JSON, the number of attempts already
//! failed, and the time (ms) before which it must not start. Both backends store it as the
//! apalis task's bytes, so the same worker code reads either.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use apalis::prelude::{TaskBuilder, TaskId};
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteStorage};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use ulid::Ulid;

use super::{Job, valid_queue_name};
use domain::config::QueueBackend;

/// What is stored for each job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Envelope<T> {
    pub job: T,
    /// Attempts that already failed (0 for a new job).
    #[serde(default)]
    pub attempt: u32,
    /// Unix time in ms before which the job must not start; lag is measured from it.
    pub ready_at_ms: u64,
}

impl<T: Serialize> Envelope<T> {
    pub fn to_bytes(&self) -> anyhow::Result<Vec<u8>> {
        serde_json::to_vec(self).context("serializing job")
    }
}

/// Handle to the job queues: enqueue from the API process or from handlers, ping, administer.
/// Cheap to clone (one multiplexed Redis connection or one SQLite pool behind it).
#[derive(Clone)]
pub struct Queues {
    pub(crate) conn: Conn,
    prefix: Arc<str>,
    /// Queues already recorded in the registry by this process.
    registered: Arc<Mutex<HashSet<String>>>,
}

#[derive(Clone)]
pub(crate) enum Conn {
    Redis(ConnectionManager),
    Sqlite(SqlitePool),
}

impl std::fmt::Debug for Queues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queues").field("backend", &self.backend_name()).field("prefix", &self.prefix).finish()
    }
}

/// The SQLite table listing the queues under each prefix (Redis: the set `<prefix>:queues`).
/// A macro so queries stay string literals.
macro_rules! sqlite_registry {
    () => {
        "PaygateQueues"
    };
}
pub(crate) use sqlite_registry;

impl Queues {
    /// Connects (creating the SQLite file and its tables if needed). Fails when the backend is
    /// unreachable.
    pub async fn connect(backend: &QueueBackend) -> anyhow::Result<Queues> {
        let conn = match backend {
            QueueBackend::Redis { url, .. } => Conn::Redis(connect_redis(url).await?),
            QueueBackend::Sqlite { path, .. } => Conn::Sqlite(connect_sqlite(path).await?),
        };
        Ok(Queues { conn, prefix: backend.prefix().into(), registered: Arc::default() })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn backend_name(&self) -> &'static str {
        match self.conn {
            Conn::Redis(_) => "redis",
            Conn::Sqlite(_) => "sqlite",
        }
    }

    /// The stored queue name of a job type: `<prefix>:<J::QUEUE>`.
    pub fn queue_name<J: Job>(&self) -> String {
        self.full_name(J::QUEUE)
    }

    /// `<prefix>:<stage>`; a name that already carries the prefix is returned as is.
    pub fn full_name(&self, queue: &str) -> String {
        match queue.strip_prefix(&*self.prefix).and_then(|rest| rest.strip_prefix(':')) {
            Some(_) => queue.to_owned(),
            None => format!("{}:{queue}", self.prefix),
        }
    }

    /// Enqueues a job to run as soon as a worker is free. Returns the job id.
    pub async fn push<J: Job>(&self, job: J) -> anyhow::Result<String> {
        self.push_after(job, Duration::ZERO).await
    }

    /// Enqueues a job that starts no earlier than `delay` from now. Returns the job id.
    pub async fn push_after<J: Job>(&self, job: J, delay: Duration) -> anyhow::Result<String> {
        anyhow::ensure!(valid_queue_name(J::QUEUE), "invalid queue name {:?}", J::QUEUE);
        let envelope = Envelope { job, attempt: 0, ready_at_ms: now_ms().saturating_add(millis(delay)) };
        self.push_envelope(&self.queue_name::<J>(), &envelope).await
    }

    /// Enqueues several jobs of one queue in one round trip, due now. Returns their ids.
    pub async fn push_many<J: Job>(&self, jobs: impl IntoIterator<Item = J>) -> anyhow::Result<Vec<String>> {
        anyhow::ensure!(valid_queue_name(J::QUEUE), "invalid queue name {:?}", J::QUEUE);
        let ready_at_ms = now_ms();
        let envelopes: Vec<Envelope<J>> =
            jobs.into_iter().map(|job| Envelope { job, attempt: 0, ready_at_ms }).collect();
        self.push_envelopes(&self.queue_name::<J>(), &envelopes).await
    }

    pub(crate) async fn push_envelope<T: Serialize>(
        &self,
        queue: &str,
        envelope: &Envelope<T>,
    ) -> anyhow::Result<String> {
        let ids = self.push_envelopes(queue, std::slice::from_ref(envelope)).await?;
        Ok(ids.into_iter().next().unwrap_or_default())
    }

    async fn push_envelopes<T: Serialize>(
        &self,
        queue: &str,
        envelopes: &[Envelope<T>],
    ) -> anyhow::Result<Vec<String>> {
        if envelopes.is_empty() {
            return Ok(Vec::new());
        }
        self.register_queue(queue).await?;
        let mut ids = Vec::with_capacity(envelopes.len());
        let mut tasks = Vec::with_capacity(envelopes.len());
        for envelope in envelopes {
            let id = Ulid::generate();
            // Whole seconds in the backend: a job may be fetched up to a second early, and the
            // worker then waits for `ready_at_ms`.
            tasks.push(
                TaskBuilder::new(envelope.to_bytes()?)
                    .task_id(TaskId::from_ulid(id))
                    .run_at_timestamp(envelope.ready_at_ms / 1000)
                    .build(),
            );
            ids.push(id.to_string());
        }
        match &self.conn {
            Conn::Redis(conn) => {
                apalis_redis::queries::push_tasks(&mut conn.clone(), &redis_config(queue), &tasks)
                    .await
                    .with_context(|| format!("pushing to {queue}"))?;
            }
            Conn::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                apalis_sqlite::queries::push_tasks(&mut *tx, queue, &tasks)
                    .await
                    .with_context(|| format!("pushing to {queue}"))?;
                tx.commit().await?;
            }
        }
        Ok(ids)
    }

    /// Records `queue` (a full name) in the registry that [`Queues::depths`] lists.
    pub(crate) async fn register_queue(&self, queue: &str) -> anyhow::Result<()> {
        if self.registered.lock().expect("registry lock").contains(queue) {
            return Ok(());
        }
        match &self.conn {
            Conn::Redis(conn) => {
                redis::cmd("SADD")
                    .arg(self.registry_key())
                    .arg(queue)
                    .query_async::<()>(&mut conn.clone())
                    .await
                    .context("registering queue")?;
            }
            Conn::Sqlite(pool) => {
                sqlx::query(concat!("INSERT OR IGNORE INTO ", sqlite_registry!(), " (name) VALUES (?1)"))
                    .bind(queue)
                    .execute(pool)
                    .await
                    .context("registering queue")?;
            }
        }
        self.registered.lock().expect("registry lock").insert(queue.to_owned());
        Ok(())
    }

    pub(crate) fn registry_key(&self) -> String {
        format!("{}:queues", self.prefix)
    }

    /// Round trip to the backend, for readiness checks.
    pub async fn ping(&self) -> anyhow::Result<()> {
        match &self.conn {
            Conn::Redis(conn) => {
                redis::cmd("PING").query_async::<String>(&mut conn.clone()).await.context("redis ping")?;
            }
            Conn::Sqlite(pool) => {
                sqlx::query("SELECT 1").execute(pool).await.context("sqlite ping")?;
            }
        }
        Ok(())
    }
}

/// apalis-redis configuration of one queue (the key names derive from it).
pub(crate) fn redis_config(queue: &str) -> apalis_redis::Config {
    apalis_redis::Config::default().queue(queue)
}

async fn connect_redis(url: &str) -> anyhow::Result<ConnectionManager> {
    let client = redis::Client::open(url).with_context(|| format!("invalid redis url {url:?}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(2);
    let mut conn = client
        .get_connection_manager_with_config(config)
        .await
        .with_context(|| format!("connecting to redis at {}", redact(url)))?;
    redis::cmd("PING").query_async::<String>(&mut conn).await.context("redis ping")?;
    Ok(conn)
}

async fn connect_sqlite(path: &Path) -> anyhow::Result<SqlitePool> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // WAL and a busy timeout: the stages' pollers and the API's pushes wait for each other
    // instead of failing.
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(30));
    // Processes starting together race on a new file: switching it to WAL answers "database is
    // locked" at once (SQLite does not wait on its busy timeout for a journal-mode change), and
    // the migrations take no lock, so one process can see the other's half-made tables. The
    // loser of either race retries once the winner is done.
    let mut attempt = 0;
    let pool = loop {
        let opened = async {
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .connect_with(options.clone())
                .await
                .with_context(|| format!("opening job queue file {}", path.display()))?;
            // apalis' own `setup` also turns `synchronous` off; only its migrations are wanted.
            SqliteStorage::migrations().run(&pool).await.context("migrating the job queue tables")?;
            anyhow::Ok(pool)
        };
        match opened.await {
            Ok(pool) => break pool,
            Err(e) if attempt < 20 => {
                attempt += 1;
                tracing::debug!(error = %format!("{e:#}"), attempt, "opening the job queue raced; retrying");
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(e),
        }
    };
    sqlx::query(concat!("CREATE TABLE IF NOT EXISTS ", sqlite_registry!(), " (name TEXT PRIMARY KEY NOT NULL)"))
        .execute(&pool)
        .await?;
    Ok(pool)
}

/// A URL without its password, for messages.
fn redact(url: &str) -> String {
    match url.split_once('@') {
        Some((creds, host)) if creds.contains(':') => {
            let scheme_end = creds.find("://").map(|i| i + 3).unwrap_or(0);
            format!("{}***@{host}", &creds[..scheme_end])
        }
        _ => url.to_owned(),
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(millis).unwrap_or_default()
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
