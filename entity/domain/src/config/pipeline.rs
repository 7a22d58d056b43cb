//! `[pipeline]`: deposit scanning and confirmation tracking.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// How often the scanner polls each gate's tip.
    pub scan_interval_ms: u64,
    /// Most blocks one scan reads (catch-up happens in batches of this size).
    pub scan_batch_blocks: u64,
    /// Delay before the tracker looks at an unconfirmed payment again.
    pub track_interval_ms: u64,
    /// How often the sweeper re-derives work from the database (expiries, stale payments).
    pub sweep_interval_ms: u64,
    /// A seen deposit not confirmed within this window makes its invoice `invalid`.
    pub monitor_window_secs: u64,
    /// Jobs run at once per process, per stage (`deposit-scan`, `track-payment`, …); default 4.
    pub stage_concurrency: BTreeMap<String, usize>,
    /// Attempts of a failing job before it is dead-lettered.
    pub max_attempts: u32,
    /// Blocks a live transaction must stay missing (no receipt, not in the node's mempool) before
    /// its payment is reversed; default: the gate's confirmation depth.
    pub gone_after_blocks: Option<u64>,
    /// Checks, at distinct tip heights, that must find it missing before the reversal (at least 1).
    pub gone_min_checks: u32,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            scan_interval_ms: 1000,
            scan_batch_blocks: 500,
            track_interval_ms: 1000,
            sweep_interval_ms: 5000,
            monitor_window_secs: 24 * 3600,
            stage_concurrency: BTreeMap::new(),
            max_attempts: 10,
            gone_after_blocks: None,
            gone_min_checks: 3,
        }
    }
}
