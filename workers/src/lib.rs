//! Job stages of the payment pipeline (deposit scanner, confirmation tracker, settlement
//! converter, payout executor, webhook deliverer). They reuse the `api` library's services and
//! carry only ids in their jobs; the database stays the source of truth.
//!
//! The stages are built by the pipeline issue; this crate holds their shared code.
