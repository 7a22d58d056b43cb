//! `[queue]`: which backend carries the job queues, read once with the rest of the
//! configuration. Every key is optional: without any, the backend follows the top-level
//! `redis_url` (Redis when set, otherwise a SQLite file next to the SQLite database).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// The namespace of queue names and keys when `queue.prefix` is not set.
pub const DEFAULT_QUEUE_PREFIX: &str = "paygate";

/// `redis` or `sqlite`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueBackendKind {
    Redis,
    Sqlite,
}

/// The `[queue]` section (`PAYGATE_QUEUE__…` variables).
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

/// The queue backend a configuration resolves to.
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

impl QueueConfig {
    /// The backend for this section, filling unset keys from the top-level `redis_url` and
    /// `database_url`; refused (naming the key) when the prefix is unusable or Redis is chosen
    /// without a URL.
    pub fn resolve(&self, redis_url: Option<&str>, database_url: &str) -> Result<QueueBackend, ConfigError> {
        let prefix = self.prefix.clone().unwrap_or_else(|| DEFAULT_QUEUE_PREFIX.to_owned());
        if prefix.is_empty() || prefix.contains(['{', '}', '*', ' ']) {
            invalid("queue.prefix", "must be non-empty, without spaces, braces or `*`")?;
        }
        let redis_url = self.redis_url.as_deref().or(redis_url).filter(|u| !u.is_empty());
        let kind = self.backend.unwrap_or(if redis_url.is_some() {
            QueueBackendKind::Redis
        } else {
            QueueBackendKind::Sqlite
        });
        Ok(match kind {
            QueueBackendKind::Redis => match redis_url {
                Some(url) => QueueBackend::Redis { url: url.to_owned(), prefix },
                None => {
                    return Err(ConfigError::Invalid {
                        key: "queue.backend".to_owned(),
                        message: "is redis but no `redis_url` is set".to_owned(),
                    });
                }
            },
            QueueBackendKind::Sqlite => QueueBackend::Sqlite {
                path: self.sqlite_path.clone().unwrap_or_else(|| default_sqlite_path(database_url)),
                prefix,
            },
        })
    }
}

/// `sqlite://data/paygate.db?mode=rwc` -> `data/paygate-jobs.sqlite`; anything else (PostgreSQL,
/// in-memory SQLite) -> `paygate-jobs.sqlite`.
fn default_sqlite_path(database_url: &str) -> PathBuf {
    super::beside_sqlite_file(database_url, "jobs.sqlite").unwrap_or_else(|| PathBuf::from("paygate-jobs.sqlite"))
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;
    use figment::Figment;
    use figment::providers::{Format, Serialized, Toml};

    fn app(database_url: &str, redis_url: Option<&str>) -> Config {
        Config { database_url: database_url.into(), redis_url: redis_url.map(Into::into), ..Default::default() }
    }

    /// The configuration with `toml` over the defaults, as `Config::load` reads a file.
    fn load(toml: &str) -> Result<Config, ConfigError> {
        Config::from_figment(Figment::from(Serialized::defaults(Config::default())).merge(Toml::string(toml)))
    }

    #[test]
    fn defaults_follow_the_service_configuration() {
        assert_eq!(
            app("sqlite://data/pay.db?mode=rwc", None).queue_backend().unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("data/pay-jobs.sqlite"), prefix: "paygate".into() }
        );
        assert_eq!(
            app("postgres://x@h/db", None).queue_backend().unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("paygate-jobs.sqlite"), prefix: "paygate".into() }
        );
        assert_eq!(
            app("postgres://x@h/db", Some("redis://r:6379")).queue_backend().unwrap(),
            QueueBackend::Redis { url: "redis://r:6379".into(), prefix: "paygate".into() }
        );
    }

    #[test]
    fn queue_section_overrides() {
        let c = load(
            "database_url = \"postgres://x@h/db\"\nredis_url = \"redis://r\"\n\
             [queue]\nbackend = \"sqlite\"\nsqlite_path = \"/var/lib/q.sqlite\"\nprefix = \"staging\"\n",
        )
        .unwrap();
        assert_eq!(
            c.queue_backend().unwrap(),
            QueueBackend::Sqlite { path: PathBuf::from("/var/lib/q.sqlite"), prefix: "staging".into() }
        );

        let err = load("database_url = \"sqlite://a.db\"\n[queue]\nbackend = \"redis\"\n").unwrap_err();
        assert!(err.to_string().contains("redis_url"), "{err}");

        let err = load("[queue]\nbakend = \"redis\"\n").unwrap_err();
        assert!(err.to_string().contains("bakend"), "{err}");

        let err = load("[queue]\nprefix = \"a b\"\n").unwrap_err();
        assert!(err.to_string().contains("queue.prefix"), "{err}");
    }
}
