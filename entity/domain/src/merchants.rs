//! Merchants and API keys: the operator-side service behind `ops`.

use chrono::Utc;
use entity::{Amount, ApiKeyId, Environment, MerchantId, api_key, merchant};
use rust_decimal::Decimal;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder,
};
use uuid::Uuid;

use crate::keys::{Permissions, generate_key, hash_key};

#[derive(Debug, Clone)]
pub struct MerchantSettings {
    pub base_currency: String,
    pub invoice_lifetime_secs: i64,
    pub underpayment_tolerance_percent: Decimal,
}

impl Default for MerchantSettings {
    fn default() -> Self {
        MerchantSettings {
            base_currency: "USD".into(),
            invoice_lifetime_secs: 3600,
            underpayment_tolerance_percent: Decimal::ZERO,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MerchantError {
    #[error("{0}")]
    Invalid(String),
    #[error("merchant {0} not found")]
    NotFound(MerchantId),
    #[error("API key {0} not found")]
    KeyNotFound(ApiKeyId),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

impl MerchantSettings {
    pub fn validate(&self) -> Result<(), MerchantError> {
        let code = &self.base_currency;
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(MerchantError::Invalid(format!(
                "base_currency must be a 3-letter upper-case fiat code, got {code:?}"
            )));
        }
        if !(60..=30 * 24 * 3600).contains(&self.invoice_lifetime_secs) {
            return Err(MerchantError::Invalid("invoice_lifetime_secs must be between 60 and 2592000".into()));
        }
        if self.underpayment_tolerance_percent < Decimal::ZERO
            || self.underpayment_tolerance_percent > Decimal::from(50)
        {
            return Err(MerchantError::Invalid("underpayment_tolerance_percent must be between 0 and 50".into()));
        }
        Ok(())
    }
}

pub async fn create_merchant(
    db: &impl ConnectionTrait,
    name: &str,
    settings: &MerchantSettings,
) -> Result<merchant::Model, MerchantError> {
    settings.validate()?;
    if name.trim().is_empty() || name.len() > 200 {
        return Err(MerchantError::Invalid("name must be 1 to 200 characters".into()));
    }
    let now = Utc::now();
    let m = merchant::ActiveModel {
        id: Set(Uuid::now_v7()),
        name: Set(name.trim().to_owned()),
        base_currency: Set(settings.base_currency.clone()),
        invoice_lifetime_secs: Set(settings.invoice_lifetime_secs),
        underpayment_tolerance_percent: Set(Amount::new(settings.underpayment_tolerance_percent)),
        rate_limit_reads: Set(None),
        rate_limit_writes: Set(None),
        rate_limit_test_helpers: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        payer_reply_to: Set(None),
    };
    Ok(m.insert(db).await?)
}

/// A merchant by id. The house account (`treasury::HOUSE`) is not a merchant: it is never found,
/// so no key, setting or command can name it.
pub async fn get_merchant(db: &impl ConnectionTrait, id: MerchantId) -> Result<merchant::Model, MerchantError> {
    if crate::treasury::is_house(id) {
        return Err(MerchantError::NotFound(id));
    }
    merchant::Entity::find_by_id(id).one(db).await?.ok_or(MerchantError::NotFound(id))
}

/// Every merchant, oldest first (not the house account).
pub async fn list_merchants(db: &DatabaseConnection) -> Result<Vec<merchant::Model>, MerchantError> {
    Ok(merchant::Entity::find()
        .filter(merchant::Column::Id.ne(crate::treasury::HOUSE))
        .order_by_asc(merchant::Column::CreatedAt)
        .all(db)
        .await?)
}

pub async fn update_settings(
    db: &impl ConnectionTrait,
    id: MerchantId,
    settings: &MerchantSettings,
) -> Result<merchant::Model, MerchantError> {
    settings.validate()?;
    let m = get_merchant(db, id).await?;
    let mut am: merchant::ActiveModel = m.into();
    am.base_currency = Set(settings.base_currency.clone());
    am.invoice_lifetime_secs = Set(settings.invoice_lifetime_secs);
    am.underpayment_tolerance_percent = Set(Amount::new(settings.underpayment_tolerance_percent));
    am.updated_at = Set(Utc::now());
    Ok(am.update(db).await?)
}

/// A merchant's overrides of the `[rate_limits]` classes that are counted per key or merchant:
/// requests per the class's configured period; `None` keeps the configured limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MerchantRateLimits {
    pub reads: Option<u32>,
    pub writes: Option<u32>,
    pub test_helpers: Option<u32>,
}

/// Largest per-merchant limit (requests per period).
pub const MAX_RATE_LIMIT: u32 = 1_000_000;

impl MerchantRateLimits {
    pub fn of(m: &merchant::Model) -> Self {
        let get = |v: Option<i32>| v.and_then(|n| u32::try_from(n).ok());
        MerchantRateLimits {
            reads: get(m.rate_limit_reads),
            writes: get(m.rate_limit_writes),
            test_helpers: get(m.rate_limit_test_helpers),
        }
    }

    pub fn validate(&self) -> Result<(), MerchantError> {
        for (name, v) in [("reads", self.reads), ("writes", self.writes), ("test_helpers", self.test_helpers)] {
            if v.is_some_and(|n| !(1..=MAX_RATE_LIMIT).contains(&n)) {
                return Err(MerchantError::Invalid(format!(
                    "rate limit {name} must be between 1 and {MAX_RATE_LIMIT}"
                )));
            }
        }
        Ok(())
    }
}

/// Sets the merchant's rate limit overrides (all three: `None` clears one). API processes
/// apply them within `auth.cache_ttl_secs` (their merchant cache).
pub async fn set_rate_limits(
    db: &impl ConnectionTrait,
    id: MerchantId,
    limits: &MerchantRateLimits,
) -> Result<merchant::Model, MerchantError> {
    limits.validate()?;
    let m = get_merchant(db, id).await?;
    let as_column = |v: Option<u32>| v.and_then(|n| i32::try_from(n).ok());
    let mut am: merchant::ActiveModel = m.into();
    am.rate_limit_reads = Set(as_column(limits.reads));
    am.rate_limit_writes = Set(as_column(limits.writes));
    am.rate_limit_test_helpers = Set(as_column(limits.test_helpers));
    am.updated_at = Set(Utc::now());
    Ok(am.update(db).await?)
}

/// Creates a key and returns it with its plaintext, which is not stored and cannot be shown again.
pub async fn create_api_key(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    permissions: Permissions,
    label: Option<&str>,
) -> Result<(api_key::Model, String), MerchantError> {
    get_merchant(db, merchant_id).await?;
    let key = generate_key(env);
    let model = api_key::ActiveModel {
        id: Set(Uuid::now_v7()),
        merchant_id: Set(merchant_id.into()),
        environment: Set(env),
        key_hash: Set(hex::encode(hash_key(&key))),
        key_prefix: Set(key[..16].to_owned()),
        permissions: Set(permissions.to_json()),
        label: Set(label.map(str::to_owned)),
        created_at: Set(Utc::now()),
        revoked_at: Set(None),
    }
    .insert(db)
    .await?;
    Ok((model, key))
}

pub async fn list_api_keys(
    db: &DatabaseConnection,
    merchant_id: Option<MerchantId>,
) -> Result<Vec<api_key::Model>, MerchantError> {
    let mut q = api_key::Entity::find().order_by_asc(api_key::Column::CreatedAt);
    if let Some(m) = merchant_id {
        q = q.filter(api_key::Column::MerchantId.eq(m));
    }
    Ok(q.all(db).await?)
}

/// Revokes a key now. Idempotent: revoking a revoked key keeps its first revocation time; a
/// rolled key still in its overlap (`revoked_at` ahead) is revoked now.
pub async fn revoke_api_key(db: &impl ConnectionTrait, key_id: ApiKeyId) -> Result<api_key::Model, MerchantError> {
    revoke_api_key_at(db, key_id, Utc::now()).await
}

/// Revokes a key at `at` (now, or the end of a roll's overlap), never later than it already is.
pub async fn revoke_api_key_at(
    db: &impl ConnectionTrait,
    key_id: ApiKeyId,
    at: chrono::DateTime<Utc>,
) -> Result<api_key::Model, MerchantError> {
    let k = api_key::Entity::find_by_id(key_id).one(db).await?.ok_or(MerchantError::KeyNotFound(key_id))?;
    if k.revoked_at.is_some_and(|t| t <= at) {
        return Ok(k);
    }
    let mut am: api_key::ActiveModel = k.into();
    am.revoked_at = Set(Some(at));
    Ok(am.update(db).await?)
}

/// First start of the embedded default: when no merchant exists, create a demo merchant and a
/// test key with every permission. Returns the key (to print once), or None if already seeded.
pub async fn seed_demo(db: &DatabaseConnection) -> Result<Option<(merchant::Model, String)>, MerchantError> {
    if merchant::Entity::find().filter(merchant::Column::Id.ne(crate::treasury::HOUSE)).count(db).await? > 0 {
        return Ok(None);
    }
    let m = create_merchant(db, "Demo merchant", &MerchantSettings::default()).await?;
    let (_, key) = create_api_key(db, m.id.into(), Environment::Test, Permissions::all(), Some("demo")).await?;
    Ok(Some((m, key)))
}
