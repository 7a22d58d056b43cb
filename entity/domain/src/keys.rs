//! API keys: format, hashing, permissions, the caller they authenticate ([`Principal`]) and the
//! per-process verification cache. The HTTP extractors over them are `auth`'s.
//!
//! Keys have 256 bits of entropy, so a plain SHA-256 is the right stored form (no salt or slow
//! hash needed); the database lookup is by that digest and the final comparison is constant
//! time. A verified key is trusted for `auth.cache_ttl_secs` (default 5 s) without a database
//! round trip; after that it is read again, so a revoked key stops working on every API
//! process within that many seconds.
//!
//! A key is `sk_test_` or `sk_live_` + 64 lowercase hex characters. The cache holds rejections
//! too (an unknown or revoked key costs no database round trip either), and
//! `auth.cache_ttl_secs` is at most 60.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use entity::{ApiKeyId, Environment, MerchantId, api_key};
use rand::RngCore;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::cache::TtlCache;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub enum Permission {
    #[serde(rename = "invoices:read")]
    InvoicesRead,
    #[serde(rename = "invoices:write")]
    InvoicesWrite,
    #[serde(rename = "payouts:read")]
    PayoutsRead,
    #[serde(rename = "payouts:write")]
    PayoutsWrite,
    #[serde(rename = "balances:read")]
    BalancesRead,
    #[serde(rename = "refunds:read")]
    RefundsRead,
    #[serde(rename = "refunds:write")]
    RefundsWrite,
    #[serde(rename = "addresses:read")]
    AddressesRead,
    #[serde(rename = "addresses:write")]
    AddressesWrite,
    #[serde(rename = "events:read")]
    EventsRead,
    #[serde(rename = "settings:read")]
    SettingsRead,
    #[serde(rename = "settings:write")]
    SettingsWrite,
    #[serde(rename = "keys:read")]
    KeysRead,
    #[serde(rename = "keys:write")]
    KeysWrite,
    #[serde(rename = "webhooks:read")]
    WebhooksRead,
    #[serde(rename = "webhooks:write")]
    WebhooksWrite,
    /// The accounting exports (`GET /v1/exports/{kind}`): CSV of invoices, payments, ledger
    /// entries and payouts.
    #[serde(rename = "exports:read")]
    ExportsRead,
}

