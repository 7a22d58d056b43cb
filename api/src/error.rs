//! One error type for the whole API, rendered as the spec's error envelope.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::envelope::{Meta, current_request_id};

pub use domain::domain_error::ErrorCode;
use domain::domain_error::{DomainError, Kind};

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
        DomainError::validation(details).into()
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
        DomainError::not_found(what).into()
    }

    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        DomainError::conflict(code, message).into()
    }

    /// 422 for a request that is well-formed but breaks a business rule; `field` is named.
    pub fn unprocessable(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        DomainError::unprocessable(code, field, message).into()
    }

    pub fn unavailable(code: ErrorCode, message: impl Into<String>) -> Self {
        DomainError::unavailable(code, message).into()
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

/// Every domain error in one place: its kind decides the status, its code and details pass
/// through, and an internal cause is logged with the request id and never shown.
impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        let status = match e.kind {
            Kind::Invalid => StatusCode::BAD_REQUEST,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Internal => return ApiError::internal(e.message),
        };
        ApiError::new(status, e.code, e.message).with_details(e.details)
    }
}

/// An unknown or ambiguous currency/network in a request: 422 naming the field.
impl From<domain::gates::ResolveError> for ApiError {
    fn from(e: domain::gates::ResolveError) -> Self {
        DomainError::from(e).into()
    }
}

/// A key that does not authenticate: 401 with the reason.
impl From<domain::keys::KeyError> for ApiError {
    fn from(e: domain::keys::KeyError) -> Self {
        match e {
            domain::keys::KeyError::Rejected(why) => ApiError::unauthorized(why),
            domain::keys::KeyError::Db(db) => ApiError::internal(db),
        }
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
