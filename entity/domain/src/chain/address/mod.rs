//! Deposit-address derivation and payout-address validation.
//!
//! Deposit addresses are derived *watch-only* from operator account keys: the
//! service only ever holds account-level extended **public** keys, so it can
//! produce a fresh address per invoice but can never spend from it.
//!
//! | family  | source of deposit addresses                                  |
//! |---------|--------------------------------------------------------------|
//! | bitcoin | BIP84 account xpub/zpub (tpub/vpub on testnet) → `0/index` P2WPKH |
//! | evm     | BIP44 `m/44'/60'/0'` xpub → `0/index`, EIP-55 checksummed     |
//! | tron    | BIP44 `m/44'/195'/0'` xpub → `0/index`, base58check `T…`      |
//! | xrp     | one classic r-address, destination tag `index + 1`           |
//! | solana  | operator-provisioned address pool, `pool[index]`             |
//!
//! Payout destinations are checked with [`validate_address`], which applies
//! each chain's own encoding and checksum rules.
//!
//! The test environment has built-in keys (only public keys are compiled in; the seed was
//! discarded) and a deterministic Solana pool, so it works out of the box. Index allocation
//! (blocks from `derivation_counters`) is `crate::addresses`'.
//!
//! This file holds the shared types, the [`AddressDeriver`] and the [`validate_address`]
//! dispatch; each family's derivation and rules live in its own file, the account keys'
//! parsing in `keys.rs`.

use std::fmt;
use std::sync::Arc;

use ::bitcoin::bip32::Xpub;
use ::bitcoin::secp256k1::{All, Secp256k1};

mod base58;
mod bitcoin;
mod error;
mod evm;
mod keys;
mod solana;
pub mod tron;
pub mod xrp;

#[cfg(test)]
mod fixtures;

pub use error::{AddressConfigError, AddressError, DeriveError};
pub use keys::AccountKeysConfig;

use solana::SolanaSource;

// ---------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------

/// A family of chains sharing one address format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressFamily {
    Bitcoin,
    Evm,
    Tron,
    Xrp,
    Solana,
}

impl AddressFamily {
    /// Stable lowercase identifier (`"bitcoin"`, `"evm"`, `"tron"`, `"xrp"`, `"solana"`).
    pub fn as_str(&self) -> &'static str {
        match self {
            AddressFamily::Bitcoin => "bitcoin",
            AddressFamily::Evm => "evm",
            AddressFamily::Tron => "tron",
            AddressFamily::Xrp => "xrp",
            AddressFamily::Solana => "solana",
        }
    }

    /// Human name used in error messages.
    fn label(self) -> &'static str {
        match self {
            AddressFamily::Bitcoin => "Bitcoin",
            AddressFamily::Evm => "EVM",
            AddressFamily::Tron => "Tron",
            AddressFamily::Xrp => "XRP",
            AddressFamily::Solana => "Solana",
        }
    }
}

const ALL_FAMILIES: [AddressFamily; 5] =
    [AddressFamily::Bitcoin, AddressFamily::Evm, AddressFamily::Tron, AddressFamily::Xrp, AddressFamily::Solana];

/// Which network an environment runs against.
/// The live environment is `Mainnet`, the test environment is `Testnet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainNet {
    Mainnet,
    Testnet,
}

/// A derived deposit destination. `tag` is only set for XRP (destination tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedAddress {
    pub address: String,
    pub tag: Option<String>,
}

impl DerivedAddress {
    /// An address without a destination tag.
    fn plain(address: String) -> Self {
        DerivedAddress { address, tag: None }
    }
}

// ---------------------------------------------------------------------------
// Deriver
// ---------------------------------------------------------------------------

/// Parsed, validated deposit-address sources for one environment.
/// Cloning is cheap (shared `Arc`); the type is `Send + Sync`.
#[derive(Clone)]
pub struct AddressDeriver {
    inner: Arc<Inner>,
}

struct Inner {
    net: ChainNet,
    secp: Secp256k1<All>,
    /// External-chain (`…/0`) keys, one level below the configured account key.
    bitcoin: Option<Xpub>,
    evm: Option<Xpub>,
    tron: Option<Xpub>,
    xrp: Option<String>,
    solana: SolanaSource,
}

impl fmt::Debug for AddressDeriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are public but still privacy-sensitive: only show what is configured.
        let supported: Vec<&str> =
            ALL_FAMILIES.iter().filter(|fam| self.supports(**fam)).map(AddressFamily::as_str).collect();
        f.debug_struct("AddressDeriver").field("net", &self.inner.net).field("supported", &supported).finish()
    }
}

