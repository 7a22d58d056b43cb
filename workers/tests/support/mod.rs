//! Support shared by this crate's suites: the step-by-step `pipe` of `pipeline`, `pipeline_live`
//! and `settlement`, with the pipeline suites' own `steps` and `scripted` chain; for the live
//! chain suites, the `live` app stepping the live pipeline, the fake TRON, Solana and XRP nodes of
//! `tron_live`, `solana_live` and `xrp_live` (served by `fake_node`), the Litecoin Core regtest
//! nodes of `bitcoin_regtest`, and its hot-wallet payouts (`btc_payouts`); the EVM suites' app on
//! anvil (`evm_node`); and for every suite, whether the tracker still has work for a payment
//! (`tracking`). The `it` and `crash` test binaries include it and each suite uses what it needs.
#![allow(dead_code)]

pub mod btc_payouts;
pub mod evm_node;
pub mod fake_node;
pub mod interleave;
pub mod litecoind;
pub mod litesvm;
pub mod live;
pub mod payouts;
pub mod pipe;
pub mod scripted;
pub mod smtp_sink;
pub mod solana_node;
pub mod solana_payouts;
pub mod solana_sweeps;
pub mod steps;
pub mod sweeps;
pub mod tracking;
pub mod tron_node;
pub mod tron_payouts;
pub mod tron_sweeps;
pub mod xrp_node;
pub mod xrp_payouts;