impl Permission {
    pub const ALL: [Permission; 17] = [
        Permission::InvoicesRead,
        Permission::InvoicesWrite,
        Permission::PayoutsRead,
        Permission::PayoutsWrite,
        Permission::BalancesRead,
        Permission::RefundsRead,
        Permission::RefundsWrite,
        Permission::AddressesRead,
        Permission::AddressesWrite,
        Permission::EventsRead,
        Permission::SettingsRead,
        Permission::SettingsWrite,
        Permission::KeysRead,
        Permission::KeysWrite,
        Permission::WebhooksRead,
        Permission::WebhooksWrite,
        Permission::ExportsRead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::InvoicesRead => "invoices:read",
            Permission::InvoicesWrite => "invoices:write",
            Permission::PayoutsRead => "payouts:read",
            Permission::PayoutsWrite => "payouts:write",
            Permission::BalancesRead => "balances:read",
            Permission::RefundsRead => "refunds:read",
            Permission::RefundsWrite => "refunds:write",
            Permission::AddressesRead => "addresses:read",
            Permission::AddressesWrite => "addresses:write",
            Permission::EventsRead => "events:read",
            Permission::SettingsRead => "settings:read",
            Permission::SettingsWrite => "settings:write",
            Permission::KeysRead => "keys:read",
            Permission::KeysWrite => "keys:write",
            Permission::WebhooksRead => "webhooks:read",
            Permission::WebhooksWrite => "webhooks:write",
            Permission::ExportsRead => "exports:read",
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of permissions as a bitmask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Permissions(u32);

impl Permissions {
    pub fn all() -> Self {
        Permissions(Permission::ALL.iter().fold(0, |m, p| m | p.bit()))
    }

    pub fn contains(self, p: Permission) -> bool {
        self.0 & p.bit() != 0
    }

    pub fn from_json(v: &serde_json::Value) -> Self {
        let mut m = 0;
        for p in v.as_array().into_iter().flatten().filter_map(|s| s.as_str()).filter_map(Permission::parse) {
            m |= p.bit();
        }
        Permissions(m)
    }

    /// Every permission of `self` is in `other`.
    pub fn within(self, other: Permissions) -> bool {
        self.0 & !other.0 == 0
    }

    /// The permissions of `self` not in `other`.
    pub fn beyond(self, other: Permissions) -> Vec<Permission> {
        Permission::ALL.into_iter().filter(|p| self.contains(*p) && !other.contains(*p)).collect()
    }

    pub fn to_json(self) -> serde_json::Value {
        serde_json::Value::Array(
            Permission::ALL
                .iter()
                .filter(|p| self.contains(**p))
                .map(|p| serde_json::Value::from(p.as_str()))
                .collect(),
        )
    }
}

impl FromIterator<Permission> for Permissions {
    fn from_iter<I: IntoIterator<Item = Permission>>(iter: I) -> Self {
        Permissions(iter.into_iter().fold(0, |m, p| m | p.bit()))
    }
}

/// Generates a new key string: `sk_test_`/`sk_live_` + 64 lowercase hex characters.
pub fn generate_key(env: Environment) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("sk_{}_{}", env.as_str(), hex::encode(bytes))
}

/// The environment a well-formed key claims, or `None` for a malformed key.
pub fn parse_key_format(key: &str) -> Option<Environment> {
    let (env, hexpart) = if let Some(rest) = key.strip_prefix("sk_test_") {
        (Environment::Test, rest)
    } else if let Some(rest) = key.strip_prefix("sk_live_") {
        (Environment::Live, rest)
    } else {
        return None;
    };
    (hexpart.len() == 64 && hexpart.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))).then_some(env)
}

pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Who is calling: the key's merchant, environment and permissions.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: ApiKeyId,
    pub merchant_id: MerchantId,
    pub environment: Environment,
    pub permissions: Permissions,
    /// A dashboard user acting through their session (then `key_id` is nil and `permissions`
    /// are their role's, `users::roles::key_permissions`); `None` for an API key.
    pub user_id: Option<uuid::Uuid>,
}

impl Principal {
    /// Who the audit log names: `api_key:<id>` or `user:<id>`.
    pub fn actor(&self) -> String {
        match self.user_id {
            Some(u) => format!("user:{u}"),
            None => format!("api_key:{}", self.key_id),
        }
    }
}

#[derive(Clone)]
enum Verdict {
    Valid(Arc<Principal>),
    /// Unknown or revoked: cached too, so a flood of bad keys does not reach the database.
    Rejected(&'static str),
}

/// Verified (and rejected) keys by SHA-256 digest. A lookup by digest reveals nothing about a
/// key through timing (finding a key from its digest is a preimage attack); the stored hash is
/// compared with the presented one in constant time when a key is loaded.
pub struct KeyCache {
    verdicts: TtlCache<[u8; 32], Verdict>,
    loads: AtomicU64,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> Self {
        KeyCache { verdicts: TtlCache::new(ttl), loads: AtomicU64::new(0) }
    }

    /// How many times a key was read from the database (cache misses).
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// The key's verdict when it needs no database round trip: a malformed key, or one whose
    /// verdict (valid or rejected) is cached. `None`: [`KeyCache::verify`] would look it up.
    pub fn verify_cached(&self, key: &str) -> Option<Result<Arc<Principal>, KeyError>> {
        let Some(claimed_env) = parse_key_format(key) else {
            return Some(Err(malformed_key()));
        };
        self.verdicts.get(&hash_key(key)).map(|v| judge(v, claimed_env))
    }

