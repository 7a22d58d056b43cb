//! Router assembly and the server loop.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
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
const MAX_BODY_BYTES: usize = 64 * 1024;

pub fn router(state: AppState) -> Router {
    let limits = axum::middleware::from_fn_with_state(state.clone(), crate::ratelimit::layer::limit);
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
        .layer(limits)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| ApiError::internal("handler panicked").into_response()))
        .layer(axum::middleware::from_fn(crate::envelope::request_id_layer))
}

async fn health() -> &'static str {
    "ok"
}

/// Ready when the database answers.
async fn ready(State(state): State<AppState>) -> impl IntoResponse {
    match state.db.execute_unprepared("SELECT 1").await {
        Ok(_) => (StatusCode::OK, "ready").into_response(),
        Err(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::InternalError,
            format!("database unreachable: {e}"),
        )
        .into_response(),
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
    axum::serve(listener, router(state).into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown)
        .await
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
