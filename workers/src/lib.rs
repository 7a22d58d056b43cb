//! The worker stages of the payment pipeline and what only they do: read chains, sign and
//! broadcast payouts, convert settlements, deliver webhooks. One folder per stage binary, named
//! as the stage, holding its rules and its jobs (`job.rs`); each binary's `main` is
//! `src/bin/<binary>.rs`, the worker process around its stage:
//!
//! | folder | binary | what it does |
//! |---|---|---|
//! | [`scanner`] | `deposit-scanner` | records transfers to watched addresses as payments |
//! | [`tracker`] | `confirmation-tracker` | follows payments to their credit or reversal; expiry |
//! | [`converter`] | `settlement-converter` | converts credited payments to the settlement asset |
//! | [`executor`] | `payout-executor` | signs, broadcasts and judges payouts and refunds |
//! | [`deliverer`] | `webhook-deliverer` | signs and delivers webhooks; payer e-mail |
//!
//! Beside them: [`platform`] (the durable job platform: typed jobs on Redis or SQLite queues),
//! [`stages`] (which stage consumes which queue; each stage's typed context built and started),
//! [`context`] (what every stage's context holds), [`process`] (a worker
//! process: ops HTTP, signals), [`chain`] (chain adapters and hot-wallet signers) and
//! [`pipeline`] (what the scanner and the tracker share). Jobs carry ids only and the database
//! stays the source of truth; the shared domain (gates, ledger, events, config) is `domain`.

pub mod chain;
pub mod context;
pub mod converter;
pub mod deliverer;
pub mod executor;
pub mod pipeline;
pub mod platform;
pub mod process;
pub mod scanner;
pub mod stages;
pub mod sweeper;
pub mod tracker;
pub mod treasury;
