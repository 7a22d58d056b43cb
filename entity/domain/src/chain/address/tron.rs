//! Tron: BIP44 `m/44'/195'/0'` deposit addresses, the EVM-style account id behind the
//! `0x41` prefix in base58check (`T…`); payouts to that form only.

use bitcoin::bip32::Xpub;
use bitcoin::secp256k1::{All, Secp256k1};

use super::base58;
use super::error::{AddressError, DeriveError, invalid};
use super::{AddressFamily, DerivedAddress, evm, keys};

const FAMILY: AddressFamily = AddressFamily::Tron;

/// Version byte of a Tron account address.
const PREFIX: u8 = 0x41;

/// Built-in test-environment account key, `m/44'/195'/0'`.
pub(super) const BUILTIN_TEST_XPUB: &str =
    "xpub6D6t97EK4FUvSRbpmwzCwK9gX6oguPJ3s4WRSd1LbhxvP2LCQoHqt7zPjfN7mywpa5jLktx4F8CstFpWE2iQLew8qzDmvssCsqJ9HRqcVQ9";

/// Address `0/index` of the account.
pub(super) fn derive(secp: &Secp256k1<All>, chain: &Xpub, index: u64) -> Result<DerivedAddress, DeriveError> {
    let child = keys::derive_child(secp, chain, FAMILY, index)?;
    Ok(DerivedAddress::plain(address_of(&evm::account_id(&child).0)))
}

/// The base58check address (`T…`) of a 20-byte account id (what the node's hex form `41…`
/// carries after its version byte).
pub fn address_of(account_id: &[u8; 20]) -> String {
    let mut payload = [0u8; 21];
    payload[0] = PREFIX;
    payload[1..].copy_from_slice(account_id);
    bs58::encode(payload).with_check().into_string()
}

/// The 20-byte account id of a valid base58 address; `None` for anything else.
pub fn account_id_of(address: &str) -> Option<[u8; 20]> {
    validate(address).ok()?;
    let payload = bs58::decode(address).with_check(None).into_vec().ok()?;
    payload[1..].try_into().ok()
}

pub(super) fn validate(address: &str) -> Result<(), AddressError> {
    if address.starts_with("41") && address.len() == 42 {
        return Err(invalid(FAMILY, "hex-form Tron addresses are not accepted; use the base58 form starting with T"));
    }
    let payload = base58::decode_check(address, bs58::Alphabet::BITCOIN, FAMILY)?;
    if payload.len() != 21 {
        return Err(invalid(FAMILY, format!("decodes to {} bytes, expected 21", payload.len())));
    }
    if payload[0] != PREFIX {
        return Err(invalid(FAMILY, "wrong address prefix: Tron addresses start with T (version byte 0x41)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{AddressDeriver, ChainNet};
    use super::*;

    const BUILTIN_TRON: [(u64, &str); 3] = [
        (0, "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP"),
        (1, "TCLshYm2Nu38tEWXpxUBhzjH5yhXTgiEyB"),
        (7, "TQBhe1PWQo2bpELwTc3AEkAKW99KgqiSZF"),
    ];
    const ABANDON_TRON: [(u64, &str); 3] = [
        (0, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH"),
        (1, "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK"),
        (7, "TFj86XAQYBPvwUknt9yxmbc4k3zwUC7iVW"),
    ];

    #[test]
    fn hex_account_ids_and_base58_addresses_convert_both_ways() {
        // The mainnet USDT contract, as TronScan shows it in both forms.
        let id: [u8; 20] = hex::decode("a614f803b6fd780986a42c78ec9c7f77e6ded13c").unwrap().try_into().unwrap();
        assert_eq!(address_of(&id), "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
        assert_eq!(account_id_of("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"), Some(id));
        assert_eq!(account_id_of("0xa614f803b6fd780986a42c78ec9c7f77e6ded13c"), None);
    }

    #[test]
    fn mainnet_vectors_abandon_mnemonic() {
        assert_vectors(&mainnet(), AddressFamily::Tron, &ABANDON_TRON);
    }

    #[test]
    fn builtin_test_vectors() {
        assert_vectors(&AddressDeriver::builtin_test(), AddressFamily::Tron, &BUILTIN_TRON);
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
}
