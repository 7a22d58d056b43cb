//! Prometheus metrics of the job platform.
//!
//! One recorder per process (the domain's, [`install_recorder`]); `/metrics` renders it.

use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::PrometheusHandle;

use super::admin::QueueDepth;

/// Jobs that succeeded, by `queue`.
pub const JOBS_PROCESSED: &str = "paygate_jobs_processed_total";
/// Jobs dead-lettered (last attempt failed, or a permanent failure), by `queue`.
pub const JOBS_FAILED: &str = "paygate_jobs_failed_total";
/// Failed attempts re-enqueued for a retry, by `queue`.
pub const JOBS_RETRIED: &str = "paygate_jobs_retried_total";
/// Seconds from the time a job was due (enqueue, or end of its delay) to its start, by `queue`.
pub const QUEUE_LAG: &str = "paygate_job_queue_lag_seconds";
/// Jobs by `queue` and `state` (waiting, scheduled, running, dead), sampled by the runtime.
pub const QUEUE_DEPTH: &str = "paygate_job_queue_depth";

/// The process-wide Prometheus recorder (`domain::telemetry::metrics_recorder`).
pub fn install_recorder() -> PrometheusHandle {
    domain::telemetry::metrics_recorder()
}

pub(crate) fn job_processed(queue: &str) {
    counter!(JOBS_PROCESSED, "queue" => queue.to_owned()).increment(1);
}

pub(crate) fn job_failed(queue: &str) {
    counter!(JOBS_FAILED, "queue" => queue.to_owned()).increment(1);
}

pub(crate) fn job_retried(queue: &str) {
    counter!(JOBS_RETRIED, "queue" => queue.to_owned()).increment(1);
}

pub(crate) fn job_started(queue: &str, lag: Duration) {
    histogram!(QUEUE_LAG, "queue" => queue.to_owned()).record(lag.as_secs_f64());
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^52
pub(crate) fn queue_depth(depth: &QueueDepth) {
    for (state, n) in
        [("waiting", depth.waiting), ("scheduled", depth.scheduled), ("running", depth.running), ("dead", depth.dead)]
    {
        gauge!(QUEUE_DEPTH, "queue" => depth.queue.clone(), "state" => state).set(n as f64);
    }
}
