//! `[addresses]`: the operator's account keys per environment.

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::chain::address::{AccountKeysConfig, AddressConfigError, AddressDeriver, ChainNet};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AddressesConfig {
    /// Operator account public keys for the live environment. A family without a key makes its
    /// live gates `offline`.
    pub live: AccountKeysConfig,
    /// Test environment keys; empty = the built-in test keys.
    pub test: Option<AccountKeysConfig>,
}

impl AddressesConfig {
    /// Every configured key parses for its environment's network.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let bad_keys = |e: AddressConfigError| ConfigError::Invalid { key: e.key().to_owned(), message: e.to_string() };
        AddressDeriver::from_config(&self.live, ChainNet::Mainnet, "addresses.live").map_err(bad_keys)?;
        if let Some(test) = &self.test {
            AddressDeriver::from_config(test, ChainNet::Testnet, "addresses.test").map_err(bad_keys)?;
        }
        Ok(())
    }
}
