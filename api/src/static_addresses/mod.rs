//! The static address resource: `/v1/addresses` (spec 4.12).
//!
//! A static address is a permanent deposit address of one gate; each deposit to it creates an
//! invoice (`source = static_address`). Creating one needs `addresses:write`; reading, including
//! the invoices of an address, needs `addresses:read` (docs/api-decisions.md).

pub mod service;
pub mod types;

// The HTTP face (feature `http`): handlers, router, OpenAPI paths and envelopes.
#[cfg(feature = "http")]
mod routes;
#[cfg(feature = "http")]
pub use routes::*;
