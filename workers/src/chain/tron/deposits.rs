//! Sweeping the TRON deposit addresses (payout executor only): the deposit account's extended
//! private key (`[tron] deposit_key_file`, the account `m/44'/195'/0'` whose xpub is
//! `addresses.live.tron_xpub`).

use domain::config::TronConfig;

use crate::chain::ChainError;

/// The deposit account's key, for sweeping.
pub struct TronDeposits {}

impl TronDeposits {
    /// `None` without `deposit_key_file`. `expected_first` is the configured xpub's index-0
    /// address.
    pub fn load(cfg: &TronConfig, expected_first: Option<&str>) -> Result<Option<TronDeposits>, ChainError> {
        let _ = (cfg, expected_first);
        Err(ChainError::Unavailable("TRON sweeping is not built yet".into()))
    }
}
