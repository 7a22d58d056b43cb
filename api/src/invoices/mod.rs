//! The invoice resource: `/v1/invoices`.

pub mod service;
pub mod types;
pub mod validate;
pub mod writer;

// The HTTP face (feature `http`): handlers, router, OpenAPI paths and envelopes.
#[cfg(feature = "http")]
mod routes;
#[cfg(feature = "http")]
pub use routes::*;
