//! EVM chains: BIP44 `m/44'/60'/0'` deposit addresses, EIP-55 checksummed; payouts to
//! `0x` + 40 hex digits whose mixed case, if any, matches the checksum.

use bitcoin::bip32::Xpub;
use bitcoin::secp256k1::{All, PublicKey, Secp256k1};

use super::error::{AddressError, DeriveError, invalid};
use super::keys;
use super::{AddressFamily, DerivedAddress};

const FAMILY: AddressFamily = AddressFamily::Evm;

/// Built-in test-environment account key, `m/44'/60'/0'`.
pub(super) const BUILTIN_TEST_XPUB: &str =
    "xpub6D6JeLSjLwEYdf6L6RMGSiHFc4z3xUu8V8oQN1ag7PcBUR1Ckou41GF4L9zyv6sXL7qjGwBZVW6RwvRnifwRow9yBdfp5LzFXcrSjy5SKfb";

/// Address `0/index` of the account, EIP-55 checksummed.
pub(super) fn derive(secp: &Secp256k1<All>, chain: &Xpub, index: u64) -> Result<DerivedAddress, DeriveError> {
    let child = keys::derive_child(secp, chain, FAMILY, index)?;
    Ok(DerivedAddress::plain(account_id(&child).to_checksum(None)))
}

/// Ethereum-style account id: last 20 bytes of keccak256(uncompressed pubkey without 0x04).
pub(super) fn account_id(key: &PublicKey) -> alloy_primitives::Address {
    let uncompressed = key.serialize_uncompressed();
    alloy_primitives::Address::from_raw_public_key(&uncompressed[1..])
}

pub(super) fn validate(address: &str) -> Result<(), AddressError> {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{AddressDeriver, ChainNet};
    use super::*;

    const BUILTIN_EVM: [(u64, &str); 3] = [
        (0, "0xFA97C6B5043408A9406e332ced832fAA0958BedC"),
        (1, "0xC908C69596c0F2835bAe880a85187f128ddE875f"),
        (7, "0x99DdB734EC790E8625B5b3d14808330d16d93177"),
    ];
    const ABANDON_EVM: [(u64, &str); 3] = [
        (0, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"),
        (1, "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0"),
        (7, "0x593814d3309e2dF31D112824F0bb5aa7Cb0D7d47"),
    ];

    #[test]
    fn mainnet_vectors_abandon_mnemonic() {
        assert_vectors(&mainnet(), AddressFamily::Evm, &ABANDON_EVM);
    }

    #[test]
    fn builtin_test_vectors() {
        assert_vectors(&AddressDeriver::builtin_test(), AddressFamily::Evm, &BUILTIN_EVM);
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
}
