//! `[webhooks]`: delivery timeout, retry schedule, outbound safety, the secrets' encryption key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// An attempt succeeds on a 2xx answer within this time (connect, send, headers).
    pub timeout_ms: u64,
    /// Delays before each retry after a failed attempt; after the last the delivery is dead.
    pub retry_schedule_secs: Vec<u64>,
    /// Each delay is spread by up to this share (0..=50 percent) either way.
    pub jitter_percent: u8,
    /// A `Retry-After` answer (429, 503) postpones the retry up to this many seconds.
    pub retry_after_max_secs: u64,
    /// Allow plain http in the live environment and targets on loopback, private, link-local
    /// and metadata addresses. For development and tests only.
    pub allow_insecure_targets: bool,
    /// Key that encrypts endpoint secrets at rest: 64 hex characters (32 bytes). Needed by
    /// `ops webhooks`, the deliverer and the API (to seal the secrets of endpoints merchants make).
    pub secret_key: Option<Redacted>,
    /// File holding that key (64 hex characters), when `secret_key` is not set. Default on the
    /// embedded SQLite database: `<db stem>-webhooks.key` beside it, created on first use.
    pub secret_key_file: Option<PathBuf>,
    /// Keys that still decrypt endpoint secrets but no longer encrypt them (64 hex characters
    /// each): set during a key rotation (`ops webhooks rotate-key`, docs/webhooks.md), so every
    /// process reads secrets under the old and the new key alike.
    pub previous_secret_keys: Vec<Redacted>,
    /// How often the deliverer moves new outbox events into deliveries.
    pub dispatch_interval_ms: u64,
    /// Events moved per round.
    pub dispatch_batch: u64,
    /// Deliveries due and waiting in the queue at most. Past it the dispatcher leaves new
    /// events in the outbox, oldest first, until the deliverers catch up: under more load than
    /// they can send, the work per second stays that of what is sent, and the backlog drains in
    /// the order the events happened.
    pub max_queued: u64,
    /// How often lost deliveries (job gone with a flushed queue, deliverer killed mid-attempt)
    /// are re-enqueued.
    pub sweep_interval_ms: u64,
    /// A delivery due this long without an attempt is considered lost by its job.
    pub stale_after_secs: u64,
    /// How long both the old and the new secret sign after `ops webhooks rotate`.
    pub rotation_overlap_secs: u64,
    /// Deliveries about one invoice (or payout) reach the endpoint in the order of their events
    /// (docs/webhooks.md "Order per invoice"). Default true; false sends each as soon as due.
    pub ordered: bool,
    /// Bytes of each response body kept with the attempt.
    pub response_body_limit: usize,
    /// Endpoint (URL and secret) cache of a deliverer process; rotation and removal take
    /// effect within this time.
    pub endpoint_cache_ms: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            timeout_ms: 10_000,
            retry_schedule_secs: vec![5, 300, 1800, 7200, 18_000, 36_000, 36_000],
            jitter_percent: 10,
            retry_after_max_secs: 36_000,
            allow_insecure_targets: false,
            secret_key: None,
            secret_key_file: None,
            previous_secret_keys: Vec::new(),
            dispatch_interval_ms: 100,
            dispatch_batch: 500,
            max_queued: 1000,
            sweep_interval_ms: 5_000,
            stale_after_secs: 60,
            rotation_overlap_secs: 24 * 3600,
            ordered: true,
            response_body_limit: 1024,
            endpoint_cache_ms: 1_000,
        }
    }
}

impl WebhooksConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.timeout_ms == 0 || self.timeout_ms > 60_000 {
            return invalid("webhooks.timeout_ms", "must be between 1 and 60000");
        }
        if self.retry_schedule_secs.len() > 20 {
            return invalid("webhooks.retry_schedule_secs", "at most 20 retries");
        }
        if self.jitter_percent > 50 {
            return invalid("webhooks.jitter_percent", "must be at most 50");
        }
        if self.dispatch_batch == 0 || self.dispatch_interval_ms == 0 || self.sweep_interval_ms == 0 {
            return invalid(
                "webhooks",
                "dispatch_batch, dispatch_interval_ms and sweep_interval_ms must be at least 1",
            );
        }
        if self.max_queued == 0 {
            return invalid("webhooks.max_queued", "must be at least 1");
        }
        if self.stale_after_secs == 0 {
            return invalid("webhooks.stale_after_secs", "must be at least 1");
        }
        if let Some(k) = &self.secret_key
            && parse_secret_key(&k.0).is_err()
        {
            return invalid("webhooks.secret_key", "must be 64 hex characters (32 bytes)");
        }
        if self.previous_secret_keys.iter().any(|k| parse_secret_key(&k.0).is_err()) {
            return invalid("webhooks.previous_secret_keys", "each must be 64 hex characters (32 bytes)");
        }
        Ok(())
    }
}

/// `webhooks.secret_key`'s format: 64 hex characters -> the 32-byte key.
pub fn parse_secret_key(hex_key: &str) -> Result<[u8; 32], &'static str> {
    let bytes = hex::decode(hex_key.trim()).map_err(|_| "not hex")?;
    bytes.as_slice().try_into().map_err(|_| "must be 32 bytes (64 hex characters)")
}
