//! Invoices: creation (validation, pricing, address allocation, the batched writer), reads,
//! their status moves (`lifecycle`) and the payer's checkout actions (`checkout`: activation,
//! simulated payments); `api::invoices` serves them at `/v1/invoices`, `api::checkout` at
//! `/checkout`.

pub mod checkout;
pub mod lifecycle;
pub mod service;
pub mod types;
pub mod validate;
pub mod writer;
