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

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bitcoin::bip32::{ChildNumber, Xpub};
use bitcoin::secp256k1::{Secp256k1, VerifyOnly};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// Which network an environment runs against.
/// The live environment is `Mainnet`, the test environment is `Testnet`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainNet {
    Mainnet,
    Testnet,
}

/// Operator configuration of the deposit-address sources for one environment.
///
/// Empty (or whitespace-only) strings are treated as "not configured".
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct AccountKeysConfig {
    /// Account-level extended public key, `m/84'/0'/0'` (live: xpub/zpub) or
    /// `m/84'/1'/0'` (test: tpub/vpub).
    pub bitcoin_xpub: Option<String>,
    /// Account-level `m/44'/60'/0'` xpub.
    pub evm_xpub: Option<String>,
    /// Account-level `m/44'/195'/0'` xpub.
    pub tron_xpub: Option<String>,
    /// One classic r-address; every invoice gets its own destination tag.
    pub xrp_address: Option<String>,
    /// Operator-provisioned base58 addresses; invoice index `i` uses `pool[i]`.
    pub solana_pool: Vec<String>,
}

/// A derived deposit destination. `tag` is only set for XRP (destination tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedAddress {
    pub address: String,
    pub tag: Option<String>,
}

/// A configuration value could not be used. The message always names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressConfigError {
    #[error("{key}: {reason}")]
    InvalidKey { key: String, reason: String },
    #[error("{key}: this is a {found} key, but this environment runs on {expected} and needs {accepted}")]
    WrongNetwork { key: String, found: &'static str, expected: &'static str, accepted: &'static str },
    #[error("{key}: {reason}")]
    InvalidAddress { key: String, reason: AddressError },
    #[error("{key}: this address is already listed at {first_key}; every pool address must be unique")]
    DuplicatePoolEntry { key: String, first_key: String },
}

impl AddressConfigError {
    /// The configuration key the problem is about (`addresses.live.bitcoin_xpub`).
    pub fn key(&self) -> &str {
        match self {
            AddressConfigError::InvalidKey { key, .. }
            | AddressConfigError::WrongNetwork { key, .. }
            | AddressConfigError::InvalidAddress { key, .. }
            | AddressConfigError::DuplicatePoolEntry { key, .. } => key,
        }
    }
}

/// A deposit address could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeriveError {
    #[error("{} deposit addresses are not configured for this environment", .family.label())]
    NotConfigured { family: AddressFamily },
    #[error("index {index} is too large for {} deposit addresses (the maximum is {max})", .family.label())]
    IndexOutOfRange { family: AddressFamily, index: u64, max: u64 },
    #[error(
        "the Solana address pool has {size} addresses, so index {index} has none; provision more addresses in solana_pool"
    )]
    PoolExhausted { index: u64, size: usize },
    #[error("could not derive the {} address for index {index}: {reason}", .family.label())]
    Derivation { family: AddressFamily, index: u64, reason: String },
}

/// A destination address (or tag) is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("the address is empty")]
    Empty,
    #[error("the address contains spaces or other whitespace")]
    Whitespace,
    #[error("{} addresses do not take a destination tag", .family.label())]
    TagNotAllowed { family: AddressFamily },
    #[error("the destination tag {tag:?} is not valid: it must be a whole number from 0 to 4294967295")]
    InvalidTag { tag: String },
    #[error("the {} address checksum does not match, so it probably contains a typo", .family.label())]
    BadChecksum { family: AddressFamily },
    #[error("this is a {found} Bitcoin address, but a {expected} address is required")]
    WrongNetwork { found: &'static str, expected: &'static str },
    #[error("not a valid {} address: {reason}", .family.label())]
    Invalid { family: AddressFamily, reason: String },
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
    secp: Secp256k1<VerifyOnly>,
    /// External-chain (`…/0`) keys, one level below the configured account key.
    bitcoin: Option<Xpub>,
    evm: Option<Xpub>,
    tron: Option<Xpub>,
    xrp: Option<String>,
    solana: SolanaSource,
}

enum SolanaSource {
    Pool(Vec<String>),
    /// Deterministic keys for the test environment, generated per index.
    BuiltinTest,
}

impl fmt::Debug for AddressDeriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are public but still privacy-sensitive: only show what is configured.
        let supported: Vec<&str> =
            ALL_FAMILIES.iter().filter(|fam| self.supports(**fam)).map(AddressFamily::as_str).collect();
        f.debug_struct("AddressDeriver").field("net", &self.inner.net).field("supported", &supported).finish()
    }
}

const ALL_FAMILIES: [AddressFamily; 5] =
    [AddressFamily::Bitcoin, AddressFamily::Evm, AddressFamily::Tron, AddressFamily::Xrp, AddressFamily::Solana];

/// Built-in test-environment keys. Only account-level public keys are embedded;
/// the seed they come from was generated at random once and not kept.
/// `m/84'/1'/0'`
const BUILTIN_TEST_BITCOIN_VPUB: &str =
    "vpub5ZgnJBR6ciJxuvY9dTxf9g3FdBX1eCPXhzeYN5BDKfDL2E8XRFXKX68eCQP89T3HRi2sRkG7beQdgbUUCUL7eWpGyhn4A5mNWzudWRiNb6E";
/// `m/44'/60'/0'`
const BUILTIN_TEST_EVM_XPUB: &str =
    "xpub6D6JeLSjLwEYdf6L6RMGSiHFc4z3xUu8V8oQN1ag7PcBUR1Ckou41GF4L9zyv6sXL7qjGwBZVW6RwvRnifwRow9yBdfp5LzFXcrSjy5SKfb";
