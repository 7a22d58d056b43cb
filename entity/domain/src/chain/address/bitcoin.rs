//! Bitcoin: BIP84 native SegWit (P2WPKH) deposit addresses from an account xpub/zpub
//! (tpub/vpub on testnet); payouts to P2PKH, P2SH, SegWit v0 and Taproot on the
//! environment's network.

use bitcoin::bip32::Xpub;
use bitcoin::secp256k1::{All, Secp256k1};

use super::base58;
use super::error::{AddressError, DeriveError, invalid};
use super::keys::{self, AcceptedVersions, VERSION_TPUB, VERSION_VPUB, VERSION_XPUB, VERSION_ZPUB, Version};
use super::{AddressFamily, ChainNet, DerivedAddress};

const FAMILY: AddressFamily = AddressFamily::Bitcoin;

/// Built-in test-environment account key, `m/84'/1'/0'`. Only account-level public keys are
/// embedded; the seed they come from was generated at random once and not kept.
pub(super) const BUILTIN_TEST_VPUB: &str =
    "vpub5ZgnJBR6ciJxuvY9dTxf9g3FdBX1eCPXhzeYN5BDKfDL2E8XRFXKX68eCQP89T3HRi2sRkG7beQdgbUUCUL7eWpGyhn4A5mNWzudWRiNb6E";

/// The account key versions accepted on `net`, and those of the other network.
pub(super) fn account_versions(net: ChainNet) -> AcceptedVersions {
    const MAIN: &[(Version, &str)] = &[(VERSION_XPUB, "xpub"), (VERSION_ZPUB, "zpub")];
    const TEST: &[(Version, &str)] = &[(VERSION_TPUB, "tpub"), (VERSION_VPUB, "vpub")];
    match net {
        ChainNet::Mainnet => AcceptedVersions { accepted: MAIN, accepted_label: "an xpub or zpub", wrong_net: TEST },
        ChainNet::Testnet => AcceptedVersions { accepted: TEST, accepted_label: "a tpub or vpub", wrong_net: MAIN },
    }
}

fn network(net: ChainNet) -> bitcoin::Network {
    match net {
        ChainNet::Mainnet => bitcoin::Network::Bitcoin,
        ChainNet::Testnet => bitcoin::Network::Testnet,
    }
}

/// P2WPKH address `0/index` of the account.
pub(super) fn derive(
    secp: &Secp256k1<All>,
    chain: &Xpub,
    net: ChainNet,
    index: u64,
) -> Result<DerivedAddress, DeriveError> {
    let child = keys::derive_child(secp, chain, FAMILY, index)?;
    let address = bitcoin::Address::p2wpkh(&bitcoin::CompressedPublicKey(child), network(net));
    Ok(DerivedAddress::plain(address.to_string()))
}

pub(super) fn validate(net: ChainNet, address: &str) -> Result<(), AddressError> {
    use bitcoin::address::{AddressType, NetworkUnchecked};

    let lower = address.to_ascii_lowercase();
    let looks_segwit = ["bc1", "tb1", "bcrt1"].iter().any(|p| lower.starts_with(p));
    if looks_segwit {
        // Diagnose bech32 problems directly: the generic parser would fall back
        // to base58 and report a confusing error.
        bitcoin::bech32::segwit::decode(address).map_err(|e| explain_bech32(&e.0))?;
    } else {
        base58::decode_check(address, bs58::Alphabet::BITCOIN, FAMILY)?;
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

    if !parsed.is_valid_for_network(network(net)) {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::{AccountKeysConfig, AddressConfigError, AddressDeriver};
    use super::*;

    // Built-in test keys (random seed, discarded). Vectors from Python bip-utils 2.12.3.
    const BUILTIN_BTC: [(u64, &str); 3] = [
        (0, "tb1qt6cc3jyttu5skp9xg38vzmfwqxr9rxqzgs6lsk"),
        (1, "tb1q9pyvyglv53ps6zmrj9eupsrx0jx3djy5ukxad9"),
        (7, "tb1qlvl2v9n3e6jvh773la2mcrjkt4s8hux6hxstdd"),
    ];

    // Public BIP39 test mnemonic "abandon ×11 about".
    const ABANDON_BTC: [(u64, &str); 3] = [
        (0, "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"),
        (1, "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g"),
        (7, "bc1qhxgzmkmwvrlwvlfn4qe57lx2qdfg8phycnsarn"),
    ];
    const ABANDON_TBTC_0: &str = "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl";

    #[test]
    fn mainnet_vectors_abandon_mnemonic() {
        assert_vectors(&mainnet(), AddressFamily::Bitcoin, &ABANDON_BTC);
    }

    #[test]
    fn builtin_test_vectors() {
        assert_vectors(&AddressDeriver::builtin_test(), AddressFamily::Bitcoin, &BUILTIN_BTC);
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
    fn builtin_tpub_form_matches_vpub() {
        let cfg = AccountKeysConfig { bitcoin_xpub: Some(BUILTIN_TPUB_SAME_KEY.into()), ..Default::default() };
        let d = AddressDeriver::from_config(&cfg, ChainNet::Testnet, "addresses.test").unwrap();
        assert_eq!(addr(&d, AddressFamily::Bitcoin, 7), BUILTIN_BTC[2].1);
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
}
