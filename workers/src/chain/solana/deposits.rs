//! Sweeping the Solana pool's deposit addresses (payout executor only): each pool address's
//! keypair (`[solana] deposit_keys_file`).

use domain::config::SolanaConfig;

use crate::chain::ChainError;

/// The pool addresses' keys, for sweeping.
pub struct SolanaDeposits {}

impl SolanaDeposits {
    /// `None` without `deposit_keys_file`. `pool` is `addresses.live.solana_pool`.
    pub fn load(cfg: &SolanaConfig, pool: &[String]) -> Result<Option<SolanaDeposits>, ChainError> {
        let _ = (cfg, pool);
        Err(ChainError::Unavailable("Solana sweeping is not built yet".into()))
    }
}