/// `m/44'/195'/0'`
const BUILTIN_TEST_TRON_XPUB: &str =
    "xpub6D6t97EK4FUvSRbpmwzCwK9gX6oguPJ3s4WRSd1LbhxvP2LCQoHqt7zPjfN7mywpa5jLktx4F8CstFpWE2iQLew8qzDmvssCsqJ9HRqcVQ9";
/// `m/44'/144'/0'/0/0` of the same seed.
const BUILTIN_TEST_XRP_ADDRESS: &str = "rnx3ewPA7jk2LgdUvnyJZaLSYk1LwvRp2m";
/// Domain separator of the built-in Solana test pool.
const BUILTIN_TEST_SOLANA_DOMAIN: &[u8] = b"paygate-test-solana";

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
        let secp = Secp256k1::verification_only();
        let key = |field: &str| {
            if key_prefix.is_empty() { field.to_owned() } else { format!("{key_prefix}.{field}") }
        };

        let bitcoin = match configured(cfg.bitcoin_xpub.as_ref()) {
            Some(s) => Some(parse_account_xpub(&secp, s, &key("bitcoin_xpub"), bitcoin_versions(net), net)?),
            None => None,
        };
        let evm = match configured(cfg.evm_xpub.as_ref()) {
            Some(s) => Some(parse_account_xpub(&secp, s, &key("evm_xpub"), ACCOUNT_VERSIONS_XPUB_ONLY, net)?),
            None => None,
        };
        let tron = match configured(cfg.tron_xpub.as_ref()) {
            Some(s) => Some(parse_account_xpub(&secp, s, &key("tron_xpub"), ACCOUNT_VERSIONS_XPUB_ONLY, net)?),
            None => None,
        };
        let xrp = match configured(cfg.xrp_address.as_ref()) {
            Some(s) => {
                validate_address(AddressFamily::Xrp, net, s, None)
                    .map_err(|reason| AddressConfigError::InvalidAddress { key: key("xrp_address"), reason })?;
                Some(s.to_owned())
            }
            None => None,
        };

        let mut pool = Vec::with_capacity(cfg.solana_pool.len());
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(cfg.solana_pool.len());
        for (i, raw) in cfg.solana_pool.iter().enumerate() {
            let entry = raw.trim();
            let entry_key = key(&format!("solana_pool[{i}]"));
            validate_address(AddressFamily::Solana, net, entry, None)
                .map_err(|reason| AddressConfigError::InvalidAddress { key: entry_key.clone(), reason })?;
            if let Some(first) = seen.insert(entry, i) {
                return Err(AddressConfigError::DuplicatePoolEntry {
                    key: entry_key,
                    first_key: key(&format!("solana_pool[{first}]")),
                });
            }
            pool.push(entry.to_owned());
        }

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
            bitcoin_xpub: Some(BUILTIN_TEST_BITCOIN_VPUB.to_owned()),
            evm_xpub: Some(BUILTIN_TEST_EVM_XPUB.to_owned()),
            tron_xpub: Some(BUILTIN_TEST_TRON_XPUB.to_owned()),
            xrp_address: Some(BUILTIN_TEST_XRP_ADDRESS.to_owned()),
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
            AddressFamily::Solana => match &inner.solana {
                SolanaSource::Pool(pool) => !pool.is_empty(),
                SolanaSource::BuiltinTest => true,
            },
        }
    }

    /// Deposit address number `index` (external chain `0/index` of the account key).
    pub fn derive(&self, family: AddressFamily, index: u64) -> Result<DerivedAddress, DeriveError> {
        let inner = &*self.inner;
        let not_configured = DeriveError::NotConfigured { family };
        match family {
            AddressFamily::Bitcoin => {
                let chain = inner.bitcoin.as_ref().ok_or(not_configured)?;
                let child = derive_child(&inner.secp, chain, family, index)?;
                let network = match inner.net {
                    ChainNet::Mainnet => bitcoin::Network::Bitcoin,
                    ChainNet::Testnet => bitcoin::Network::Testnet,
                };
                let address = bitcoin::Address::p2wpkh(&child.to_pub(), network);
                Ok(plain(address.to_string()))
            }
            AddressFamily::Evm => {
                let chain = inner.evm.as_ref().ok_or(not_configured)?;
                let child = derive_child(&inner.secp, chain, family, index)?;
                Ok(plain(evm_address(&child).to_checksum(None)))
            }
            AddressFamily::Tron => {
                let chain = inner.tron.as_ref().ok_or(not_configured)?;
                let child = derive_child(&inner.secp, chain, family, index)?;
                let mut payload = [0u8; 21];
                payload[0] = TRON_PREFIX;
                payload[1..].copy_from_slice(evm_address(&child).as_slice());
                Ok(plain(bs58::encode(payload).with_check().into_string()))
            }
            AddressFamily::Xrp => {
                let address = inner.xrp.as_ref().ok_or(not_configured)?;
                let max = u64::from(u32::MAX) - 1;
                if index > max {
                    return Err(DeriveError::IndexOutOfRange { family, index, max });
                }
                Ok(DerivedAddress { address: address.clone(), tag: Some((index + 1).to_string()) })
            }
            AddressFamily::Solana => match &inner.solana {
                SolanaSource::Pool(pool) if pool.is_empty() => Err(not_configured),
                SolanaSource::Pool(pool) => usize::try_from(index)
                    .ok()
                    .and_then(|i| pool.get(i))
                    .map(|a| plain(a.clone()))
                    .ok_or(DeriveError::PoolExhausted { index, size: pool.len() }),
                SolanaSource::BuiltinTest => Ok(plain(builtin_test_solana_address(index))),
            },
        }
    }
}

fn plain(address: String) -> DerivedAddress {
    DerivedAddress { address, tag: None }
}

/// `Some(trimmed)` for a non-blank configured value.
fn configured(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).map(str::trim).filter(|s| !s.is_empty())
}

