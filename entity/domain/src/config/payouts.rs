//! `[payouts]`: the payout executor.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PayoutsConfig {
    /// How often the executor looks for approved payouts that are due (and lost jobs).
    pub poll_interval_ms: u64,
    /// Delay between looks at a payout waiting for confirmations.
    pub recheck_ms: u64,
    /// A queued or processing payout nobody looked at for this long is enqueued again.
    pub stale_after_secs: u64,
}

impl Default for PayoutsConfig {
    fn default() -> Self {
        PayoutsConfig { poll_interval_ms: 1000, recheck_ms: 1000, stale_after_secs: 30 }
    }
}

impl PayoutsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.poll_interval_ms == 0 || self.recheck_ms == 0 || self.stale_after_secs == 0 {
            return invalid("payouts", "poll_interval_ms, recheck_ms and stale_after_secs must be at least 1");
        }
        Ok(())
    }
}
