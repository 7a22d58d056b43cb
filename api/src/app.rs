//! Router assembly and the server loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sea_orm::ConnectionTrait;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use utoipa_swagger_ui::SwaggerUi;

use tokio::sync::watch;
use tower::ServiceExt;

use crate::error::{ApiError, ErrorCode};
use crate::extract::MAX_BODY_BYTES;
use crate::state::HttpState;
use domain::config::ServerConfig;

pub fn router(state: HttpState) -> Router {
    let limits = axum::middleware::from_fn_with_state(state.clone(), crate::ratelimit::layer::limit);
    let (documented, paths) = crate::routes::documented_routes().split_for_parts();
    // Checkout and dashboard pages, health probes and the Swagger UI are not part of the merchant
    // API's document.
    Router::new()
        .merge(documented)
        .merge(crate::checkout::router())
        .merge(crate::dashboard::router(state.clone()))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(SwaggerUi::new("/docs").external_url_unchecked("/openapi.json", crate::openapi::document_of(paths)))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(limits)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(axum::middleware::map_response(enveloped_payload_too_large))
        .layer(CatchPanicLayer::custom(|_| ApiError::internal("handler panicked").into_response()))
        .layer(axum::middleware::from_fn(crate::envelope::request_id_layer))
}

async fn health() -> &'static str {
    "ok"
}

/// The body limit layer answers a too-large `Content-Length` itself, in plain text: that answer
/// becomes the error envelope (`payload_too_large`) like every other error.
async fn enveloped_payload_too_large(resp: Response) -> Response {
    let ours = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if resp.status() == StatusCode::PAYLOAD_TOO_LARGE && !ours {
        return ApiError::payload_too_large(MAX_BODY_BYTES).into_response();
    }
    resp
}

/// Ready when the database answers. When it does not, 503 `not_ready` names the dependency
/// (`database: down`); the driver's error is logged, never returned (it can name hosts, users
/// or files).
async fn ready(State(state): State<HttpState>) -> impl IntoResponse {
    match state.db.execute_unprepared("SELECT 1").await {
        Ok(_) => (StatusCode::OK, "ready").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready: the database check failed");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NotReady, "not ready: database is down")
                .with_details(vec!["database: down".to_owned()])
                .into_response()
        }
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, ErrorCode::ValidationError, "method not allowed on this path")
}

/// Serves until `shutdown` resolves; in-flight requests finish. Timeouts and the connection cap
/// come from `[server]` (`serve_router`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HttpState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let settings = state.config.server.clone();
    serve_router(listener, router(state), &settings, shutdown).await
}

/// Serves Prometheus `GET /metrics` (the process's recorder, `domain::telemetry`) on the
/// operator's `[server] metrics_listen` until `shutdown` resolves.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let handle = domain::telemetry::metrics_recorder();
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let body = handle.render();
            async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body) }
        }),
    );
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// The accept loop behind `serve`, for any router: HTTP/1.1 with a header read timeout, a
/// request timeout (504 `request_timeout` in the error envelope), an idle keep-alive timeout
/// and at most `max_connections` connections (the next client waits in the listen backlog).
/// Handlers see the peer as `ConnectInfo<SocketAddr>`. When `shutdown` resolves, no new
/// connection is accepted, idle ones close, and in-flight requests finish first.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    app: Router,
    settings: &ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = app.layer(axum::middleware::from_fn_with_state(
        Duration::from_millis(settings.request_timeout_ms),
        request_timeout_layer,
    ));
    let limits = ConnectionLimits {
        header_read: Duration::from_millis(settings.header_read_timeout_ms),
        idle: Duration::from_millis(settings.idle_timeout_ms),
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(settings.max_connections));
    // Dropping `signal_rx` tells the accept loop and every connection to stop; each connection
    // holds a `close_rx` until it is done, so `close_tx.closed()` waits for all of them.
    let (signal_tx, signal_rx) = watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(signal_rx);
    });
    let (close_tx, close_rx) = watch::channel(());
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            _ = signal_tx.closed() => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    accept_error_pause(e).await;
                    continue;
                }
            },
            _ = signal_tx.closed() => break,
        };
        // Without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~25-40 ms to small responses.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
        let (app, signal_tx, close_rx) = (app.clone(), signal_tx.clone(), close_rx.clone());
        tokio::spawn(async move {
            serve_connection(tcp, peer, app, limits, signal_tx).await;
            drop(close_rx);
            drop(permit);
        });
    }
    drop(close_rx);
    drop(listener);
    close_tx.closed().await;
    Ok(())
}

#[derive(Clone, Copy)]
struct ConnectionLimits {
    header_read: Duration,
    idle: Duration,
}

/// A failed accept: a client that gave up is skipped; anything else (e.g. out of file
/// descriptors) is logged and retried after a pause instead of spinning.
async fn accept_error_pause(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accept failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// One HTTP/1.1 connection until it ends: the client closes, a timeout fires, or shutdown (after
/// its in-flight request).
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    signal_tx: watch::Sender<()>,
) {
    let activity = Arc::new(ConnectionActivity::new());
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            let busy = activity.begin();
            let app = app.clone();
            async move {
                let resp = app.oneshot(req.map(axum::body::Body::new)).await;
                drop(busy);
                resp
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(limits.header_read).keep_alive(true);
    let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
    let mut conn = std::pin::pin!(conn);
    let mut stop = std::pin::pin!(signal_tx.closed());
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            _ = &mut stop, if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = activity.idle_for(limits.idle), if !closing => {
                conn.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// Requests in flight on one connection and when the last one ended (or the connection opened).
struct ConnectionActivity {
    state: std::sync::Mutex<(usize, tokio::time::Instant)>,
}

/// Held while a request is served; dropping it ends the request.
struct Busy(Arc<ConnectionActivity>);

impl ConnectionActivity {
    fn new() -> Self {
        ConnectionActivity { state: std::sync::Mutex::new((0, tokio::time::Instant::now())) }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0 += 1;
        Busy(self.clone())
    }

    fn snapshot(&self) -> (usize, tokio::time::Instant) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once no request has been in flight for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let (in_flight, last) = self.snapshot();
            if in_flight > 0 {
                tokio::time::sleep(idle).await;
                continue;
            }
            let deadline = last + idle;
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 -= 1;
        state.1 = tokio::time::Instant::now();
    }
}

/// Answers 504 `request_timeout` (error envelope, same request id) when the inner service has no
/// response within `limit`; the handler's future is dropped, so an open database transaction
/// rolls back. 504, not 503: spec §7 keeps 503 for a gate that is offline, and a gateway
/// timeout is what the client met (the service is up; this request took too long).
async fn request_timeout_layer(State(limit): State<Duration>, mut req: Request, next: Next) -> Response {
    let id = crate::envelope::assign_request_id(&mut req);
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => crate::envelope::response_with_request_id(id, || {
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                ErrorCode::RequestTimeout,
                format!("the request took longer than {} ms", limit.as_millis()),
            )
            .into_response()
        }),
    }
}