fn builtin_test_solana_address(index: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(BUILTIN_TEST_SOLANA_DOMAIN);
    hasher.update(index.to_be_bytes());
    let secret: [u8; 32] = hasher.finalize().into();
    let public = ed25519_dalek::SigningKey::from_bytes(&secret).verifying_key();
    bs58::encode(public.as_bytes()).into_string()
}

/// Non-hardened child `index` of an external-chain key.
fn derive_child(
    secp: &Secp256k1<VerifyOnly>,
    chain: &Xpub,
    family: AddressFamily,
    index: u64,
) -> Result<Xpub, DeriveError> {
    const MAX_NORMAL: u64 = (1 << 31) - 1;
    let child = u32::try_from(index)
        .ok()
        .and_then(|i| ChildNumber::from_normal_idx(i).ok())
        .ok_or(DeriveError::IndexOutOfRange { family, index, max: MAX_NORMAL })?;
    chain.ckd_pub(secp, child).map_err(|e| DeriveError::Derivation { family, index, reason: e.to_string() })
}

/// Ethereum-style account id: last 20 bytes of keccak256(uncompressed pubkey without 0x04).
fn evm_address(key: &Xpub) -> alloy_primitives::Address {
    let uncompressed = key.public_key.serialize_uncompressed();
    alloy_primitives::Address::from_raw_public_key(&uncompressed[1..])
}

// ---------------------------------------------------------------------------
// Extended public keys
// ---------------------------------------------------------------------------

type Version = [u8; 4];
const VERSION_XPUB: Version = [0x04, 0x88, 0xB2, 0x1E];
const VERSION_ZPUB: Version = [0x04, 0xB2, 0x47, 0x46];
const VERSION_TPUB: Version = [0x04, 0x35, 0x87, 0xCF];
const VERSION_VPUB: Version = [0x04, 0x5F, 0x1C, 0xF6];

/// Accepted version bytes of one config key, for one environment.
#[derive(Clone, Copy)]
struct AcceptedVersions {
    /// Accepted versions with their names.
    accepted: &'static [(Version, &'static str)],
    /// Human list of the accepted prefixes.
    accepted_label: &'static str,
    /// Versions that are well-formed but belong to the other network.
    wrong_net: &'static [(Version, &'static str)],
}

const ACCOUNT_VERSIONS_XPUB_ONLY: AcceptedVersions =
    AcceptedVersions { accepted: &[(VERSION_XPUB, "xpub")], accepted_label: "an xpub", wrong_net: &[] };

fn bitcoin_versions(net: ChainNet) -> AcceptedVersions {
    const MAIN: &[(Version, &str)] = &[(VERSION_XPUB, "xpub"), (VERSION_ZPUB, "zpub")];
    const TEST: &[(Version, &str)] = &[(VERSION_TPUB, "tpub"), (VERSION_VPUB, "vpub")];
    match net {
        ChainNet::Mainnet => AcceptedVersions { accepted: MAIN, accepted_label: "an xpub or zpub", wrong_net: TEST },
        ChainNet::Testnet => AcceptedVersions { accepted: TEST, accepted_label: "a tpub or vpub", wrong_net: MAIN },
    }
}

/// Well-known versions that are recognisably wrong for this purpose.
fn describe_other_version(version: Version) -> Option<&'static str> {
    Some(match version {
        [0x04, 0x88, 0xAD, 0xE4] => "private xprv",
        [0x04, 0x35, 0x83, 0x94] => "private tprv",
        [0x04, 0xB2, 0x43, 0x0C] => "private zprv",
        [0x04, 0x5F, 0x18, 0xBC] => "private vprv",
        [0x04, 0x9D, 0x78, 0x78] => "private yprv",
        [0x04, 0x4A, 0x4E, 0x28] => "private uprv",
        [0x04, 0x9D, 0x7C, 0xB2] => "ypub (BIP49 nested SegWit)",
        [0x04, 0x4A, 0x52, 0x62] => "upub (BIP49 nested SegWit)",
        [0x04, 0x35, 0x87, 0xCF] => "tpub",
        [0x04, 0x5F, 0x1C, 0xF6] => "vpub",
        [0x04, 0xB2, 0x47, 0x46] => "zpub",
        _ => return None,
    })
}

/// Parse an account-level extended public key and return its external chain (`/0`) key.
/// The key itself is never echoed in errors.
fn parse_account_xpub(
    secp: &Secp256k1<VerifyOnly>,
    text: &str,
    key: &str,
    versions: AcceptedVersions,
    net: ChainNet,
) -> Result<Xpub, AddressConfigError> {
    let invalid = |reason: String| AddressConfigError::InvalidKey { key: key.to_owned(), reason };
    let mut raw = bs58::decode(text).with_check(None).into_vec().map_err(|e| {
        invalid(match e {
            bs58::decode::Error::InvalidChecksum { .. } => {
                "the extended public key checksum does not match (is it truncated or mistyped?)".to_owned()
            }
            other => format!("not a base58check extended public key ({other})"),
        })
    })?;
    if raw.len() != 78 {
        return Err(invalid(format!("not an extended public key (decoded to {} bytes, expected 78)", raw.len())));
    }
    let version: Version = [raw[0], raw[1], raw[2], raw[3]];

    if !versions.accepted.iter().any(|(v, _)| *v == version) {
        if let Some((_, name)) = versions.wrong_net.iter().find(|(v, _)| *v == version) {
            return Err(AddressConfigError::WrongNetwork {
                key: key.to_owned(),
                found: name,
                expected: net_name(net),
                accepted: versions.accepted_label,
            });
        }
        let reason = match describe_other_version(version) {
            Some(kind) if kind.starts_with("private") => format!(
                "this is a {kind} key; configure the account-level extended PUBLIC key ({}) instead, never a private key",
                versions.accepted_label
            ),
            Some(kind) => format!("this is a {kind} key, but {} is required", versions.accepted_label),
            None => format!(
                "unknown extended key version {:02x}{:02x}{:02x}{:02x}; {} is required",
                version[0], version[1], version[2], version[3], versions.accepted_label
            ),
        };
        return Err(invalid(reason));
    }

    // rust-bitcoin only knows the xpub/tpub version bytes; SLIP-132 variants
    // (zpub/vpub) carry the same key material, so normalise the version.
    let normalised = match net_of_version(version) {
        ChainNet::Mainnet => VERSION_XPUB,
        ChainNet::Testnet => VERSION_TPUB,
    };
    raw[..4].copy_from_slice(&normalised);
    let account = Xpub::decode(&raw).map_err(|e| invalid(format!("not a valid extended public key ({e})")))?;

    if account.depth != 3 || !account.child_number.is_hardened() {
        return Err(invalid(format!(
            "expected an account-level key (depth 3, hardened account index, e.g. m/84'/0'/0' or m/44'/60'/0'), \
             but this key has depth {} and child number {}",
            account.depth, account.child_number
        )));
    }

    account
        .ckd_pub(secp, ChildNumber::Normal { index: 0 })
        .map_err(|e| invalid(format!("cannot derive the external chain from this key ({e})")))
}

