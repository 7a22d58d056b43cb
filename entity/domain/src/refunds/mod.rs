//! Refunds: requests and their payout mirror; `api::refunds` serves `/v1/refunds`.

pub mod mirror;
pub mod service;
pub mod types;
