//! `api`: the stateless HTTP API process.

use domain::config::Config;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    domain::telemetry::init(config.log_format);
    // Installed before any request, so every counter lands in it.
    domain::telemetry::metrics_recorder();
    let listen = config.listen;
    let metrics_listen = config.server.metrics_listen;
    let state = api::bootstrap(config).await?;
    // Installed before any port answers: a stop from then on drains (domain::shutdown).
    let signalled = domain::shutdown::shutdown_signal();
    let stop = CancellationToken::new();
    let metrics = match metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(addr = %listener.local_addr()?, "metrics on /metrics");
            let stop = stop.clone();
            Some(tokio::spawn(api::app::serve_metrics(listener, async move { stop.cancelled().await })))
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    api::app::serve(listener, state, signalled).await?;
    stop.cancel();
    if let Some(m) = metrics {
        m.await??;
    }
    Ok(())
}
