//! A worker process: configuration, database, queues, the stages' job runtime, their periodic
//! tasks, and `/health`, `/ready` (database and queue backend reachable) and `/metrics`.

use std::future::Future;
use std::sync::Arc;

use domain::config::Config;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use tokio_util::sync::CancellationToken;

use crate::context::Shared;
use crate::platform::{Queues, Runtime, serve_ops_http, shutdown_signal};
use crate::stages::{self, Stage};

/// Connects the queue backend the configuration names (`[queue]`, else Redis when
/// `redis_url` is set, else the embedded SQLite queue).
pub async fn connect_queues(config: &Config) -> anyhow::Result<Queues> {
    let backend = config.queue_backend()?;
    Queues::connect(&backend).await
}

/// Runs `stages` on an existing database until `stop` resolves or SIGTERM/SIGINT arrives.
/// In-flight jobs finish; the periodic tasks stop first.
pub async fn run_stages(
    stages: &[Stage],
    db: DatabaseConnection,
    config: Arc<Config>,
    queues: Queues,
    stop: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let shared = Shared::new(db, config, queues.clone());
    let mut rt = Runtime::new(queues);
    let token = CancellationToken::new();
    let mut background = Vec::with_capacity(stages.len());
    for s in stages {
        match stages::start(rt, *s, &shared, token.clone()) {
            Ok((next, task)) => {
                rt = next;
                background.push(task);
            }
            Err(e) => {
                // A stage that cannot start (a key it needs is missing or unreadable) stops the
                // periodic tasks the stages before it already spawned.
                token.cancel();
                return Err(e);
            }
        }
    }
    let bg_token = token.clone();
    let result = rt
        .run(async move {
            stop.await;
            bg_token.cancel();
        })
        .await;
    token.cancel();
    for task in background {
        let _ = task.await;
    }
    result
}

/// The `main` of one stage's binary.
pub async fn main(stage: Stage) -> anyhow::Result<()> {
    // Fault injection for the crash tests (`--features failpoints`, FAILPOINTS=name=action).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let config = Config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    domain::telemetry::init(config.log_format);
    let db = domain::db::connect(&config).await?;
    let queues = connect_queues(&config).await?;
    let (db_ready, q_ready) = (db.clone(), queues.clone());
    let readiness = move || {
        let (db, q) = (db_ready.clone(), q_ready.clone());
        async move {
            db.execute_unprepared("SELECT 1").await.map_err(|e| anyhow::anyhow!("database: {e}"))?;
            q.ping().await.map_err(|e| anyhow::anyhow!("queue backend: {e}"))?;
            Ok(())
        }
    };
    // Installed before the ops port answers: a stop from then on drains (domain::shutdown).
    let signalled = shutdown_signal();
    let stop = CancellationToken::new();
    let http_stop = stop.clone();
    let http = serve_ops_http(config.worker.listen, readiness, async move { http_stop.cancelled().await }).await?;
    tracing::info!(stage = stage.name(), ops = %http.local_addr(), backend = queues.backend_name(), "worker started");
    let run_stop = stop.clone();
    let result = run_stages(&[stage], db, Arc::new(config), queues, async move {
        tokio::select! {
            () = signalled => {}
            () = run_stop.cancelled() => {}
        }
    })
    .await;
    stop.cancel();
    http.wait().await?;
    tracing::info!(stage = stage.name(), "worker stopped");
    result
}
