//! Queue configuration (`[queue]` in the service configuration) and runtime settings.

use std::path::PathBuf;
use std::time::Duration;

use figment::Figment;
use figment::providers::Serialized;
use serde::{Deserialize, Serialize};

/// The resolved queue backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum QueueBackend {
    /// Production: queues on Redis. `prefix` namespaces every key (`<prefix>:<queue>:…`).
    Redis { url: String, prefix: String },
    /// Embedded default: queues in their own SQLite file (not the application database, so job
    /// polling never contends with API writes).
    Sqlite { path: PathBuf, prefix: String },
}

impl QueueBackend {
    pub fn prefix(&self) -> &str {
        match self {
            QueueBackend::Redis { prefix, .. } | QueueBackend::Sqlite { prefix, .. } => prefix,
        }
    }

    pub fn kind(&self) -> QueueBackendKind {
        match self {
            QueueBackend::Redis { .. } => QueueBackendKind::Redis,
            QueueBackend::Sqlite { .. } => QueueBackendKind::Sqlite,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueBackendKind {
    Redis,
    Sqlite,
}

pub const DEFAULT_PREFIX: &str = "paygate";

/// The `[queue]` section of the service configuration (`PAYGATE_QUEUE__…` variables). Every key
/// is optional: without any, the backend follows the top-level `redis_url` (Redis when set,
/// otherwise a SQLite file next to the SQLite database).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// `redis` or `sqlite`.
    pub backend: Option<QueueBackendKind>,
    /// Redis URL; defaults to the top-level `redis_url`.
    pub redis_url: Option<String>,
    /// Namespace of queue names and keys; default `paygate`.
    pub prefix: Option<String>,
    /// SQLite job file; default `<database file stem>-jobs.sqlite` beside the SQLite database
    /// (`paygate-jobs.sqlite` in the working directory when the database is PostgreSQL).
    pub sqlite_path: Option<PathBuf>,
}

impl QueueConfig {
    /// The `queue` key of the service figment (defaults < `paygate.toml` < `PAYGATE_*`).
    pub fn from_figment(figment: &Figment) -> anyhow::Result<QueueConfig> {
        Figment::from(Serialized::defaults(QueueConfig::default()))
            .merge(figment.focus("queue"))
            .extract()
            .map_err(|e| anyhow::anyhow!("invalid configuration: queue.{e}"))
    }

    /// Reads `[queue]` from the same sources as [`domain::config::Config::load`].
    pub fn load() -> anyhow::Result<QueueConfig> {
        let path =
            std::env::var_os("PAYGATE_CONFIG").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("paygate.toml"));
        Self::from_figment(&domain::config::Config::figment(&path))
    }

    /// The backend for this configuration, filling unset keys from the service configuration.
    pub fn resolve(&self, app: &domain::config::Config) -> anyhow::Result<QueueBackend> {
        let prefix = self.prefix.clone().unwrap_or_else(|| DEFAULT_PREFIX.to_owned());
        if prefix.is_empty() || prefix.contains(['{', '}', '*', ' ']) {
            anyhow::bail!("invalid configuration: `queue.prefix` must be non-empty, without spaces, braces or `*`");
        }
        let redis_url = self.redis_url.clone().or_else(|| app.redis_url.clone()).filter(|u| !u.is_empty());
        let kind = self.backend.unwrap_or(if redis_url.is_some() {
            QueueBackendKind::Redis
        } else {
            QueueBackendKind::Sqlite
        });
        Ok(match kind {
            QueueBackendKind::Redis => QueueBackend::Redis {
                url: redis_url.ok_or_else(|| {
                    anyhow::anyhow!("invalid configuration: `queue.backend` is redis but no `redis_url` is set")
                })?,
                prefix,
            },
            QueueBackendKind::Sqlite => QueueBackend::Sqlite {
                path: self.sqlite_path.clone().unwrap_or_else(|| default_sqlite_path(&app.database_url)),
                prefix,
            },
        })
    }
}

/// `sqlite://data/paygate.db?mode=rwc` -> `data/paygate-jobs.sqlite`; anything else (PostgreSQL,
/// in-memory SQLite) -> `paygate-jobs.sqlite`.
fn default_sqlite_path(database_url: &str) -> PathBuf {
    domain::config::beside_sqlite_file(database_url, "jobs.sqlite")
        .unwrap_or_else(|| PathBuf::from("paygate-jobs.sqlite"))
}

/// Per-stage settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSettings {
    /// Jobs of this stage run at once in one process.
    pub concurrency: usize,
    /// Attempts in all, the first included; after the last failed one the job is dead.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles with each failed attempt (with jitter).
    pub backoff_base: Duration,
    /// Upper bound of the retry delay.
    pub backoff_max: Duration,
}

