//! Operator account keys: the configuration of one environment's deposit-address sources,
//! parsing of account-level extended public keys (xpub and its SLIP-132 variants), and
//! non-hardened child derivation below them.

use bitcoin::bip32::{ChildNumber, Xpub};
use bitcoin::secp256k1::{All, PublicKey, Secp256k1};
use serde::{Deserialize, Serialize};

use super::error::{AddressConfigError, DeriveError};
use super::{AddressFamily, ChainNet};

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

pub(super) type Version = [u8; 4];
pub(super) const VERSION_XPUB: Version = [0x04, 0x88, 0xB2, 0x1E];
pub(super) const VERSION_ZPUB: Version = [0x04, 0xB2, 0x47, 0x46];
pub(super) const VERSION_TPUB: Version = [0x04, 0x35, 0x87, 0xCF];
pub(super) const VERSION_VPUB: Version = [0x04, 0x5F, 0x1C, 0xF6];

/// Accepted version bytes of one config key, for one environment.
#[derive(Clone, Copy)]
pub(super) struct AcceptedVersions {
    /// Accepted versions with their names.
    pub(super) accepted: &'static [(Version, &'static str)],
    /// Human list of the accepted prefixes.
    pub(super) accepted_label: &'static str,
    /// Versions that are well-formed but belong to the other network.
    pub(super) wrong_net: &'static [(Version, &'static str)],
}

/// The EVM and Tron account keys: plain xpub on both networks.
pub(super) const ACCOUNT_VERSIONS_XPUB_ONLY: AcceptedVersions =
    AcceptedVersions { accepted: &[(VERSION_XPUB, "xpub")], accepted_label: "an xpub", wrong_net: &[] };

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
pub(super) fn parse_account_xpub(
    secp: &Secp256k1<All>,
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

/// The public key of non-hardened child `index` of an external-chain key: BIP-32's CKDpub
/// (`Xpub::ckd_pub`) without the child's chain code and parent fingerprint, which no deposit
/// address needs (the fingerprint alone is a SHA-256 and a RIPEMD-160 per address). The key is
/// the parent's plus `tweak·G`, the tweak from `Xpub::ckd_pub_tweak`; `tweak·G` is taken with the
/// generator's precomputed tables (`PublicKey::from_secret_key`) rather than the general
/// multiplication of `add_exp_tweak`: the same point, in less time on the invoice-creation path.
/// A unit test holds it equal to `ckd_pub` over many indexes.
pub(super) fn derive_child(
    secp: &Secp256k1<All>,
    chain: &Xpub,
    family: AddressFamily,
    index: u64,
) -> Result<PublicKey, DeriveError> {
    const MAX_NORMAL: u64 = (1 << 31) - 1;
    let child = u32::try_from(index)
        .ok()
        .and_then(|i| ChildNumber::from_normal_idx(i).ok())
        .ok_or(DeriveError::IndexOutOfRange { family, index, max: MAX_NORMAL })?;
    let failed = |reason: String| DeriveError::Derivation { family, index, reason };
    let (tweak, _chain_code) = chain.ckd_pub_tweak(child).map_err(|e| failed(e.to_string()))?;
    chain.public_key.combine(&PublicKey::from_secret_key(secp, &tweak)).map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::AddressDeriver;
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn a_child_key_is_the_one_bip32_ckd_pub_derives() {
        let d = AddressDeriver::builtin_test();
        let inner = &*d.inner;
        let indexes = (0..300).chain([1_000, 65_535, 1 << 20, (1 << 31) - 1]);
        for (family, chain) in [
            (AddressFamily::Bitcoin, &inner.bitcoin),
            (AddressFamily::Evm, &inner.evm),
            (AddressFamily::Tron, &inner.tron),
        ] {
            let chain = chain.as_ref().expect("built-in test key");
            for index in indexes.clone() {
                let child = ChildNumber::from_normal_idx(index).unwrap();
                let want = chain.ckd_pub(&inner.secp, child).unwrap().public_key;
                assert_eq!(
                    derive_child(&inner.secp, chain, family, u64::from(index)).unwrap(),
                    want,
                    "{family:?} {index}"
                );
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
}
