//! API keys: format, hashing, permissions, and the per-process verification cache.
//!
//! Keys have 256 bits of entropy, so a plain SHA-256 is the right stored form (no salt or slow
//! hash needed); the database lookup is by that digest and the final comparison is constant
//! time. A verified key is trusted for `auth.cache_ttl_secs` (default 5 s) without a database
//! round trip; after that it is read again, so a revoked key stops working on every API
//! process within that many seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use entity::{Environment, api_key};
use rand::RngCore;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::cache::TtlCache;
use crate::error::ApiError;
use crate::state::AppState;

pub const API_KEY_HEADER: &str = "x-api-key";

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
}

impl Permission {
    pub const ALL: [Permission; 9] = [
        Permission::InvoicesRead,
        Permission::InvoicesWrite,
        Permission::PayoutsRead,
        Permission::PayoutsWrite,
        Permission::BalancesRead,
        Permission::RefundsRead,
        Permission::RefundsWrite,
        Permission::AddressesRead,
        Permission::AddressesWrite,
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
        }
    }

    pub fn parse(s: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// A set of permissions as a bitmask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Permissions(u16);

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
    pub key_id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub permissions: Permissions,
}

impl Principal {
    pub fn require(&self, p: Permission) -> Result<(), ApiError> {
        if self.permissions.contains(p) { Ok(()) } else { Err(ApiError::forbidden(p.as_str())) }
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
    pub fn verify_cached(&self, key: &str) -> Option<Result<Arc<Principal>, ApiError>> {
        let Some(claimed_env) = parse_key_format(key) else {
            return Some(Err(malformed_key()));
        };
        self.verdicts.get(&hash_key(key)).map(|v| judge(v, claimed_env))
    }

    /// Verifies a key string: format, then cache, then database.
    pub async fn verify(&self, db: &DatabaseConnection, key: &str) -> Result<Arc<Principal>, ApiError> {
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

    async fn load(db: &DatabaseConnection, digest: &[u8; 32]) -> Result<Verdict, ApiError> {
        let hex_digest = hex::encode(digest);
        let row = api_key::Entity::find().filter(api_key::Column::KeyHash.eq(hex_digest.clone())).one(db).await?;
        Ok(match row {
            Some(k) if bool::from(k.key_hash.as_bytes().ct_eq(hex_digest.as_bytes())) => {
                if k.revoked_at.is_some() {
                    Verdict::Rejected("API key has been revoked")
                } else {
                    Verdict::Valid(Arc::new(Principal {
                        key_id: k.id,
                        merchant_id: k.merchant_id,
                        environment: k.environment,
                        permissions: Permissions::from_json(&k.permissions),
                    }))
                }
            }
            _ => Verdict::Rejected("unknown API key"),
        })
    }
}

fn malformed_key() -> ApiError {
    ApiError::unauthorized("malformed API key: expected sk_test_ or sk_live_ followed by 64 hex characters")
}

/// A verdict for a key claiming `claimed_env`.
fn judge(verdict: Verdict, claimed_env: Environment) -> Result<Arc<Principal>, ApiError> {
    match verdict {
        Verdict::Valid(p) if p.environment == claimed_env => Ok(p),
        Verdict::Valid(_) => Err(ApiError::unauthorized("API key does not match its environment")),
        Verdict::Rejected(why) => Err(ApiError::unauthorized(why)),
    }
}

/// A key the rate limiting layer already verified for this request (a request extension), so
/// the extractor does not verify it twice.
#[derive(Clone)]
pub struct VerifiedKey(pub Arc<Principal>);

/// Extractor: the authenticated caller. 401 for a missing, malformed, unknown or revoked key.
pub struct Auth(pub Arc<Principal>);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(VerifiedKey(p)) = parts.extensions.get::<VerifiedKey>() {
            return Ok(Auth(p.clone()));
        }
        let key = parts
            .headers
            .get(API_KEY_HEADER)
            .ok_or_else(|| ApiError::unauthorized("missing X-API-Key header"))?
            .to_str()
            .map_err(|_| ApiError::unauthorized("malformed API key"))?;
        state.keys.verify(&state.db, key).await.map(Auth)
    }
}

impl std::ops::Deref for Auth {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}

/// A permission named at the type level, for [`Allowed`].
pub trait RequiredPermission: Send + Sync + 'static {
    const PERMISSION: Permission;
}

/// Marker types of the permissions, one per [`Permission`].
pub mod perm {
    macro_rules! markers {
        ($($name:ident),* $(,)?) => {$(
            #[derive(Debug, Clone, Copy)]
            pub struct $name;
            impl super::RequiredPermission for $name {
                const PERMISSION: super::Permission = super::Permission::$name;
            }
        )*};
    }
    markers!(
        InvoicesRead,
        InvoicesWrite,
        PayoutsRead,
        PayoutsWrite,
        BalancesRead,
        RefundsRead,
        RefundsWrite,
        AddressesRead,
        AddressesWrite,
    );
}

/// Extractor: an authenticated caller holding permission `P`. 401 as [`Auth`], then 403 when
/// the key lacks `P`. Put it before every other extractor of a handler (path, query, headers,
/// body last): axum runs extractors in order, so a key without the permission gets 403 whatever
/// it sends, and learns nothing about what the route would accept.
pub struct Allowed<P: RequiredPermission>(pub Arc<Principal>, std::marker::PhantomData<P>);

impl<P: RequiredPermission> FromRequestParts<AppState> for Allowed<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Auth(who) = Auth::from_request_parts(parts, state).await?;
        who.require(P::PERMISSION)?;
        Ok(Allowed(who, std::marker::PhantomData))
    }
}

impl<P: RequiredPermission> std::ops::Deref for Allowed<P> {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
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
