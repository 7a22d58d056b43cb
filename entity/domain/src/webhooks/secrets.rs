//! Endpoint secrets: generated as `whsec_` + 32 random bytes in hex, shown once, and stored
//! encrypted (XChaCha20-Poly1305 with the operator's webhook key). The deliverer needs the
//! secret itself to sign, so it cannot be hashed; the ciphertext is bound to its merchant and
//! environment, so a row copied onto another merchant does not decrypt.

use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use entity::{Environment, MerchantId};

use crate::config::Config;

/// Prefix of every endpoint secret.
pub const PREFIX: &str = "whsec_";
const FORMAT: &str = "v1";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("webhook secret key: {0}")]
    Key(String),
    #[error("webhook secret does not decrypt with the configured key (wrong `webhooks.secret_key`?)")]
    Decrypt,
}

/// A fresh endpoint secret.
pub fn generate() -> String {
    format!("{PREFIX}{}", hex::encode(rand::random::<[u8; 32]>()))
}

/// Encrypts endpoint secrets with the operator's key, and decrypts them with it or, during a
/// key rotation, with one of the previous keys.
#[derive(Clone)]
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
    previous: Vec<XChaCha20Poly1305>,
}

/// Which key opened a sealed secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedWith {
    Current,
    Previous,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(***)")
    }
}

impl SecretBox {
    pub fn new(key: [u8; 32]) -> SecretBox {
        SecretBox { cipher: XChaCha20Poly1305::new(&key.into()), previous: Vec::new() }
    }

    /// Also decrypts with these keys (never encrypts with them).
    pub fn with_previous(mut self, keys: &[[u8; 32]]) -> SecretBox {
        self.previous = keys.iter().map(|k| XChaCha20Poly1305::new(&(*k).into())).collect();
        self
    }

    /// A fresh random key as 64 hex characters (what `webhooks.secret_key` takes).
    pub fn new_key_hex() -> String {
        hex::encode(rand::random::<[u8; 32]>())
    }

    /// 64 hex characters -> the key.
    pub fn parse_key(hex_key: &str) -> Result<[u8; 32], SecretError> {
        crate::config::parse_secret_key(hex_key).map_err(|e| SecretError::Key(e.into()))
    }

    /// The key from `webhooks.secret_key`, else from the key file (created on the embedded
    /// SQLite default when missing).
    pub fn from_config(config: &Config) -> Result<SecretBox, SecretError> {
        let previous: Vec<[u8; 32]> =
            config.webhooks.previous_secret_keys.iter().map(|k| Self::parse_key(&k.0)).collect::<Result<_, _>>()?;
        Ok(Self::current_from_config(config)?.with_previous(&previous))
    }

    fn current_from_config(config: &Config) -> Result<SecretBox, SecretError> {
        if let Some(k) = &config.webhooks.secret_key {
            return Ok(SecretBox::new(Self::parse_key(&k.0)?));
        }
        let (path, may_create) = match &config.webhooks.secret_key_file {
            Some(p) => (p.clone(), false),
            None => match default_key_file(&config.database_url) {
                Some(p) => (p, true),
                None => {
                    return Err(SecretError::Key(
                        "set `webhooks.secret_key` (PAYGATE_WEBHOOKS__SECRET_KEY, 64 hex characters) or \
                         `webhooks.secret_key_file`; every process that runs `ops webhooks` or the deliverer needs the same key"
                            .into(),
                    ));
                }
            },
        };
        Ok(SecretBox::new(load_or_create(&path, may_create)?))
    }

    /// `v1.<nonce hex>.<ciphertext hex>`.
    pub fn seal(&self, merchant_id: MerchantId, env: Environment, secret: &str) -> String {
        self.seal_aad(&aad(merchant_id, env), secret)
    }

    fn seal_aad(&self, aad: &str, secret: &str) -> String {
        let nonce_bytes = rand::random::<[u8; 24]>();
        let nonce = XNonce::from(nonce_bytes);
        let ct = self
            .cipher
            .encrypt(&nonce, Payload { msg: secret.as_bytes(), aad: aad.as_bytes() })
            .expect("XChaCha20-Poly1305 encryption of a short message cannot fail");
        format!("{FORMAT}.{}.{}", hex::encode(nonce_bytes), hex::encode(ct))
    }

