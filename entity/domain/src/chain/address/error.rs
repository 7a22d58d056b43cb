//! What can go wrong: a configured key, a derivation, a destination address.

use super::AddressFamily;

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

/// `AddressError::Invalid` with its reason.
pub(super) fn invalid(family: AddressFamily, reason: impl Into<String>) -> AddressError {
    AddressError::Invalid { family, reason: reason.into() }
}
