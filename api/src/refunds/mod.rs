//! The refund resource: `/v1/refunds`.

pub mod mirror;
pub mod service;
pub mod types;

// The HTTP face (feature `http`): handlers, router, OpenAPI paths and envelopes.
#[cfg(feature = "http")]
mod routes;
#[cfg(feature = "http")]
pub use routes::*;