fn net_of_version(version: Version) -> ChainNet {
    if version == VERSION_TPUB || version == VERSION_VPUB { ChainNet::Testnet } else { ChainNet::Mainnet }
}

fn net_name(net: ChainNet) -> &'static str {
    match net {
        ChainNet::Mainnet => "mainnet",
        ChainNet::Testnet => "testnet",
    }
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

const TRON_PREFIX: u8 = 0x41;
const XRP_ACCOUNT_PREFIX: u8 = 0x00;

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
        AddressFamily::Bitcoin => validate_bitcoin(net, address),
        AddressFamily::Evm => validate_evm(address),
        AddressFamily::Tron => validate_tron(address),
        AddressFamily::Xrp => {
            validate_xrp(address)?;
            match tag {
                Some(t) => validate_xrp_tag(t),
                None => Ok(()),
            }
        }
        AddressFamily::Solana => validate_solana(address),
    }
}

fn invalid(family: AddressFamily, reason: impl Into<String>) -> AddressError {
    AddressError::Invalid { family, reason: reason.into() }
}

fn validate_bitcoin(net: ChainNet, address: &str) -> Result<(), AddressError> {
    use bitcoin::address::{AddressType, NetworkUnchecked};
    const FAMILY: AddressFamily = AddressFamily::Bitcoin;

    let lower = address.to_ascii_lowercase();
    let looks_segwit = ["bc1", "tb1", "bcrt1"].iter().any(|p| lower.starts_with(p));
    if looks_segwit {
        // Diagnose bech32 problems directly: the generic parser would fall back
        // to base58 and report a confusing error.
        bitcoin::bech32::segwit::decode(address).map_err(|e| explain_bech32(&e.0))?;
    } else {
        decode_base58check(address, bs58::Alphabet::BITCOIN, FAMILY)?;
    }

    let parsed: bitcoin::Address<NetworkUnchecked> =
        address.parse().map_err(|e: bitcoin::address::ParseError| invalid(FAMILY, error_chain(&e)))?;

    match parsed.assume_checked_ref().address_type() {
        Some(AddressType::P2pkh | AddressType::P2sh | AddressType::P2wpkh | AddressType::P2wsh | AddressType::P2tr) => {
        }
        _ => {
            return Err(invalid(
                FAMILY,
                "unsupported output type: only P2PKH, P2SH, SegWit v0 (P2WPKH/P2WSH) and Taproot addresses are accepted",
            ));
        }
    }

    let required = match net {
        ChainNet::Mainnet => bitcoin::Network::Bitcoin,
        ChainNet::Testnet => bitcoin::Network::Testnet,
    };
    if !parsed.is_valid_for_network(required) {
        let found = if parsed.is_valid_for_network(bitcoin::Network::Bitcoin) {
            "mainnet"
        } else if parsed.is_valid_for_network(bitcoin::Network::Regtest)
            && !parsed.is_valid_for_network(bitcoin::Network::Testnet)
        {
            "regtest"
        } else {
            "testnet"
        };
        let expected = match net {
            ChainNet::Mainnet => "mainnet (bc1…, 1… or 3…)",
            ChainNet::Testnet => "testnet (tb1…, m…, n… or 2…)",
        };
        return Err(AddressError::WrongNetwork { found, expected });
    }
    Ok(())
}

fn explain_bech32(e: &bitcoin::bech32::primitives::decode::SegwitHrpstringError) -> AddressError {
    use bitcoin::bech32::primitives::decode::{CharError, SegwitHrpstringError as E, UncheckedHrpstringError as U};
    const FAMILY: AddressFamily = AddressFamily::Bitcoin;
    match e {
        E::Checksum(_) => AddressError::BadChecksum { family: FAMILY },
        E::Unchecked(U::Char(CharError::MixedCase)) => invalid(FAMILY, "mixes upper and lower case letters"),
        E::Unchecked(U::Char(CharError::InvalidChar(c))) => {
            invalid(FAMILY, format!("contains the character {c:?}, which cannot appear in a bech32 address"))
        }
        E::TooLong(_) => invalid(FAMILY, "is too long"),
        E::InvalidWitnessVersion(_) | E::WitnessLength(_) | E::NoData | E::Padding(_) => {
            invalid(FAMILY, "the SegWit program has an invalid version or length")
        }
        other => invalid(FAMILY, error_chain(other)),
    }
}

