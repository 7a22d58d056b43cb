//! Job stages of the payment pipeline (deposit scanner, confirmation tracker, settlement
//! converter, payout executor, webhook deliverer). They reuse the `api` library's services and
//! carry only ids in their jobs; the database stays the source of truth.
//!
//! [`platform`] is the durable job platform the stages run on: typed jobs, Redis or SQLite
//! queues, retries with backoff, dead letters and their replay, metrics and health endpoints.

pub mod platform;
pub mod process;
pub mod stages;
