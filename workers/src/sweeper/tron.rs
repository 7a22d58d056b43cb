//! TRON sweeping (TRX, and TRC-20 USDT with its energy topped up from the hot wallet).

use super::{SweepError, Sweeper};
use domain::config::TreasuryGateConfig;
use domain::gates::Gate;

impl Sweeper {
    /// One round of a TRON gate: follows its open sweeps, then plans new ones.
    pub(super) async fn tron_round(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let _ = (gate, cfg);
        Err(SweepError::Other("TRON sweeping is not built yet".into()))
    }
}
