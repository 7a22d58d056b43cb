//! `[sandbox]`: the test environment's sandbox chains.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// One sandbox block per this many milliseconds on every gate; 0 = blocks only when mined
    /// explicitly (`POST /v1/test/blocks`, `ops sandbox mine`).
    pub block_interval_ms: u64,
    /// Per gate id overrides of `block_interval_ms`.
    pub gate_block_interval_ms: BTreeMap<String, u64>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig { block_interval_ms: 1000, gate_block_interval_ms: BTreeMap::new() }
    }
}

impl SandboxConfig {
    pub fn interval_ms(&self, gate_id: &str) -> u64 {
        self.gate_block_interval_ms.get(gate_id).copied().unwrap_or(self.block_interval_ms)
    }
}
