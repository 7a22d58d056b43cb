//! `ops serve`: the embedded default, the API and every stage in one process.

use anyhow::{Context, bail};
use domain::config::Config;
use domain::merchants;

pub async fn serve(config: Config) -> anyhow::Result<()> {
    if config.redis_url.is_some() {
        bail!(
            "`ops serve` runs the embedded single-process mode; unset redis_url (PAYGATE_REDIS_URL) or run the api and worker binaries"
        );
    }
    let listen = config.listen;
    let seed = config.embedded.seed_demo;
    let queues = workers::process::connect_queues(&config).await?;
    let worker_config = std::sync::Arc::new(config.clone());
    let state = api::bootstrap(config).await?;
    if seed && let Some((m, key)) = merchants::seed_demo(&state.db).await? {
        // Written without `println!`: a server whose stdout was closed must keep serving.
        use std::io::Write;
        let _ = write!(
            std::io::stdout(),
            "\nFirst start: created merchant {:?} ({}) and a test API key with every permission.\n\
             It is shown only this once:\n\n    {key}\n\n\
             Try:  curl -s -H 'X-API-Key: {key}' -H 'Content-Type: application/json' \\\n        \
             -d '{{\"currency\":\"BTC\",\"amount\":\"0.001\"}}' http://{listen}/v1/invoices\n\n",
            m.name,
            m.id
        );
        let _ = std::io::stdout().flush();
    }
    // Installed before the port answers: a stop from then on drains (domain::shutdown).
    let signalled = domain::shutdown::shutdown_signal();
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "paygate (embedded) listening; API docs at /docs");
    // Every worker stage runs in this process on the embedded queue.
    let stop = tokio_util::sync::CancellationToken::new();
    let (api_stop, stages_stop, after_api) = (stop.clone(), stop.clone(), stop.clone());
    let stages = tokio::spawn(workers::process::run_stages(
        &workers::stages::Stage::ALL,
        state.db.clone(),
        worker_config,
        queues,
        async move { stages_stop.cancelled().await },
    ));
    tokio::spawn(async move {
        signalled.await;
        stop.cancel();
    });
    api::app::serve(listener, state, async move { api_stop.cancelled().await }).await?;
    after_api.cancel();
    stages.await??;
    Ok(())
}