impl AddressDeriver {
    /// Parse and validate every configured key for the environment `net`.
    /// Error messages name the offending key as `{key_prefix}.{field}`.
    pub fn from_config(cfg: &AccountKeysConfig, net: ChainNet, key_prefix: &str) -> Result<Self, AddressConfigError> {
        Self::build(cfg, net, key_prefix, false)
    }

    fn build(
        cfg: &AccountKeysConfig,
        net: ChainNet,
        key_prefix: &str,
        builtin_solana: bool,
    ) -> Result<Self, AddressConfigError> {
        let secp = Secp256k1::new();
        let key = |field: &str| {
            if key_prefix.is_empty() { field.to_owned() } else { format!("{key_prefix}.{field}") }
        };
        let account_key = |value: &Option<String>, field: &str, versions| {
            configured(value.as_ref())
                .map(|s| keys::parse_account_xpub(&secp, s, &key(field), versions, net))
                .transpose()
        };

        let bitcoin = account_key(&cfg.bitcoin_xpub, "bitcoin_xpub", bitcoin::account_versions(net))?;
        let evm = account_key(&cfg.evm_xpub, "evm_xpub", keys::ACCOUNT_VERSIONS_XPUB_ONLY)?;
        let tron = account_key(&cfg.tron_xpub, "tron_xpub", keys::ACCOUNT_VERSIONS_XPUB_ONLY)?;
        let xrp = match configured(cfg.xrp_address.as_ref()) {
            Some(s) => {
                validate_address(AddressFamily::Xrp, net, s, None)
                    .map_err(|reason| AddressConfigError::InvalidAddress { key: key("xrp_address"), reason })?;
                Some(s.to_owned())
            }
            None => None,
        };
        let pool = solana::parse_pool(&cfg.solana_pool, net, key)?;

        Ok(Self {
            inner: Arc::new(Inner {
                net,
                secp,
                bitcoin,
                evm,
                tron,
                xrp,
                solana: if builtin_solana { SolanaSource::BuiltinTest } else { SolanaSource::Pool(pool) },
            }),
        })
    }

    /// Built-in keys for the test environment (`ChainNet::Testnet`), so it works
    /// without any configuration. Solana addresses are generated per index:
    /// the ed25519 public key of the signing key
    /// `sha256("paygate-test-solana" || index as u64 big-endian)`.
    pub fn builtin_test() -> Self {
        let cfg = AccountKeysConfig {
            bitcoin_xpub: Some(bitcoin::BUILTIN_TEST_VPUB.to_owned()),
            evm_xpub: Some(evm::BUILTIN_TEST_XPUB.to_owned()),
            tron_xpub: Some(tron::BUILTIN_TEST_XPUB.to_owned()),
            xrp_address: Some(xrp::BUILTIN_TEST_ADDRESS.to_owned()),
            solana_pool: Vec::new(),
        };
        Self::build(&cfg, ChainNet::Testnet, "builtin_test", true)
            .expect("built-in test keys are compile-time constants and valid")
    }

    /// Whether `family` can produce deposit addresses in this environment.
    pub fn supports(&self, family: AddressFamily) -> bool {
        let inner = &self.inner;
        match family {
            AddressFamily::Bitcoin => inner.bitcoin.is_some(),
            AddressFamily::Evm => inner.evm.is_some(),
            AddressFamily::Tron => inner.tron.is_some(),
            AddressFamily::Xrp => inner.xrp.is_some(),
            AddressFamily::Solana => inner.solana.is_configured(),
        }
    }

    /// Deposit address number `index` (external chain `0/index` of the account key).
    pub fn derive(&self, family: AddressFamily, index: u64) -> Result<DerivedAddress, DeriveError> {
        let inner = &*self.inner;
        let not_configured = DeriveError::NotConfigured { family };
        match family {
            AddressFamily::Bitcoin => {
                bitcoin::derive(&inner.secp, inner.bitcoin.as_ref().ok_or(not_configured)?, inner.net, index)
            }
            AddressFamily::Evm => evm::derive(&inner.secp, inner.evm.as_ref().ok_or(not_configured)?, index),
            AddressFamily::Tron => tron::derive(&inner.secp, inner.tron.as_ref().ok_or(not_configured)?, index),
            AddressFamily::Xrp => xrp::derive(inner.xrp.as_ref().ok_or(not_configured)?, index),
            AddressFamily::Solana => inner.solana.derive(index),
        }
    }
}

