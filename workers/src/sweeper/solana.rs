//! Solana sweeping (the pool's SOL, and USDC with the token account closed after it).

use super::{SweepError, Sweeper};
use domain::config::TreasuryGateConfig;
use domain::gates::Gate;

impl Sweeper {
    /// One round of a Solana gate: follows its open sweeps, then plans new ones.
    pub(super) async fn solana_round(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let _ = (gate, cfg);
        Err(SweepError::Other("Solana sweeping is not built yet".into()))
    }
}
