//! `[worker]`: where a worker process serves `/health`, `/ready` and `/metrics`.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    pub listen: SocketAddr,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 9090)) }
    }
}
