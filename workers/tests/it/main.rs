//! The workers crate's integration suites, one module per suite, in one test binary (one link,
//! one process: what is process-wide is shared, so every suite builds its own app, database and
//! queue prefix). The suites that need node software are selected by features: `anvil-tests`,
//! `regtest-tests`, `litesvm-tests`; `redis-tests` and `pg-tests` move the job platform and the
//! database onto Redis and PostgreSQL. The crash suites, whose fail points are process-wide, are
//! the `crash` binary.

#[path = "../common/mod.rs"]
#[allow(dead_code)] // each suite uses part of it
mod common;
#[path = "../support/mod.rs"]
mod support;

mod bitcoin_payouts_e2e;
mod bitcoin_regtest;
mod bitcoin_sweeps;
mod bulk_insert;
mod deliverer;
mod evm_anvil;
mod evm_anvil_payouts;
mod evm_history;
mod evm_payouts_e2e;
mod evm_sweeps;
mod fault_e2e;
mod fiat_at_credit;
mod invoice_moves;
mod invoice_resolve;
mod invoice_table_e2e;
mod open_rows;
mod payer_email;
mod payout_execution;
mod payout_verdicts;
mod payouts_e2e;
mod pipeline;
mod pipeline_e2e;
mod pipeline_live;
mod platform;
mod retention;
mod rpc_redaction;
mod settlement;
mod settlement_e2e;
mod settlement_live;
mod solana_litesvm;
mod solana_live;
mod solana_payouts;
mod solana_sweeps;
mod test_reversal_e2e;
mod treasury_report;
mod tron_live;
mod tron_payouts;
mod tron_sweeps;
mod tron_trc20_anvil;
mod webhooks_e2e;
mod xrp_live;
mod xrp_payouts;
