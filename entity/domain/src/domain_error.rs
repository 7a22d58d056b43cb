//! The domain's error: what a service, the address book or a gate check refuses, with the
//! stable `error.code` and the `field: problem` details, but no HTTP status. The HTTP edge maps
//! it (`From<DomainError> for ApiError` in `error.rs`, with every other mapping).

use std::fmt;

use serde::Serialize;

/// Stable `error.code` values (docs/api-decisions.md lists when each is used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ValidationError,
    Unauthorized,
    Forbidden,
    NotFound,
    InvoiceNotCancellable,
    InvoiceNotResolvable,
    ApiKeyRevoked,
    DeliveryPending,
    WebhookEndpointLimit,
    WebhookSecretsUnavailable,
    InvoiceNotActivatable,
    PayoutNotCancellable,
    PayoutNotApprovable,
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
    /// 504: the server's `request_timeout_ms` elapsed before the response was ready.
    RequestTimeout,
    InternalError,
}

/// What kind of refusal: the HTTP edge turns it into a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request is malformed (a field named in the details).
    Invalid,
    NotFound,
    /// The caller may not do this (beyond its key's permission, which the HTTP edge checks).
    Forbidden,
    /// The resource's state forbids it now.
    Conflict,
    /// Well-formed, but breaks a business rule.
    Unprocessable,
    /// A dependency (a gate, the rates) cannot serve it now.
    Unavailable,
    /// A fault of ours; `message` is the cause, for the log only.
    Internal,
}

#[derive(Debug)]
pub struct DomainError {
    pub kind: Kind,
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<String>,
}

pub type DomainResult<T> = Result<T, DomainError>;

impl DomainError {
    pub fn new(kind: Kind, code: ErrorCode, message: impl Into<String>) -> Self {
        DomainError { kind, code, message: message.into(), details: Vec::new() }
    }

    pub fn with_details(mut self, details: Vec<String>) -> Self {
        self.details = details;
        self
    }

    /// Invalid, with one `field: problem` detail.
    pub fn invalid_field(field: &str, problem: impl fmt::Display) -> Self {
        Self::validation(vec![format!("{field}: {problem}")])
    }

    /// Invalid, with several `field: problem` details.
    pub fn validation(details: Vec<String>) -> Self {
        let message = match details.as_slice() {
            [one] => format!("invalid request: {one}"),
            _ => format!("invalid request: {} problems", details.len()),
        };
        Self::new(Kind::Invalid, ErrorCode::ValidationError, message).with_details(details)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(Kind::NotFound, ErrorCode::NotFound, format!("{what} not found"))
    }

    /// Not found: the row a parameter names (a list's cursor), with one `field: problem` detail.
    pub fn not_found_field(field: &str, problem: impl fmt::Display) -> Self {
        let detail = format!("{field}: {problem}");
        Self::new(Kind::NotFound, ErrorCode::NotFound, detail.clone()).with_details(vec![detail])
    }

    /// Refused to this caller, with `field: problem` details.
    pub fn forbidden(message: impl Into<String>, details: Vec<String>) -> Self {
        Self::new(Kind::Forbidden, ErrorCode::Forbidden, message).with_details(details)
    }

    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, code, message)
    }

    /// A business rule broken by `field`'s value.
    pub fn unprocessable(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let detail = format!("{field}: {message}");
        Self::new(Kind::Unprocessable, code, message).with_details(vec![detail])
    }

    /// Business rules broken, with several `field: problem` details.
    pub fn unprocessable_many(code: ErrorCode, details: Vec<String>) -> Self {
        let message = match details.as_slice() {
            [one] => one.clone(),
            _ => format!("{} problems", details.len()),
        };
        Self::new(Kind::Unprocessable, code, message).with_details(details)
    }

    pub fn unavailable(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(Kind::Unavailable, code, message)
    }

    /// A fault of ours; the cause is logged at the edge, never shown.
    pub fn internal(cause: impl fmt::Display) -> Self {
        Self::new(Kind::Internal, ErrorCode::InternalError, cause.to_string())
    }
}

impl fmt::Display for DomainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DomainError {}

/// An unknown or ambiguous currency/network: unprocessable, naming the field.
impl From<crate::gates::ResolveError> for DomainError {
    fn from(e: crate::gates::ResolveError) -> Self {
        DomainError::unprocessable(ErrorCode::UnsupportedCurrency, e.field(), e.to_string())
    }
}

impl From<sea_orm::DbErr> for DomainError {
    fn from(e: sea_orm::DbErr) -> Self {
        DomainError::internal(e)
    }
}

impl From<sea_orm::TransactionError<DomainError>> for DomainError {
    fn from(e: sea_orm::TransactionError<DomainError>) -> Self {
        match e {
            sea_orm::TransactionError::Connection(db) => DomainError::internal(db),
            sea_orm::TransactionError::Transaction(d) => d,
        }
    }
}
