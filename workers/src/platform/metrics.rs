//! Prometheus metrics of the job platform.
//!
//! One recorder per process, installed on first use ([`install_recorder`]); `/metrics` renders it.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

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

const LAG_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once; later calls return the same handle).
/// When another recorder was installed first, the handle renders nothing and a warning is logged.
pub fn install_recorder() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(QUEUE_LAG.to_owned()), LAG_BUCKETS)
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics will not show job metrics");
            }
            // Without the exporter's own runtime, histograms are drained by hand.
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(Duration::from_secs(5));
                        upkeep.run_upkeep();
                    }
                })
                .expect("spawning the metrics upkeep thread");
            handle
        })
        .clone()
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
