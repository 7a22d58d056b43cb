//! `[retention]`: what is pruned after how long, by the webhook deliverer's background loop (and
//! `ops prune`). The ledger, payments, invoices, payouts, refunds, events and the audit log are
//! never pruned: the first are the books, events are what `/v1/events` and redelivery reconcile
//! against (spec section 6) and the audit log is the operator's record.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// A webhook attempt's response excerpt (the endpoint's answer) is cleared this many days
    /// after the attempt; the attempt row (time, status, latency, error) stays. 0: kept forever.
    pub attempt_bodies_days: u32,
    /// Dashboard sessions and unaccepted invitations are deleted this many days after they ended
    /// (expired or revoked). 0: kept forever.
    pub ended_sessions_days: u32,
    /// How often the deliverer prunes.
    pub interval_secs: u64,
    /// Rows per statement: each batch is its own short transaction, so no lock is held long.
    pub batch_size: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig { attempt_bodies_days: 90, ended_sessions_days: 30, interval_secs: 3600, batch_size: 1000 }
    }
}

impl RetentionConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.interval_secs == 0 {
            return invalid("retention.interval_secs", "must be at least 1");
        }
        if !(1..=100_000).contains(&self.batch_size) {
            return invalid("retention.batch_size", "must be from 1 to 100000");
        }
        Ok(())
    }
}