fn validate_evm(address: &str) -> Result<(), AddressError> {
    const FAMILY: AddressFamily = AddressFamily::Evm;
    let Some(hex) = address.strip_prefix("0x") else {
        return Err(invalid(FAMILY, "must start with 0x"));
    };
    if hex.len() != 40 {
        return Err(invalid(FAMILY, format!("must have 40 hex digits after 0x, found {}", hex.len())));
    }
    if let Some(c) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(invalid(FAMILY, format!("contains {c:?}, which is not a hex digit")));
    }
    let has_upper = hex.bytes().any(|b| b.is_ascii_uppercase());
    let has_lower = hex.bytes().any(|b| b.is_ascii_lowercase());
    if has_upper && has_lower {
        alloy_primitives::Address::parse_checksummed(address, None)
            .map_err(|_| AddressError::BadChecksum { family: FAMILY })?;
    }
    Ok(())
}

fn validate_tron(address: &str) -> Result<(), AddressError> {
    const FAMILY: AddressFamily = AddressFamily::Tron;
    if address.starts_with("41") && address.len() == 42 {
        return Err(invalid(FAMILY, "hex-form Tron addresses are not accepted; use the base58 form starting with T"));
    }
    let payload = decode_base58check(address, bs58::Alphabet::BITCOIN, FAMILY)?;
    if payload.len() != 21 {
        return Err(invalid(FAMILY, format!("decodes to {} bytes, expected 21", payload.len())));
    }
    if payload[0] != TRON_PREFIX {
        return Err(invalid(FAMILY, "wrong address prefix: Tron addresses start with T (version byte 0x41)"));
    }
    Ok(())
}

fn validate_xrp(address: &str) -> Result<(), AddressError> {
    const FAMILY: AddressFamily = AddressFamily::Xrp;
    if address.starts_with('X') || address.starts_with('T') {
        // X-addresses (XLS-5d) embed the tag; we want the classic form + tag.
        if address.len() == 47 {
            return Err(invalid(
                FAMILY,
                "X-addresses are not accepted; use the classic r-address and a destination tag",
            ));
        }
    }
    let payload = decode_base58check(address, bs58::Alphabet::RIPPLE, FAMILY)?;
    if payload.len() != 21 || payload[0] != XRP_ACCOUNT_PREFIX {
        return Err(invalid(FAMILY, "not a classic account address (classic XRP addresses start with r)"));
    }
    Ok(())
}

fn validate_xrp_tag(tag: &str) -> Result<(), AddressError> {
    let ok = !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_digit()) && tag.parse::<u32>().is_ok();
    if ok { Ok(()) } else { Err(AddressError::InvalidTag { tag: tag.to_owned() }) }
}

fn validate_solana(address: &str) -> Result<(), AddressError> {
    const FAMILY: AddressFamily = AddressFamily::Solana;
    let bytes = bs58::decode(address).into_vec().map_err(|e| explain_base58(e, FAMILY))?;
    if bytes.len() != 32 {
        return Err(invalid(
            FAMILY,
            format!("decodes to {} bytes, but a Solana address is exactly 32 bytes", bytes.len()),
        ));
    }
    Ok(())
}

/// Base58check decode (double-SHA256 checksum); returns the payload including the version byte.
fn decode_base58check(
    address: &str,
    alphabet: &'static bs58::Alphabet,
    family: AddressFamily,
) -> Result<Vec<u8>, AddressError> {
    bs58::decode(address).with_alphabet(alphabet).with_check(None).into_vec().map_err(|e| explain_base58(e, family))
}

fn explain_base58(e: bs58::decode::Error, family: AddressFamily) -> AddressError {
    use bs58::decode::Error as E;
    match e {
        E::InvalidCharacter { character, .. } => {
            invalid(family, format!("contains the character {character:?}, which cannot appear in this address format"))
        }
        E::NonAsciiCharacter { .. } => invalid(family, "contains a non-ASCII character"),
        E::InvalidChecksum { .. } => AddressError::BadChecksum { family },
        E::NoChecksum => invalid(family, "is too short"),
        other => invalid(family, other.to_string()),
    }
}