    pub fn open(&self, merchant_id: MerchantId, env: Environment, sealed: &str) -> Result<String, SecretError> {
        self.open_with(merchant_id, env, sealed).map(|(secret, _)| secret)
    }

    /// Seals a secret that is not a webhook secret (a dashboard user's TOTP secret) under the
    /// same key, bound to `label` (`dashboard-totp:<user id>`): a sealed value moved to another
    /// row or purpose does not open.
    pub fn seal_labeled(&self, label: &str, secret: &str) -> String {
        self.seal_aad(&format!("paygate:{label}"), secret)
    }

    /// Opens what [`SecretBox::seal_labeled`] sealed with the same label (current key, then the
    /// previous ones).
    pub fn open_labeled(&self, label: &str, sealed: &str) -> Result<String, SecretError> {
        self.open_labeled_with(label, sealed).map(|(secret, _)| secret)
    }

    /// [`SecretBox::open_labeled`], telling which key opened it (a key rotation re-seals what a
    /// previous key opened).
    pub fn open_labeled_with(&self, label: &str, sealed: &str) -> Result<(String, OpenedWith), SecretError> {
        let aad = format!("paygate:{label}");
        if let Ok(s) = open_aad(&self.cipher, &aad, sealed) {
            return Ok((s, OpenedWith::Current));
        }
        self.previous
            .iter()
            .find_map(|c| open_aad(c, &aad, sealed).ok())
            .map(|s| (s, OpenedWith::Previous))
            .ok_or(SecretError::Decrypt)
    }

    /// [`SecretBox::open`], telling which key opened it (a rotation re-seals the ones a previous
    /// key opened).
    pub fn open_with(
        &self,
        merchant_id: MerchantId,
        env: Environment,
        sealed: &str,
    ) -> Result<(String, OpenedWith), SecretError> {
        if let Ok(s) = open_one(&self.cipher, merchant_id, env, sealed) {
            return Ok((s, OpenedWith::Current));
        }
        for cipher in &self.previous {
            if let Ok(s) = open_one(cipher, merchant_id, env, sealed) {
                return Ok((s, OpenedWith::Previous));
            }
        }
        Err(SecretError::Decrypt)
    }
}

/// Opens `v1.<nonce hex>.<ciphertext hex>` with one key.
fn open_one(
    cipher: &XChaCha20Poly1305,
    merchant_id: MerchantId,
    env: Environment,
    sealed: &str,
) -> Result<String, SecretError> {
    open_aad(cipher, &aad(merchant_id, env), sealed)
}

/// Opens `v1.<nonce hex>.<ciphertext hex>` with one key and its associated data.
fn open_aad(cipher: &XChaCha20Poly1305, aad: &str, sealed: &str) -> Result<String, SecretError> {
    let mut parts = sealed.split('.');
    let (Some(FORMAT), Some(nonce), Some(ct), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(SecretError::Decrypt);
    };
    let nonce: [u8; 24] = hex::decode(nonce).ok().and_then(|n| n.try_into().ok()).ok_or(SecretError::Decrypt)?;
    let ct = hex::decode(ct).map_err(|_| SecretError::Decrypt)?;
    let plain = cipher
        .decrypt(&XNonce::from(nonce), Payload { msg: &ct, aad: aad.as_bytes() })
        .map_err(|_| SecretError::Decrypt)?;
    String::from_utf8(plain).map_err(|_| SecretError::Decrypt)
}

fn aad(merchant_id: MerchantId, env: Environment) -> String {
    format!("paygate-webhook-secret:{merchant_id}:{env}")
}

/// `sqlite://data/paygate.db?mode=rwc` -> `data/paygate-webhooks.key`; `None` for PostgreSQL
/// and in-memory SQLite, where several machines would each make their own key.
pub fn default_key_file(database_url: &str) -> Option<PathBuf> {
    crate::config::beside_sqlite_file(database_url, "webhooks.key")
}