impl Default for StageSettings {
    fn default() -> Self {
        StageSettings {
            concurrency: 4,
            max_attempts: 10,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(15 * 60),
        }
    }
}

impl StageSettings {
    /// The delay before the retry that follows failed attempt `attempt` (1-based): half of
    /// `min(backoff_base * 2^(attempt-1), backoff_max)`, plus a random part up to the other half.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(32);
        let full = self.backoff_base.saturating_mul(1u32 << exp.min(31)).min(self.backoff_max);
        let half = full / 2;
        half + half.mul_f64(rand::random::<f64>())
    }
}

/// Settings shared by every stage of a [`Runtime`](super::Runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// How often an idle worker looks for due jobs (apalis otherwise waits for its heartbeat).
    pub poll_interval: Duration,
    /// Worker heartbeat; jobs held by a worker silent for three heartbeats go back to the queue.
    pub heartbeat_interval: Duration,
    /// After a shutdown request, how long in-flight jobs may take before they are abandoned
    /// (they run again elsewhere once the heartbeat lapses).
    pub shutdown_timeout: Duration,
    /// How often completed jobs are purged and queue depth gauges refreshed.
    pub janitor_interval: Duration,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            poll_interval: Duration::from_millis(150),
            heartbeat_interval: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            janitor_interval: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::providers::{Format, Toml};

    fn app(database_url: &str, redis_url: Option<&str>) -> domain::config::Config {
        domain::config::Config {
            database_url: database_url.into(),
            redis_url: redis_url.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn defaults_follow_the_service_configuration() {
        let q = QueueConfig::default();
        assert_eq!(
            q.resolve(&app("sqlite://data/pay.db?mode=rwc", None)).unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("data/pay-jobs.sqlite"), prefix: "paygate".into() }
        );
        assert_eq!(
            q.resolve(&app("postgres://x@h/db", None)).unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("paygate-jobs.sqlite"), prefix: "paygate".into() }
        );
        assert_eq!(
            q.resolve(&app("postgres://x@h/db", Some("redis://r:6379"))).unwrap(),
            QueueBackend::Redis { url: "redis://r:6379".into(), prefix: "paygate".into() }
        );
    }

    #[test]
    fn queue_section_overrides() {
        let figment = Figment::from(Toml::string(
            "[queue]\nbackend = \"sqlite\"\nsqlite_path = \"/var/lib/q.sqlite\"\nprefix = \"staging\"\n",
        ));
        let q = QueueConfig::from_figment(&figment).unwrap();
        assert_eq!(
            q.resolve(&app("postgres://x@h/db", Some("redis://r"))).unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("/var/lib/q.sqlite"), prefix: "staging".into() }
        );

        let figment = Figment::from(Toml::string("[queue]\nbackend = \"redis\"\n"));
        let err = QueueConfig::from_figment(&figment).unwrap().resolve(&app("sqlite://a.db", None)).unwrap_err();
        assert!(err.to_string().contains("redis_url"), "{err}");

        let figment = Figment::from(Toml::string("[queue]\nbakend = \"redis\"\n"));
        let err = QueueConfig::from_figment(&figment).unwrap_err();
        assert!(err.to_string().contains("bakend"), "{err}");
    }

    #[test]
    fn backoff_doubles_within_bounds() {
        let s = StageSettings {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..Default::default()
        };
        for _ in 0..50 {
            let first = s.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
            let third = s.backoff(3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400), "{third:?}");
            let late = s.backoff(40);
            assert!(late >= Duration::from_millis(500) && late <= Duration::from_millis(1000), "{late:?}");
        }
    }
}
