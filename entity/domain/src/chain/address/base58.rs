//! Base58 decoding shared by the Bitcoin (legacy), Tron, XRP and Solana rules, with errors
//! that say what is wrong with the address.

use super::AddressFamily;
use super::error::{AddressError, invalid};

/// Base58check decode (double-SHA256 checksum); returns the payload including the version byte.
pub(super) fn decode_check(
    address: &str,
    alphabet: &'static bs58::Alphabet,
    family: AddressFamily,
) -> Result<Vec<u8>, AddressError> {
    bs58::decode(address).with_alphabet(alphabet).with_check(None).into_vec().map_err(|e| explain(e, family))
}

/// The address-level error for a base58 decoding failure.
pub(super) fn explain(e: bs58::decode::Error, family: AddressFamily) -> AddressError {
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
