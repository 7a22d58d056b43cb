//! The worker stages of the payment pipeline and what only they do: read chains, sign and
//! broadcast payouts, convert settlements, deliver webhooks. Each stage runs in its own
//! process (`src/bin/`) on the durable job platform ([`platform`]); jobs carry ids only and
//! the database stays the source of truth. The shared domain (gates, ledger, events, config,
//! database) comes from the `api` library's services.

pub mod chain;
pub mod deliver;
pub mod executor;
pub mod mail;
pub mod pipeline;
pub mod platform;
pub mod process;
pub mod settlement;
pub mod stages;
