//! Logging and metrics setup. Logging: `RUST_LOG` wins; the default keeps sqlx quiet. Secrets
//! are never logged. Metrics: one Prometheus recorder per process ([`metrics_recorder`]), which
//! every binary renders on its `/metrics` (the API on `[server] metrics_listen`, each worker on
//! `[worker] listen`); `ops serve` runs them all in one process over the same recorder.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Histogram buckets, in seconds (job queue lag and any other latency histogram).
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0];

static RECORDER: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide Prometheus recorder (once; later calls return the same handle).
/// When another recorder was installed first, the handle renders nothing and a warning is logged.
pub fn metrics_recorder() -> PrometheusHandle {
    RECORDER
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS)
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics will show nothing");
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
