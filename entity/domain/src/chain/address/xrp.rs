//! XRP: one classic r-address for every deposit, told apart by the destination tag
//! `index + 1`; payouts to classic r-addresses, with an optional `u32` tag.

use super::base58;
use super::error::{AddressError, DeriveError, invalid};
use super::{AddressFamily, DerivedAddress};

const FAMILY: AddressFamily = AddressFamily::Xrp;

/// Version byte of a classic account address.
const ACCOUNT_PREFIX: u8 = 0x00;

/// Built-in test-environment address: `m/44'/144'/0'/0/0` of the built-in seed.
pub(super) const BUILTIN_TEST_ADDRESS: &str = "rnx3ewPA7jk2LgdUvnyJZaLSYk1LwvRp2m";

/// The configured address with destination tag `index + 1`.
pub(super) fn derive(address: &str, index: u64) -> Result<DerivedAddress, DeriveError> {
    let max = u64::from(u32::MAX) - 1;
    if index > max {
        return Err(DeriveError::IndexOutOfRange { family: FAMILY, index, max });
    }
    Ok(DerivedAddress { address: address.to_owned(), tag: Some((index + 1).to_string()) })
}

pub(super) fn validate(address: &str) -> Result<(), AddressError> {
    if address.starts_with('X') || address.starts_with('T') {
        // X-addresses (XLS-5d) embed the tag; we want the classic form + tag.
        if address.len() == 47 {
            return Err(invalid(
                FAMILY,
                "X-addresses are not accepted; use the classic r-address and a destination tag",
            ));
        }
    }
    let payload = base58::decode_check(address, bs58::Alphabet::RIPPLE, FAMILY)?;
    if payload.len() != 21 || payload[0] != ACCOUNT_PREFIX {
        return Err(invalid(FAMILY, "not a classic account address (classic XRP addresses start with r)"));
    }
    Ok(())
}

/// The classic address (`r…`) of a 20-byte account id (RIPEMD-160 of SHA-256 of the public key).
pub fn address_of(account_id: &[u8; 20]) -> String {
    let mut payload = [0u8; 21];
    payload[0] = ACCOUNT_PREFIX;
    payload[1..].copy_from_slice(account_id);
    bs58::encode(payload).with_alphabet(bs58::Alphabet::RIPPLE).with_check().into_string()
}

/// The 20-byte account id of a valid classic address; `None` for anything else.
pub fn account_id_of(address: &str) -> Option<[u8; 20]> {
    validate(address).ok()?;
    let payload = bs58::decode(address).with_alphabet(bs58::Alphabet::RIPPLE).with_check(None).into_vec().ok()?;
    payload[1..].try_into().ok()
}

pub(super) fn validate_tag(tag: &str) -> Result<(), AddressError> {
    let ok = !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_digit()) && tag.parse::<u32>().is_ok();
    if ok { Ok(()) } else { Err(AddressError::InvalidTag { tag: tag.to_owned() }) }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{AddressDeriver, ChainNet, validate_address};
    use super::*;

    #[test]
    fn account_ids_round_trip() {
        let address = "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe";
        let id = account_id_of(address).unwrap();
        assert_eq!(hex::encode_upper(id), "F667B0CA50CC7709A220B0561B85E53A48461FA8");
        assert_eq!(address_of(&id), address);
        assert_eq!(account_id_of("rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYf"), None);
    }

    #[test]
    fn xrp_tags() {
        let d = AddressDeriver::builtin_test();
        let first = d.derive(AddressFamily::Xrp, 0).unwrap();
        assert_eq!(first.address, BUILTIN_TEST_ADDRESS);
        assert_eq!(first.tag.as_deref(), Some("1"));
        let last = d.derive(AddressFamily::Xrp, u64::from(u32::MAX) - 1).unwrap();
        assert_eq!(last.tag.as_deref(), Some("4294967295"));
        for bad in [u64::from(u32::MAX), u64::MAX] {
            let err = d.derive(AddressFamily::Xrp, bad).unwrap_err();
            assert!(matches!(err, DeriveError::IndexOutOfRange { .. }), "{err}");
        }
    }

    #[test]
    fn xrp_rules() {
        use AddressFamily::Xrp as X;
        let net = ChainNet::Mainnet;
        let a = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh"; // genesis account
        ok(X, net, a);
        ok(X, ChainNet::Testnet, BUILTIN_TEST_ADDRESS);
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
}
