//! The live chain families, listed once. Each entry says how the family's watch-only adapters
//! ([`Chains`]) and its hot-wallet signer ([`Signers`]) come from configuration; the deposit
//! scanner, the tracker and the payout executor all build theirs from this list. Adding a chain
//! family is one entry here, beside its adapter module, its `[section]` in `domain::config` and
//! its `AddressFamily` in the domain (whose exhaustive matches name every place that decides
//! from configuration alone: address derivation and gate availability).

use std::sync::Arc;

use domain::config::Config;

use super::signer::Signers;
use super::{Chain, ChainError, Chains, bitcoin, evm, solana, tron, xrp};

/// One live chain family.
pub struct Family {
    /// Its configuration section.
    pub section: &'static str,
    /// Its live adapters; none when the section names no node.
    pub watch: fn(&Config) -> Vec<Arc<dyn Chain>>,
    /// `signers` with the family's hot wallet on its live gates, when a key is configured.
    pub sign: fn(Signers, &Config) -> Result<Signers, ChainError>,
}

/// Every live chain family.
pub const FAMILIES: [Family; 5] = [
    Family { section: "evm", watch: |c| evm::chains(&c.evm), sign: |s, c| s.with_evm(&c.evm) },
    Family {
        section: "bitcoin",
        watch: |c| bitcoin::chains(&c.bitcoin),
        sign: |s, c| s.with_bitcoin(&c.bitcoin, &c.addresses.live),
    },
    Family { section: "tron", watch: |c| tron::chains(&c.tron), sign: |s, c| s.with_tron(&c.tron) },
    Family { section: "solana", watch: |c| solana::chains(&c.solana), sign: |s, c| s.with_solana(&c.solana) },
    Family {
        section: "xrp",
        watch: |c| xrp::chains(&c.xrp, c.addresses.live.xrp_address.as_deref()),
        sign: |s, c| s.with_xrp(&c.xrp),
    },
];

impl Chains {
    /// Adds every live chain the configuration names a node for (each family's section).
    pub fn with_live(mut self, cfg: &Config) -> Chains {
        for family in &FAMILIES {
            for chain in (family.watch)(cfg) {
                self.insert(entity::Environment::Live, chain);
            }
        }
        self
    }
}

impl Signers {
    /// The sandbox signer on every test gate and each family's hot wallet on its live gates
    /// where a key is configured. Only the payout executor's process calls this: it is where
    /// hot-wallet keys are loaded.
    pub fn from_config(cfg: &Config) -> Result<Signers, ChainError> {
        FAMILIES.iter().try_fold(Signers::sandbox(), |signers, family| (family.sign)(signers, cfg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_family_with_live_gates_has_one_entry() {
        use domain::chain::address::AddressFamily;
        let sections: Vec<&str> = FAMILIES.iter().map(|f| f.section).collect();
        for family in
            [AddressFamily::Bitcoin, AddressFamily::Evm, AddressFamily::Tron, AddressFamily::Solana, AddressFamily::Xrp]
        {
            let section = match family {
                AddressFamily::Bitcoin => "bitcoin",
                AddressFamily::Evm => "evm",
                AddressFamily::Tron => "tron",
                AddressFamily::Solana => "solana",
                AddressFamily::Xrp => "xrp",
            };
            assert_eq!(sections.iter().filter(|s| **s == section).count(), 1, "{section}");
        }
        assert_eq!(sections.len(), 5);
    }
}