/// `Some(trimmed)` for a non-blank configured value.
fn configured(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).map(str::trim).filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// Validate a payout/refund destination with the chain's own rules.
///
/// * bitcoin: SegWit v0 (bech32) / v1 Taproot (bech32m), legacy base58 P2PKH/P2SH,
///   on the environment's network (mainnet `bc1`/`1`/`3`, testnet `tb1`/`m`/`n`/`2`).
/// * evm: `0x` + 40 hex digits; mixed case must match the EIP-55 checksum.
/// * tron: base58check, `0x41` prefix, 21 bytes.
/// * xrp: classic r-address with a valid checksum; the tag, if any, must be a `u32`.
/// * solana: base58 decoding to exactly 32 bytes.
///
/// Only XRP takes a tag.
pub fn validate_address(
    family: AddressFamily,
    net: ChainNet,
    address: &str,
    tag: Option<&str>,
) -> Result<(), AddressError> {
    if address.is_empty() {
        return Err(AddressError::Empty);
    }
    if address.chars().any(char::is_whitespace) {
        return Err(AddressError::Whitespace);
    }
    if family != AddressFamily::Xrp && tag.is_some() {
        return Err(AddressError::TagNotAllowed { family });
    }
    match family {
        AddressFamily::Bitcoin => bitcoin::validate(net, address),
        AddressFamily::Evm => evm::validate(address),
        AddressFamily::Tron => tron::validate(address),
        AddressFamily::Xrp => {
            xrp::validate(address)?;
            match tag {
                Some(t) => xrp::validate_tag(t),
                None => Ok(()),
            }
        }
        AddressFamily::Solana => solana::validate(address),
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn family_names() {
        let names: Vec<_> = ALL_FAMILIES.iter().map(|f| f.as_str()).collect();
        assert_eq!(names, ["bitcoin", "evm", "tron", "xrp", "solana"]);
    }

    #[test]
    fn deriver_is_send_sync_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<AddressDeriver>();
        let d = AddressDeriver::builtin_test();
        let d2 = d.clone();
        assert!(Arc::ptr_eq(&d.inner, &d2.inner));
        let shown = format!("{d:?}");
        assert!(shown.contains("Testnet") && !shown.contains("vpub"), "{shown}");
    }

    #[test]
    fn builtin_test_supports_every_family() {
        let d = AddressDeriver::builtin_test();
        for fam in ALL_FAMILIES {
            assert!(d.supports(fam), "{fam:?}");
        }
    }

    #[test]
    fn every_derived_address_validates() {
        for (d, net) in [(AddressDeriver::builtin_test(), ChainNet::Testnet), (mainnet(), ChainNet::Mainnet)] {
            for fam in ALL_FAMILIES {
                for i in [0, 1, 2, 7, 1000] {
                    let Ok(derived) = d.derive(fam, i) else {
                        assert!(fam == AddressFamily::Solana && net == ChainNet::Mainnet);
                        continue;
                    };
                    validate_address(fam, net, &derived.address, derived.tag.as_deref())
                        .unwrap_or_else(|e| panic!("{fam:?} {i} {derived:?}: {e}"));
                }
            }
        }
    }

    #[test]
    fn unconfigured_families_are_unsupported() {
        let empty = AddressDeriver::from_config(
            &AccountKeysConfig { bitcoin_xpub: Some("   ".into()), ..Default::default() },
            ChainNet::Mainnet,
            "addresses.live",
        )
        .unwrap();
        for fam in ALL_FAMILIES {
            assert!(!empty.supports(fam));
            assert_eq!(empty.derive(fam, 0).unwrap_err(), DeriveError::NotConfigured { family: fam });
        }
    }

    #[test]
    fn bad_config_values_name_their_key() {
        let cases: Vec<(AccountKeysConfig, &str)> = vec![
            (
                AccountKeysConfig { evm_xpub: Some(flip(ABANDON_EVM_XPUB, 50)), ..Default::default() },
                "addresses.live.evm_xpub",
            ),
            (
                AccountKeysConfig { tron_xpub: Some(ABANDON_ZPUB.into()), ..Default::default() },
                "addresses.live.tron_xpub",
            ),
            (
                AccountKeysConfig {
                    xrp_address: Some(flip("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh", 10)),
                    ..Default::default()
                },
                "addresses.live.xrp_address",
            ),
            (
                AccountKeysConfig {
                    solana_pool: vec!["DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT".into(), "0xnotsolana".into()],
                    ..Default::default()
                },
                "addresses.live.solana_pool[1]",
            ),
            (
                AccountKeysConfig {
                    solana_pool: vec![
                        "DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT".into(),
                        "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn".into(),
                        "DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT".into(),
                    ],
                    ..Default::default()
                },
                "addresses.live.solana_pool[2]",
            ),
        ];
        for (cfg, key) in cases {
            let msg = config_error(&cfg, ChainNet::Mainnet);
            assert!(msg.starts_with(key), "{key}: {msg}");
        }
    }
}
