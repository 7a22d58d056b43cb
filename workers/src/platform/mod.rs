//! The durable job platform: typed jobs on apalis queues (Redis in production, a SQLite file on
//! the embedded default), one handler signature for both.
//!
//! - [`Queues`] connects to the backend, enqueues jobs ([`Queues::push`], [`Queues::push_after`])
//!   and administers queues (depths, dead jobs, replay).
//! - [`Runtime`] runs stages: one handler per queue with its [`StageSettings`], retries with
//!   exponential backoff, dead-lettering, graceful shutdown.
//! - [`serve_ops_http`] serves `/health`, `/ready` and `/metrics`.
//!
//! Retries are durable: a failed attempt is re-enqueued with a delay (`run_at`), so a waiting
//! retry holds no worker slot and survives restarts. See `docs/jobs.md`.

mod admin;
mod backend;
mod config;
mod draining;
mod http;
pub mod metrics;
mod runner;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use admin::{DeadJob, QueueDepth, ReplayOutcome};
pub use backend::Queues;
pub use config::{RuntimeSettings, StageSettings};
pub use domain::config::{QueueBackend, QueueBackendKind};
pub use http::{OpsHttpServer, ReadinessCheck, ops_router, serve_ops_http};
pub use runner::{JobCtx, JobError, Runtime, shutdown_signal};

/// A job type: its serialized form is what is stored, so it should carry ids, not state.
///
/// `QUEUE` is the stage's queue name without the deployment prefix: with the default prefix
/// `paygate`, `const QUEUE: &'static str = "deposit-scan"` is stored as `paygate:deposit-scan`.
/// Use lowercase letters, digits, `-` and `_`.
pub trait Job: Serialize + DeserializeOwned + Clone + Send + Sync + Unpin + 'static {
    const QUEUE: &'static str;
}

/// Whether `name` is a valid [`Job::QUEUE`] (checked when a stage is registered or a job pushed).
fn valid_queue_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}
