//! Invoices: creation (validation, pricing, address allocation, the batched writer) and reads; `api::invoices` serves them at `/v1/invoices`.

pub mod lifecycle;
pub mod service;
pub mod types;
pub mod validate;
pub mod writer;
