//! Test keys and helpers shared by the address family tests.

use super::{AccountKeysConfig, AddressDeriver, AddressError, AddressFamily, ChainNet, validate_address};

// Built-in test keys (random seed, discarded). Vectors from Python bip-utils 2.12.3.
pub(super) const BUILTIN_TPUB_SAME_KEY: &str =
    "tpubDDiwRkacdMMNtK7EkNWzmmZdJEuZWpsb5rHHHR28RaiysiRgznhXuf7kUrP5fmJN2toPYGy744wn9MCD2j1P8RdmmyvD1S4aeQdL3fdvhAX";

// Public BIP39 test mnemonic "abandon ×11 about".
pub(super) const ABANDON_ZPUB: &str =
    "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
pub(super) const ABANDON_BTC_XPUB_SAME_KEY: &str =
    "xpub6CatWdiZiodmUeTDp8LT5or8nmbKNcuyvz7WyksVFkKB4RHwCD3XyuvPEbvqAQY3rAPshWcMLoP2fMFMKHPJ4ZeZXYVUhLv1VMrjPC7PW6V";
pub(super) const ABANDON_TBTC_VPUB: &str =
    "vpub5Y6cjg78GGuNLsaPhmYsiw4gYX3HoQiRBiSwDaBXKUafCt9bNwWQiitDk5VZ5BVxYnQdwoTyXSs2JHRPAgjAvtbBrf8ZhDYe2jWAqvZVnsc";
pub(super) const ABANDON_EVM_XPUB: &str =
    "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt";
pub(super) const ABANDON_TRON_XPUB: &str =
    "xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd";

/// Every family configured for mainnet from the public mnemonic, and a two-address Solana pool.
pub(super) fn mainnet() -> AddressDeriver {
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

pub(super) fn addr(d: &AddressDeriver, family: AddressFamily, index: u64) -> String {
    let derived = d.derive(family, index).unwrap();
    assert_eq!(derived.tag, None);
    derived.address
}

/// Each `(index, address)` of `vectors` is what `d` derives for `family`.
pub(super) fn assert_vectors(d: &AddressDeriver, family: AddressFamily, vectors: &[(u64, &str)]) {
    for &(i, want) in vectors {
        assert_eq!(addr(d, family, i), want, "{} {i}", family.as_str());
    }
}

pub(super) fn config_error(cfg: &AccountKeysConfig, net: ChainNet) -> String {
    AddressDeriver::from_config(cfg, net, "addresses.live").unwrap_err().to_string()
}

/// Flip one character in the middle of the string to another of the same alphabet.
pub(super) fn flip(s: &str, at: usize) -> String {
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

pub(super) fn ok(family: AddressFamily, net: ChainNet, a: &str) {
    validate_address(family, net, a, None).unwrap_or_else(|e| panic!("{a}: {e}"));
}

pub(super) fn bad(family: AddressFamily, net: ChainNet, a: &str, tag: Option<&str>) -> AddressError {
    let e = validate_address(family, net, a, tag).expect_err(a);
    assert!(!e.to_string().is_empty());
    e
}
