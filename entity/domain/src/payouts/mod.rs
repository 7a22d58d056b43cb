//! Payouts: requests with their balance reservation, the lifecycle shared with the executor and the operator actions; `api::payouts` serves `/v1/payouts`.

pub mod approval;
pub mod lifecycle;
pub mod operator;
pub mod service;
pub mod types;