    /// Drops the cached verdict of the key whose stored digest is `key_hash` (hex): a key
    /// revoked or rolled through this process is judged from the database at its next use.
    pub fn forget(&self, key_hash: &str) {
        if let Some(digest) = hex::decode(key_hash).ok().and_then(|d| <[u8; 32]>::try_from(d).ok()) {
            self.verdicts.forget(&digest);
        }
    }

    /// Verifies a key string: format, then cache, then database.
    pub async fn verify(&self, db: &DatabaseConnection, key: &str) -> Result<Arc<Principal>, KeyError> {
        if let Some(verdict) = self.verify_cached(key) {
            return verdict;
        }
        let claimed_env = parse_key_format(key).ok_or_else(malformed_key)?;
        let digest = hash_key(key);
        self.loads.fetch_add(1, Ordering::Relaxed);
        let v = Self::load(db, &digest).await?;
        self.verdicts.put(digest, v.clone());
        judge(v, claimed_env)
    }

    async fn load(db: &DatabaseConnection, digest: &[u8; 32]) -> Result<Verdict, sea_orm::DbErr> {
        let hex_digest = hex::encode(digest);
        let row = api_key::Entity::find().filter(api_key::Column::KeyHash.eq(hex_digest.clone())).one(db).await?;
        Ok(match row {
            Some(k) if bool::from(k.key_hash.as_bytes().ct_eq(hex_digest.as_bytes())) => {
                // A rolled key's `revoked_at` is ahead: it works until then.
                if k.revoked_at.is_some_and(|at| at <= chrono::Utc::now()) {
                    Verdict::Rejected("API key has been revoked")
                } else {
                    Verdict::Valid(Arc::new(Principal {
                        key_id: k.id.into(),
                        merchant_id: k.merchant_id.into(),
                        environment: k.environment,
                        permissions: Permissions::from_json(&k.permissions),
                        user_id: None,
                    }))
                }
            }
            _ => Verdict::Rejected("unknown API key"),
        })
    }
}

/// Why a presented key does not authenticate (the API answers 401 with the message).
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Rejected(&'static str),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

fn malformed_key() -> KeyError {
    KeyError::Rejected("malformed API key: expected sk_test_ or sk_live_ followed by 64 hex characters")
}

/// A verdict for a key claiming `claimed_env`.
fn judge(verdict: Verdict, claimed_env: Environment) -> Result<Arc<Principal>, KeyError> {
    match verdict {
        Verdict::Valid(p) if p.environment == claimed_env => Ok(p),
        Verdict::Valid(_) => Err(KeyError::Rejected("API key does not match its environment")),
        Verdict::Rejected(why) => Err(KeyError::Rejected(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_spec_format() {
        let k = generate_key(Environment::Test);
        assert!(k.starts_with("sk_test_") && k.len() == 8 + 64);
        assert_eq!(parse_key_format(&k), Some(Environment::Test));
        let l = generate_key(Environment::Live);
        assert_eq!(parse_key_format(&l), Some(Environment::Live));
        assert_ne!(generate_key(Environment::Test), k);
    }

    #[test]
    fn malformed_keys_are_refused() {
        let hex64 = "a".repeat(64);
        for bad in [
            String::new(),
            format!("sk_prod_{hex64}"),
            format!("sk_test_{}", "a".repeat(63)),
            format!("sk_test_{}", "A".repeat(64)),
            format!("sk_test_{}g", "a".repeat(63)),
            format!("pk_test_{hex64}"),
        ] {
            assert_eq!(parse_key_format(&bad), None, "{bad}");
        }
    }

    #[test]
    fn permission_sets_round_trip() {
        let p: Permissions = [Permission::InvoicesRead, Permission::RefundsWrite].into_iter().collect();
        assert!(p.contains(Permission::InvoicesRead) && !p.contains(Permission::InvoicesWrite));
        assert_eq!(Permissions::from_json(&p.to_json()), p);
        assert_eq!(Permissions::from_json(&Permissions::all().to_json()), Permissions::all());
    }
}