fn load_or_create(path: &Path, may_create: bool) -> Result<[u8; 32], SecretError> {
    match std::fs::read_to_string(path) {
        Ok(s) => SecretBox::parse_key(&s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && may_create => {
            let key = rand::random::<[u8; 32]>();
            write_new_key(path, &key).map_err(|e| SecretError::Key(format!("creating {}: {e}", path.display())))?;
            // Another process may have won the race to create it: read what is there.
            let s = std::fs::read_to_string(path)
                .map_err(|e| SecretError::Key(format!("reading {}: {e}", path.display())))?;
            SecretBox::parse_key(&s)
        }
        Err(e) => Err(SecretError::Key(format!("reading {}: {e}", path.display()))),
    }
}

fn write_new_key(path: &Path, key: &[u8; 32]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(hex::encode(key).as_bytes())?;
            f.sync_all()
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn during_a_rotation_both_keys_open_and_only_the_new_one_seals() {
        let (old, new) = ([1; 32], [2; 32]);
        let m = MerchantId::from(Uuid::now_v7());
        let under_old = SecretBox::new(old).seal(m, Environment::Live, "whsec_a");
        let rotating = SecretBox::new(new).with_previous(&[old]);
        assert_eq!(
            rotating.open_with(m, Environment::Live, &under_old).unwrap(),
            ("whsec_a".into(), OpenedWith::Previous)
        );
        let under_new = rotating.seal(m, Environment::Live, "whsec_a");
        assert_eq!(rotating.open_with(m, Environment::Live, &under_new).unwrap().1, OpenedWith::Current);
        assert!(SecretBox::new(old).open(m, Environment::Live, &under_new).is_err(), "sealed with the new key");
        assert!(SecretBox::new(new).open(m, Environment::Live, &under_old).is_err());
    }

    #[test]
    fn seal_open_round_trip_and_binding() {
        let b = SecretBox::new([7; 32]);
        let m = MerchantId::from(Uuid::now_v7());
        let secret = generate();
        assert!(secret.starts_with(PREFIX) && secret.len() == PREFIX.len() + 64);
        let sealed = b.seal(m, Environment::Test, &secret);
        assert!(!sealed.contains(&secret[PREFIX.len()..]), "ciphertext must not contain the secret");
        assert_eq!(b.open(m, Environment::Test, &sealed).unwrap(), secret);
        // Bound to merchant and environment.
        assert!(b.open(m, Environment::Live, &sealed).is_err());
        assert!(b.open(Uuid::now_v7().into(), Environment::Test, &sealed).is_err());
        // Another key does not open it; a tampered ciphertext does not either.
        assert!(SecretBox::new([8; 32]).open(m, Environment::Test, &sealed).is_err());
        let mut t = sealed.clone().into_bytes();
        let last = t.len() - 1;
        t[last] = if t[last] == b'0' { b'1' } else { b'0' };
        assert!(b.open(m, Environment::Test, &String::from_utf8(t).unwrap()).is_err());
        // Two seals of one secret differ (fresh nonce).
        assert_ne!(sealed, b.seal(m, Environment::Test, &secret));
    }

    #[test]
    fn key_file_is_created_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}/shop.db?mode=rwc", dir.path().display());
        let path = default_key_file(&db).unwrap();
        assert_eq!(path, dir.path().join("shop-webhooks.key"));
        let a = load_or_create(&path, true).unwrap();
        let b = load_or_create(&path, true).unwrap();
        assert_eq!(a, b);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert!(default_key_file("postgres://db/x").is_none());
        assert!(default_key_file("sqlite::memory:").is_none());
        assert!(load_or_create(&dir.path().join("missing.key"), false).is_err());
    }

    #[test]
    fn keys_must_be_32_bytes_of_hex() {
        assert!(SecretBox::parse_key(&"ab".repeat(32)).is_ok());
        assert!(SecretBox::parse_key(&"ab".repeat(31)).is_err());
        assert!(SecretBox::parse_key(&"zz".repeat(32)).is_err());
    }
}
