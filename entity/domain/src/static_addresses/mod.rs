//! Static addresses (spec 4.12), served by `api::static_addresses` at `/v1/addresses`.
//!
//! A static address is a permanent deposit address of one gate; each deposit to it creates an
//! invoice (`source = static_address`). Creating one needs `addresses:write`; reading, including
//! the invoices of an address, needs `addresses:read` (docs/api-decisions.md).

pub mod service;
pub mod types;