/// "outer: inner: innermost" for errors whose Display only shows the top level.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    // Built-in test keys (random seed, discarded). Vectors from Python bip-utils 2.12.3.
    const BUILTIN_TPUB_SAME_KEY: &str = "tpubDDiwRkacdMMNtK7EkNWzmmZdJEuZWpsb5rHHHR28RaiysiRgznhXuf7kUrP5fmJN2toPYGy744wn9MCD2j1P8RdmmyvD1S4aeQdL3fdvhAX";
    const BUILTIN_BTC: [(u64, &str); 3] = [
        (0, "tb1qt6cc3jyttu5skp9xg38vzmfwqxr9rxqzgs6lsk"),
        (1, "tb1q9pyvyglv53ps6zmrj9eupsrx0jx3djy5ukxad9"),
        (7, "tb1qlvl2v9n3e6jvh773la2mcrjkt4s8hux6hxstdd"),
    ];
    const BUILTIN_EVM: [(u64, &str); 3] = [
        (0, "0xFA97C6B5043408A9406e332ced832fAA0958BedC"),
        (1, "0xC908C69596c0F2835bAe880a85187f128ddE875f"),
        (7, "0x99DdB734EC790E8625B5b3d14808330d16d93177"),
    ];
    const BUILTIN_TRON: [(u64, &str); 3] = [
        (0, "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP"),
        (1, "TCLshYm2Nu38tEWXpxUBhzjH5yhXTgiEyB"),
        (7, "TQBhe1PWQo2bpELwTc3AEkAKW99KgqiSZF"),
    ];
    const BUILTIN_SOLANA: [(u64, &str); 5] = [
        (0, "DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT"),
        (1, "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn"),
        (7, "3JTjP5cNY3835Mxah842rCGozAD4U1uEDsMSXdeLEuVA"),
        (1_000_000, "21pNxphwYNEaCZgQAB2m45f7bnCSdNwwSCz3m6vjgU7s"),
        (u64::MAX, "FTPvMikdHkd9Bka1pS7iYupf76L7QwmQ14FvKZhfi6wp"),
    ];

    // Public BIP39 test mnemonic "abandon ×11 about".
    const ABANDON_ZPUB: &str = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
    const ABANDON_BTC_XPUB_SAME_KEY: &str = "xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V";
    const ABANDON_BTC: [(u64, &str); 3] = [
        (0, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"),
        (1, "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"),
        (7, "bc1qhxgzmkmwvrlwvlfn4qe57lx2qdfg8phycnsarn"),
    ];
    const ABANDON_TBTC_VPUB: &str = "vpub5Y6cjg78GGuNLsaPhmYsiw4gYX3HoQiRBiSwDaBXKUafCt9bNwWQiitDk5VZ5BVxYnQdwoTyXSs2JHRPAgjAvtbBrf8ZhDYe2jWAqvZVnsc";
    const ABANDON_TBTC_0: &str = "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl";
    const ABANDON_EVM_XPUB: &str = "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt";
    const ABANDON_EVM: [(u64, &str); 3] = [
        (0, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"),
        (1, "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0"),
        (7, "0x593814d3309e2dF31D112824F0bb5aa7Cb0D7d47"),
    ];
    const ABANDON_TRON_XPUB: &str = "xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd";
    const ABANDON_TRON: [(u64, &str); 3] = [
        (0, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"),
        (1, "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK"),
        (7, "TFj86XAQYBPvwUknt9yxmbc4k3zwUC7iVW"),
    ];

    fn mainnet() -> AddressDeriver {
        let cfg = AccountKeysConfig {
            bitcoin_xpub: Some(ABANDON_ZPUB.into()),
            evm_xpub: Some(ABANDON_EVM_XPUB.into()),
            tron_xpub: Some(ABANDON_TRON_XPUB.into()),
            xrp_address: Some("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh".into()),
            solana_pool: vec![
                "DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT".into(),
                "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn".into(),
            ],
        };
        AddressDeriver::from_config(&cfg, ChainNet::Mainnet, "addresses.live").unwrap()
    }

    fn addr(d: &AddressDeriver, family: AddressFamily, index: u64) -> String {
        let derived = d.derive(family, index).unwrap();
        assert_eq!(derived.tag, None);
        derived.address
    }

    fn config_error(cfg: &AccountKeysConfig, net: ChainNet) -> String {
        AddressDeriver::from_config(cfg, net, "addresses.live").unwrap_err().to_string()
    }

    /// Flip one character in the middle of the string to another of the same alphabet.
    fn flip(s: &str, at: usize) -> String {
        let mut chars: Vec<char> = s.chars().collect();
        let c = chars[at];
        chars[at] = match c {
            'a'..='y' | 'A'..='Y' | '1'..='8' => char::from(c as u8 + 1),
            _ => '2',
        };
        let out: String = chars.into_iter().collect();
        assert_ne!(out, s);
        out
    }

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
    fn mainnet_vectors_abandon_mnemonic() {
        let d = mainnet();
        for (i, want) in ABANDON_BTC {
            assert_eq!(addr(&d, AddressFamily::Bitcoin, i), want, "bitcoin {i}");
        }
        for (i, want) in ABANDON_EVM {
            assert_eq!(addr(&d, AddressFamily::Evm, i), want, "evm {i}");
        }
        for (i, want) in ABANDON_TRON {
            assert_eq!(addr(&d, AddressFamily::Tron, i), want, "tron {i}");
        }
    }

    #[test]
    fn xpub_and_zpub_of_same_key_agree() {
        let cfg = AccountKeysConfig { bitcoin_xpub: Some(ABANDON_BTC_XPUB_SAME_KEY.into()), ..Default::default() };
        let d = AddressDeriver::from_config(&cfg, ChainNet::Mainnet, "addresses.live").unwrap();
        assert_eq!(addr(&d, AddressFamily::Bitcoin, 0), ABANDON_BTC[0].1);
    }

    #[test]
    fn testnet_vpub_of_public_mnemonic() {
        let cfg = AccountKeysConfig { bitcoin_xpub: Some(ABANDON_TBTC_VPUB.into()), ..Default::default() };
        let d = AddressDeriver::from_config(&cfg, ChainNet::Testnet, "addresses.test").unwrap();
        assert_eq!(addr(&d, AddressFamily::Bitcoin, 0), ABANDON_TBTC_0);
    }

    #[test]
    fn builtin_test_vectors() {
        let d = AddressDeriver::builtin_test();
        for (i, want) in BUILTIN_BTC {
            assert_eq!(addr(&d, AddressFamily::Bitcoin, i), want, "bitcoin {i}");
        }
        for (i, want) in BUILTIN_EVM {
            assert_eq!(addr(&d, AddressFamily::Evm, i), want, "evm {i}");
        }
        for (i, want) in BUILTIN_TRON {
            assert_eq!(addr(&d, AddressFamily::Tron, i), want, "tron {i}");
        }
        for (i, want) in BUILTIN_SOLANA {
            assert_eq!(addr(&d, AddressFamily::Solana, i), want, "solana {i}");
        }
        for fam in ALL_FAMILIES {
            assert!(d.supports(fam), "{fam:?}");
        }
    }

    #[test]
    fn builtin_tpub_form_matches_vpub() {
        let cfg = AccountKeysConfig { bitcoin_xpub: Some(BUILTIN_TPUB_SAME_KEY.into()), ..Default::default() };
        let d = AddressDeriver::from_config(&cfg, ChainNet::Testnet, "addresses.test").unwrap();
        assert_eq!(addr(&d, AddressFamily::Bitcoin, 7), BUILTIN_BTC[2].1);
    }

    #[test]
    fn builtin_solana_keys_are_on_curve_and_unique() {
        let d = AddressDeriver::builtin_test();
        let mut seen = std::collections::HashSet::new();
        for i in 0..64 {
            let a = addr(&d, AddressFamily::Solana, i);
            let bytes: [u8; 32] = bs58::decode(&a).into_vec().unwrap().try_into().unwrap();
            ed25519_dalek::VerifyingKey::from_bytes(&bytes).expect("on-curve ed25519 key");
            assert!(seen.insert(a));
        }
    }

    #[test]
    fn xrp_tags() {
        let d = AddressDeriver::builtin_test();
        let first = d.derive(AddressFamily::Xrp, 0).unwrap();
        assert_eq!(first.address, BUILTIN_TEST_XRP_ADDRESS);
        assert_eq!(first.tag.as_deref(), Some("1"));
        let last = d.derive(AddressFamily::Xrp, u64::from(u32::MAX) - 1).unwrap();
        assert_eq!(last.tag.as_deref(), Some("4294967295"));
        for bad in [u64::from(u32::MAX), u64::MAX] {
            let err = d.derive(AddressFamily::Xrp, bad).unwrap_err();
            assert!(matches!(err, DeriveError::IndexOutOfRange { .. }), "{err}");
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
    fn hd_index_limits() {
        let d = AddressDeriver::builtin_test();
        let max = (1u64 << 31) - 1;
        for fam in [AddressFamily::Bitcoin, AddressFamily::Evm, AddressFamily::Tron] {
            assert!(d.derive(fam, max).is_ok());
            let err = d.derive(fam, max + 1).unwrap_err();
            assert!(matches!(err, DeriveError::IndexOutOfRange { .. }), "{err}");
        }
    }

    #[test]
    fn solana_pool_and_unsupported() {
        let d = mainnet();
        assert_eq!(addr(&d, AddressFamily::Solana, 1), "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn");
        let err = d.derive(AddressFamily::Solana, 2).unwrap_err();
        assert_eq!(err, DeriveError::PoolExhausted { index: 2, size: 2 });
        assert!(err.to_string().contains("solana_pool"));

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
    fn wrong_net_bitcoin_keys_rejected_with_key_name() {
        for (key, net) in [
            (ABANDON_TBTC_VPUB, ChainNet::Mainnet),
            (BUILTIN_TPUB_SAME_KEY, ChainNet::Mainnet),
            (ABANDON_ZPUB, ChainNet::Testnet),
            (ABANDON_BTC_XPUB_SAME_KEY, ChainNet::Testnet),
        ] {
            let cfg = AccountKeysConfig { bitcoin_xpub: Some(key.into()), ..Default::default() };
            let err = AddressDeriver::from_config(&cfg, net, "addresses.live").unwrap_err();
            assert!(matches!(err, AddressConfigError::WrongNetwork { .. }), "{err}");
            let msg = err.to_string();
            assert!(msg.contains("addresses.live.bitcoin_xpub"), "{msg}");
            assert!(!msg.contains(key), "key must not be echoed: {msg}");
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

    #[test]
    fn non_account_level_and_private_keys_rejected() {
        // Depth-0 master public key (BIP32 test vector 1).
        let master = "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8";
        let msg =
            config_error(&AccountKeysConfig { evm_xpub: Some(master.into()), ..Default::default() }, ChainNet::Mainnet);
        assert!(msg.contains("addresses.live.evm_xpub") && msg.contains("depth 0"), "{msg}");

        // BIP32 test vector 1 master private key: must be refused, and never echoed.
        let xprv = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi";
        let msg = config_error(
            &AccountKeysConfig { bitcoin_xpub: Some(xprv.into()), ..Default::default() },
            ChainNet::Mainnet,
        );
        assert!(msg.contains("addresses.live.bitcoin_xpub") && msg.contains("private"), "{msg}");
        assert!(!msg.contains(xprv));
    }

    #[test]
    fn empty_prefix_uses_bare_key() {
        let cfg = AccountKeysConfig { evm_xpub: Some("nope".into()), ..Default::default() };
        let msg = AddressDeriver::from_config(&cfg, ChainNet::Mainnet, "").unwrap_err().to_string();
        assert!(msg.starts_with("evm_xpub:"), "{msg}");
    }

    #[test]
    fn config_deserializes_with_defaults() {
        // Missing fields fall back to defaults (api already depends on serde_json).
        let cfg: AccountKeysConfig =
            serde_json::from_value(serde_json::json!({ "evm_xpub": ABANDON_EVM_XPUB })).unwrap();
        assert_eq!(cfg.evm_xpub.as_deref(), Some(ABANDON_EVM_XPUB));
        assert!(cfg.solana_pool.is_empty() && cfg.bitcoin_xpub.is_none());
    }

    // ---- validate_address -------------------------------------------------

    fn ok(family: AddressFamily, net: ChainNet, a: &str) {
        validate_address(family, net, a, None).unwrap_or_else(|e| panic!("{a}: {e}"));
    }

    fn bad(family: AddressFamily, net: ChainNet, a: &str, tag: Option<&str>) -> AddressError {
        let e = validate_address(family, net, a, tag).expect_err(a);
        assert!(!e.to_string().is_empty());
        e
    }

    #[test]
    fn bitcoin_valid_kinds() {
        use AddressFamily::Bitcoin as B;
        use ChainNet::{Mainnet as M, Testnet as T};
        ok(B, M, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"); // p2wpkh
        ok(B, M, "BC1QCR8TE4KR609GCAWUTMRZA0J4XV80JY8Z306FYU"); // upper case
        ok(B, M, "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3"); // p2wsh
        ok(B, M, "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr"); // taproot (BIP86)
        ok(B, M, "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"); // p2pkh
        ok(B, M, "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"); // p2sh
        ok(B, T, "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl");
        ok(B, T, "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7");
        ok(B, T, "mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn");
        ok(B, T, "2MzQwSSnBHWHqSAqtTVQ6v47XtaisrJa1Vc");
    }

    #[test]
    fn bitcoin_invalid() {
        use AddressFamily::Bitcoin as B;
        use ChainNet::{Mainnet as M, Testnet as T};
        let e = bad(B, M, &flip("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", 20), None);
        assert_eq!(e, AddressError::BadChecksum { family: B });
        let e = bad(B, M, &flip("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", 10), None);
        assert_eq!(e, AddressError::BadChecksum { family: B });
        let e = bad(B, T, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", None);
        assert!(matches!(e, AddressError::WrongNetwork { found: "mainnet", .. }), "{e}");
        let e = bad(B, M, "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl", None);
        assert!(matches!(e, AddressError::WrongNetwork { found: "testnet", .. }), "{e}");
        assert!(e.to_string().contains("mainnet"), "{e}");
        bad(B, M, "mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn", None);
        bad(B, T, "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", None);
        bad(B, T, "bcrt1q6rz28mcfaxtmd6v789l9rrlrusdprr9pz3cppk", None);
        // v0 address encoded with bech32m (BIP350 invalid vector).
        bad(B, M, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh", None);
        // Mixed case.
        bad(B, M, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306FYU", None);
        // Witness v2 (future version) is not accepted for payouts.
        let e = bad(B, M, "bc1zw508d6qejxtdg4y5r3zarvaryvaxxpcs", None);
        assert!(e.to_string().contains("unsupported"), "{e}");
        bad(B, M, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94", None);
        let e = bad(B, M, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", Some("1"));
        assert_eq!(e, AddressError::TagNotAllowed { family: B });
        assert_eq!(bad(B, M, "", None), AddressError::Empty);
        assert_eq!(bad(B, M, " bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", None), AddressError::Whitespace);
    }

    #[test]
    fn evm_rules() {
        use AddressFamily::Evm as E;
        let net = ChainNet::Mainnet;
        ok(E, net, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
        ok(E, net, "0x9858effd232b4033e47d90003d41ec34ecaeda94");
        ok(E, net, "0x9858EFFD232B4033E47D90003D41EC34ECAEDA94");
        // EIP-55 mismatch: one letter's case swapped.
        let e = bad(E, net, "0x9858efFD232B4033E47d90003D41EC34EcaEda94", None);
        assert_eq!(e, AddressError::BadChecksum { family: E });
        bad(E, net, "9858EfFD232B4033E47d90003D41EC34EcaEda94", None);
        bad(E, net, "0x9858EfFD232B4033E47d90003D41EC34EcaEda9", None);
        bad(E, net, "0x9858EfFD232B4033E47d90003D41EC34EcaEda944", None);
        bad(E, net, "0x9858EfFD232B4033E47d90003D41EC34EcaEda9g", None);
        let e = bad(E, net, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94", Some("5"));
        assert_eq!(e, AddressError::TagNotAllowed { family: E });
    }

    #[test]
    fn tron_rules() {
        use AddressFamily::Tron as T;
        let net = ChainNet::Mainnet;
        ok(T, net, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH");
        let e = bad(T, net, &flip("TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", 12), None);
        assert_eq!(e, AddressError::BadChecksum { family: T });
        // Valid base58check, but a bitcoin (0x00) prefix.
        bad(T, net, "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", None);
        bad(T, net, "41d1f6e6b1e1f1a27b4fd38d8ae4b2d3a5a6f0e8b1", None);
        let e = bad(T, net, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH", Some("1"));
        assert_eq!(e, AddressError::TagNotAllowed { family: T });
    }

    #[test]
    fn xrp_rules() {
        use AddressFamily::Xrp as X;
        let net = ChainNet::Mainnet;
        let a = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh"; // genesis account
        ok(X, net, a);
        ok(X, ChainNet::Testnet, BUILTIN_TEST_XRP_ADDRESS);
        validate_address(X, net, a, Some("0")).unwrap();
        validate_address(X, net, a, Some("4294967295")).unwrap();
        for tag in ["4294967296", "-1", "+1", "1.5", "abc", "", " 1"] {
            let e = bad(X, net, a, Some(tag));
            assert_eq!(e, AddressError::InvalidTag { tag: tag.into() });
        }
        let e = bad(X, net, &flip(a, 10), None);
        assert_eq!(e, AddressError::BadChecksum { family: X });
        // Bitcoin-alphabet base58check is not an XRP address.
        bad(X, net, "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", None);
        // X-address form.
        let e = bad(X, net, "XVLhHMPHU98es4dbozjVtdWzVrDjtV18pX8yuPT7y4xaEHi", None);
        assert!(e.to_string().contains("X-address"), "{e}");
    }

    #[test]
    fn solana_rules() {
        use AddressFamily::Solana as S;
        let net = ChainNet::Mainnet;
        ok(S, net, "11111111111111111111111111111111"); // system program
        ok(S, net, "TokenkegQfeZyiNwAJbNbGYPxWAgDyNJkB26PUecL5j"); // SPL token program (off-curve is fine)
        let short = bs58::encode([7u8; 31]).into_string();
        let e = bad(S, net, &short, None);
        assert!(e.to_string().contains("31 bytes"), "{e}");
        bad(S, net, &bs58::encode([7u8; 33]).into_string(), None);
        bad(S, net, "0OIl0OIl0OIl0OIl0OIl0OIl0OIl0OIl", None);
        let e = bad(S, net, "11111111111111111111111111111111", Some("1"));
        assert_eq!(e, AddressError::TagNotAllowed { family: S });
    }
}
