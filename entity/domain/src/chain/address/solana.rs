//! Solana: deposit addresses from an operator-provisioned pool (`pool[index]`), or, in the
//! test environment, keys generated per index; payouts to base58 strings of 32 bytes.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::base58;
use super::error::{AddressConfigError, AddressError, DeriveError, invalid};
use super::{AddressFamily, ChainNet, DerivedAddress, validate_address};

const FAMILY: AddressFamily = AddressFamily::Solana;

/// Domain separator of the built-in Solana test pool.
const BUILTIN_TEST_DOMAIN: &[u8] = b"paygate-test-solana";

/// Where an environment's Solana deposit addresses come from.
pub(super) enum SolanaSource {
    Pool(Vec<String>),
    /// Deterministic keys for the test environment, generated per index.
    BuiltinTest,
}

impl SolanaSource {
    pub(super) fn is_configured(&self) -> bool {
        match self {
            SolanaSource::Pool(pool) => !pool.is_empty(),
            SolanaSource::BuiltinTest => true,
        }
    }

    pub(super) fn derive(&self, index: u64) -> Result<DerivedAddress, DeriveError> {
        match self {
            SolanaSource::Pool(pool) if pool.is_empty() => Err(DeriveError::NotConfigured { family: FAMILY }),
            SolanaSource::Pool(pool) => usize::try_from(index)
                .ok()
                .and_then(|i| pool.get(i))
                .map(|a| DerivedAddress::plain(a.clone()))
                .ok_or(DeriveError::PoolExhausted { index, size: pool.len() }),
            SolanaSource::BuiltinTest => Ok(DerivedAddress::plain(builtin_test_address(index))),
        }
    }
}

/// The configured pool, trimmed; every entry a valid address, none listed twice.
/// `key` turns `solana_pool[i]` into the configuration key named in errors.
pub(super) fn parse_pool(
    entries: &[String],
    net: ChainNet,
    key: impl Fn(&str) -> String,
) -> Result<Vec<String>, AddressConfigError> {
    let mut pool = Vec::with_capacity(entries.len());
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(entries.len());
    for (i, raw) in entries.iter().enumerate() {
        let entry = raw.trim();
        let entry_key = key(&format!("solana_pool[{i}]"));
        validate_address(FAMILY, net, entry, None)
            .map_err(|reason| AddressConfigError::InvalidAddress { key: entry_key.clone(), reason })?;
        if let Some(first) = seen.insert(entry, i) {
            return Err(AddressConfigError::DuplicatePoolEntry {
                key: entry_key,
                first_key: key(&format!("solana_pool[{first}]")),
            });
        }
        pool.push(entry.to_owned());
    }
    Ok(pool)
}

/// The ed25519 public key of the signing key `sha256(domain || index as u64 big-endian)`.
fn builtin_test_address(index: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(BUILTIN_TEST_DOMAIN);
    hasher.update(index.to_be_bytes());
    let secret: [u8; 32] = hasher.finalize().into();
    let public = ed25519_dalek::SigningKey::from_bytes(&secret).verifying_key();
    bs58::encode(public.as_bytes()).into_string()
}

pub(super) fn validate(address: &str) -> Result<(), AddressError> {
    let bytes = bs58::decode(address).into_vec().map_err(|e| base58::explain(e, FAMILY))?;
    if bytes.len() != 32 {
        return Err(invalid(
            FAMILY,
            format!("decodes to {} bytes, but a Solana address is exactly 32 bytes", bytes.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::AddressDeriver;
    use super::super::fixtures::*;
    use super::*;

    const BUILTIN_SOLANA: [(u64, &str); 5] = [
        (0, "DFpBSQbtdtwUZ6b72SEtMuF4QqmLyfTfnP3Q94PSxszT"),
        (1, "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn"),
        (7, "3JTjP5cNY3835Mxah842rCGozAD4U1uEDsMSXdeLEuVA"),
        (1_000_000, "21pNxphwYNEaCZgQAB2m45f7bnCSdNwwSCz3m6vjgU7s"),
        (u64::MAX, "FTPvMikdHkd9Bka1pS7iYupf76L7QwmQ14FvKZhfi6wp"),
    ];

    #[test]
    fn builtin_test_vectors() {
        assert_vectors(&AddressDeriver::builtin_test(), AddressFamily::Solana, &BUILTIN_SOLANA);
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
    fn solana_pool() {
        let d = mainnet();
        assert_eq!(addr(&d, AddressFamily::Solana, 1), "7iJA1L9KZZEcQwYHvq8NbG62T74sjfHswVMrETapJnhn");
        let err = d.derive(AddressFamily::Solana, 2).unwrap_err();
        assert_eq!(err, DeriveError::PoolExhausted { index: 2, size: 2 });
        assert!(err.to_string().contains("solana_pool"));
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
