//! `[invoices]`: draft lifetime and deposit-address reservation.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InvoicesConfig {
    /// Lifetime of a draft whose request gives no `draft_expires_at`.
    pub default_draft_lifetime_secs: i64,
    /// Derivation indices an API process reserves at a time. A restart leaves at most two
    /// blocks unused; unpaid invoices leave gaps anyway, so the service (not a wallet's gap
    /// limit) is what watches derived addresses. Live Solana pools always reserve one at a time.
    pub address_block_size: u32,
}

impl Default for InvoicesConfig {
    fn default() -> Self {
        InvoicesConfig { default_draft_lifetime_secs: 7 * 24 * 3600, address_block_size: 100 }
    }
}

impl InvoicesConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.address_block_size == 0 {
            return invalid("invoices.address_block_size", "must be at least 1");
        }
        if self.default_draft_lifetime_secs <= 0 {
            return invalid("invoices.default_draft_lifetime_secs", "must be positive");
        }
        Ok(())
    }
}
