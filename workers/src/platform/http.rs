//! The operations endpoints: `GET /health`, `GET /ready`, `GET /metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use super::metrics::install_recorder;

/// What `/ready` checks (for example: database ping and [`Queues::ping`](super::Queues::ping)).
/// Any `Fn() -> impl Future<Output = anyhow::Result<()>>` is one.
pub trait ReadinessCheck: Send + Sync + 'static {
    fn check(&self) -> BoxFuture<'static, anyhow::Result<()>>;
}

impl<F, Fut> ReadinessCheck for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    fn check(&self) -> BoxFuture<'static, anyhow::Result<()>> {
        self().boxed()
    }
}

/// A readiness check slower than this fails.
const READY_TIMEOUT: Duration = Duration::from_secs(3);

/// The three routes, to serve alone ([`serve_ops_http`]) or merge into another router.
pub fn ops_router(readiness: impl ReadinessCheck) -> Router {
    let metrics = install_recorder();
    let readiness: Arc<dyn ReadinessCheck> = Arc::new(readiness);
    Router::new().route("/health", get(|| async { "ok" })).route("/ready", get(ready).with_state(readiness)).route(
        "/metrics",
        get(move || {
            let body = metrics.render();
            async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body) }
        }),
    )
}

async fn ready(State(readiness): State<Arc<dyn ReadinessCheck>>) -> impl IntoResponse {
    match tokio::time::timeout(READY_TIMEOUT, readiness.check()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready".to_owned()),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {e:#}")),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: check took over {READY_TIMEOUT:?}")),
    }
}

/// A running operations server.
#[derive(Debug)]
pub struct OpsHttpServer {
    local_addr: SocketAddr,
    task: JoinHandle<std::io::Result<()>>,
}

impl OpsHttpServer {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits for the server to stop (after `shutdown` completed).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await.context("ops http server task")?.context("ops http server")
    }
}

/// Binds `addr` and serves [`ops_router`] in the background until `shutdown` completes.
pub async fn serve_ops_http(
    addr: SocketAddr,
    readiness: impl ReadinessCheck,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<OpsHttpServer> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
    let local_addr = listener.local_addr()?;
    let app = ops_router(readiness);
    let task = tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await });
    tracing::info!(addr = %local_addr, "ops endpoints on /health, /ready, /metrics");
    Ok(OpsHttpServer { local_addr, task })
}
