//! The payout crash suites (feature `failpoints`): the executor killed at a fail point around
//! the broadcast, chain by chain. Fail points are process-wide, so these suites are a binary of
//! their own, and its tests take turns ([`support::payouts::fail_points_alone`]): an armed
//! point is met only by the executor of the test that armed it.

#[path = "../support/mod.rs"]
mod support;

mod bitcoin_payout_crash;
mod bitcoin_sweep_crash;
mod evm_sweep_crash;
mod solana_payout_crash;
mod solana_sweep_crash;
mod tron_payout_crash;
mod tron_sweep_crash;
mod xrp_payout_crash;
