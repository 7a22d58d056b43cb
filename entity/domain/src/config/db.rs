//! `[db]`: the database pool; and the files kept beside an embedded SQLite database.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DbConfig {
    pub max_connections: u32,
    pub min_connections: u32,
    pub acquire_timeout_secs: u64,
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig { max_connections: 32, min_connections: 1, acquire_timeout_secs: 10 }
    }
}

impl DbConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_connections == 0 {
            return invalid("db.max_connections", "must be at least 1");
        }
        Ok(())
    }
}

/// A file beside the embedded SQLite database, named after it:
/// `sqlite://data/paygate.db?mode=rwc` with `jobs.sqlite` -> `data/paygate-jobs.sqlite`.
/// `None` for PostgreSQL and in-memory SQLite, which have no file to stand beside.
pub fn beside_sqlite_file(database_url: &str, suffix: &str) -> Option<std::path::PathBuf> {
    let file = database_url
        .strip_prefix("sqlite:")
        .map(|rest| rest.trim_start_matches("//"))
        .map(|rest| rest.split('?').next().unwrap_or_default())
        .filter(|f| !f.is_empty() && !f.starts_with(":memory:"))?;
    let file = std::path::Path::new(file);
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("paygate");
    Some(file.with_file_name(format!("{stem}-{suffix}")))
}
