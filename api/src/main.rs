//! `api`: the stateless HTTP API process.

use domain::config::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    domain::telemetry::init(config.log_format);
    let listen = config.listen;
    let state = api::bootstrap(config).await?;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(addr = %listener.local_addr()?, "api listening");
    api::app::serve(listener, state, domain::shutdown::shutdown_signal()).await?;
    Ok(())
}
