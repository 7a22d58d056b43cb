//! Router assembly and the server loop.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sea_orm::ConnectionTrait;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use utoipa::OpenApi;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::{ApiError, ErrorCode};
use crate::openapi::ApiDoc;
use crate::state::AppState;

/// Largest request body accepted (JSON bodies here are small).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(crate::invoices::router())
        .merge(crate::static_addresses::router())
        .merge(crate::public::router())
        .merge(crate::balances::router())
        .merge(crate::payouts::router())
        .merge(crate::refunds::router())
        .merge(crate::test_helpers::router())
        .merge(crate::checkout::router())
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
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
async fn ready(State(state): State<AppState>) -> impl IntoResponse {
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

/// Serves until `shutdown` resolves; in-flight requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // Without TCP_NODELAY, Nagle's algorithm and delayed ACKs add ~25-40 ms to small responses.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "could not set TCP_NODELAY");
        }
    });
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
