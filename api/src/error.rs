//! One error type for the whole API, rendered as the spec's error envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::envelope::{Meta, current_request_id};

/// Stable `error.code` values (docs/api-decisions.md lists when each is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ValidationError,
    Unauthorized,
    Forbidden,
    NotFound,
    InvoiceNotCancellable,
    InvoiceNotActivatable,
    PayoutNotCancellable,
    IdempotencyKeyMismatch,
    InsufficientBalance,
    RefundExceedsCredit,
    RefundCurrencyMismatch,
    AmountOutOfRange,
    UnsupportedCurrency,
    GateOffline,
    RatesUnavailable,
    RateLimited,
    PayloadTooLarge,
    NotReady,
    /// 503: the server's `request_timeout_ms` elapsed before the response was ready.
    RequestTimeout,
    InternalError,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<String>,
    pub retry_after: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<String>,
}

/// The error envelope: `{ error: {code, message, details}, meta: {request_id} }`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    pub meta: Meta,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: Vec::new(), retry_after: None }
    }

    pub fn with_details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }

    /// 400 with one `field: problem` detail.
    pub fn invalid_field(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::validation(vec![format!("{field}: {problem}")])
    }

    /// 400 with several `field: problem` details.
    pub fn validation(details: Vec<String>) -> Self {
        let message = match details.as_slice() {
            [one] => format!("invalid request: {one}"),
            _ => format!("invalid request: {} problems", details.len()),
        };
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::ValidationError, message).with_details(details)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(permission: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!("this API key lacks the `{permission}` permission"),
        )
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 422 for a request that is well-formed but breaks a business rule; `field` is named.
    pub fn unprocessable(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let detail = format!("{field}: {message}");
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message).with_details(vec![detail])
    }

    /// 422 with several `field: problem` details.
    pub fn unprocessable_many(code: ErrorCode, details: Vec<String>) -> Self {
        let message = match details.as_slice() {
            [one] => one.clone(),
            _ => format!("{} problems", details.len()),
        };
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message).with_details(details)
    }

    pub fn unavailable(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
    }

    /// 413: a request body over `limit` bytes.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
            format!("request body larger than {limit} bytes"),
        )
        .with_details(vec![format!("body: at most {limit} bytes")])
    }

    /// 500. The cause is logged with the request id; the client sees only the id.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(request_id = %current_request_id(), error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            "internal error; quote meta.request_id to support",
        )
    }
}

/// An unknown or ambiguous currency/network in a request: 422 naming the field.
impl From<crate::gates::ResolveError> for ApiError {
    fn from(e: crate::gates::ResolveError) -> Self {
        ApiError::unprocessable(ErrorCode::UnsupportedCurrency, e.field(), e.to_string())
    }
}

impl From<crate::payouts::service::ReleaseError> for ApiError {
    fn from(e: crate::payouts::service::ReleaseError) -> Self {
        ApiError::internal(e)
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(e: sea_orm::DbErr) -> Self {
        ApiError::internal(e)
    }
}

impl From<sea_orm::TransactionError<ApiError>> for ApiError {
    fn from(e: sea_orm::TransactionError<ApiError>) -> Self {
        match e {
            sea_orm::TransactionError::Connection(db) => ApiError::internal(db),
            sea_orm::TransactionError::Transaction(api) => api,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorEnvelope {
            error: ErrorBody { code: self.code, message: self.message, details: self.details },
            meta: Meta::current(),
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}
