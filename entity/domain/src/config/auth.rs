//! `[auth]`: API key verification.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// How long a verified key is trusted without asking the database again. This bounds how
    /// long a revoked key keeps working on an API process.
    pub cache_ttl_secs: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig { cache_ttl_secs: 5 }
    }
}

impl AuthConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.cache_ttl_secs > 60 {
            return invalid(
                "auth.cache_ttl_secs",
                "must be at most 60 (revoked keys must stop working within seconds)",
            );
        }
        Ok(())
    }
}
