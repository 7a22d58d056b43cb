//! Endpoints: one URL and secret per merchant and environment, managed by `ops webhooks`.
//! The secret is returned once, when it is made, and stored only encrypted.

use chrono::{DateTime, Duration, Utc};
use entity::{Environment, MerchantId, webhook_endpoint};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter};
use uuid::Uuid;

use super::WebhookError;
use super::outbound::TargetPolicy;
use super::secrets::{self, SecretBox};

/// What `ops webhooks show` prints: never the secret.
#[derive(Debug, Clone)]
pub struct EndpointInfo {
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub url: String,
    /// During a rotation, when the previous secret stops signing.
    pub previous_secret_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl EndpointInfo {
    fn from_model(m: &webhook_endpoint::Model, now: DateTime<Utc>) -> EndpointInfo {
        EndpointInfo {
            merchant_id: m.merchant_id,
            environment: m.environment,
            url: m.url.clone(),
            previous_secret_until: m.previous_secret_expires_at.filter(|t| *t > now),
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// Checks a URL as it is saved: form and scheme for the environment, then what its host
/// resolves to now (the deliverer checks again at every connection).
pub async fn validate_url(policy: TargetPolicy, env: Environment, raw: &str) -> Result<url::Url, WebhookError> {
    let url = url::Url::parse(raw.trim()).map_err(|e| WebhookError::InvalidUrl(e.to_string()))?;
    if raw.len() > 2048 {
        return Err(WebhookError::InvalidUrl("longer than 2048 characters".into()));
    }
    policy.check_url(&url, env).map_err(|e| WebhookError::InvalidUrl(e.to_string()))?;
    if !policy.allow_insecure {
        policy.check_resolution(&url).await.map_err(|e| WebhookError::InvalidUrl(e.to_string()))?;
    }
    Ok(url)
}

/// Sets the endpoint's URL. A new endpoint gets a fresh secret, returned here and never
/// again; an existing one keeps its secret.
pub async fn set(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    policy: TargetPolicy,
    merchant_id: MerchantId,
    env: Environment,
    raw_url: &str,
) -> Result<(EndpointInfo, Option<String>), WebhookError> {
    crate::merchants::get_merchant(db, merchant_id).await.map_err(|_| WebhookError::UnknownMerchant(merchant_id))?;
    let url = validate_url(policy, env, raw_url).await?;
    let now = Utc::now();
    let existing = webhook_endpoint::Entity::find_by_id((merchant_id.0, env)).one(db).await?;
    let (model, secret) = match existing {
        Some(m) => {
            let mut am = m.into_active_model();
            am.url = Set(url.to_string());
            am.updated_at = Set(now);
            (webhook_endpoint::Entity::update(am).exec(db).await?, None)
        }
        None => {
            let secret = secrets::generate();
            let row = webhook_endpoint::Model {
                merchant_id: merchant_id.into(),
                environment: env,
                url: url.to_string(),
                secret_ciphertext: sbox.seal(merchant_id, env, &secret),
                previous_secret_ciphertext: None,
                previous_secret_expires_at: None,
                created_at: now,
                updated_at: now,
            };
            (webhook_endpoint::Entity::insert(row.into_active_model()).exec_with_returning(db).await?, Some(secret))
        }
    };
    Ok((EndpointInfo::from_model(&model, now), secret))
}

/// Makes a new secret; the previous one keeps signing (a second `v1`) for `overlap`, so
/// receivers can switch without rejecting deliveries. Returns the new secret, shown once.
pub async fn rotate(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    merchant_id: MerchantId,
    env: Environment,
    overlap: Duration,
) -> Result<(EndpointInfo, String), WebhookError> {
    let m = webhook_endpoint::Entity::find_by_id((merchant_id.0, env))
        .one(db)
        .await?
        .ok_or(WebhookError::NoEndpoint(merchant_id, env))?;
    let now = Utc::now();
    let secret = secrets::generate();
    let previous = m.secret_ciphertext.clone();
    let mut am = m.into_active_model();
    am.secret_ciphertext = Set(sbox.seal(merchant_id, env, &secret));
    am.previous_secret_ciphertext = Set((overlap > Duration::zero()).then_some(previous));
    am.previous_secret_expires_at = Set((overlap > Duration::zero()).then(|| now + overlap));
    am.updated_at = Set(now);
    let model = webhook_endpoint::Entity::update(am).exec(db).await?;
    Ok((EndpointInfo::from_model(&model, now), secret))
}

/// Removes the endpoint. Events from now on are not delivered; deliveries already made
/// fail their attempts (and are retried on schedule) until an endpoint is set again.
pub async fn remove(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<bool, WebhookError> {
    let r = webhook_endpoint::Entity::delete_by_id((merchant_id.0, env)).exec(db).await?;
    Ok(r.rows_affected == 1)
}

pub async fn get(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<Option<EndpointInfo>, WebhookError> {
    let now = Utc::now();
    Ok(webhook_endpoint::Entity::find_by_id((merchant_id.0, env))
        .one(db)
        .await?
        .map(|m| EndpointInfo::from_model(&m, now)))
}

/// The secrets that sign a delivery now: the current one, then the previous one while a
/// rotation overlaps.
pub fn signing_secrets(
    sbox: &SecretBox,
    m: &webhook_endpoint::Model,
    now: DateTime<Utc>,
) -> Result<Vec<String>, WebhookError> {
    let mut out = vec![sbox.open(m.merchant_id.into(), m.environment, &m.secret_ciphertext)?];
    if let (Some(prev), Some(until)) = (&m.previous_secret_ciphertext, m.previous_secret_expires_at)
        && until > now
    {
        out.push(sbox.open(m.merchant_id.into(), m.environment, prev)?);
    }
    Ok(out)
}

/// What a key rotation did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resealed {
    /// Endpoint secrets (current and overlapping previous ones) now sealed with the current key.
    pub resealed: u64,
    /// Already under the current key.
    pub unchanged: u64,
}

/// Re-encrypts every endpoint secret that a previous key of `sbox` opens under its current key
/// (`ops webhooks rotate-key`). Each endpoint is updated only if its ciphertexts are still those
/// read (an endpoint rotated or removed meanwhile is left to its new state). A secret no key
/// opens fails the run, changing nothing more.
pub async fn reseal_all(db: &impl ConnectionTrait, sbox: &SecretBox) -> Result<Resealed, WebhookError> {
    use secrets::OpenedWith;
    let mut out = Resealed::default();
    for m in webhook_endpoint::Entity::find().all(db).await? {
        let reseal = |sealed: &str| -> Result<Option<String>, WebhookError> {
            let (secret, with) = sbox.open_with(m.merchant_id.into(), m.environment, sealed)?;
            Ok((with == OpenedWith::Previous).then(|| sbox.seal(m.merchant_id.into(), m.environment, &secret)))
        };
        let current = reseal(&m.secret_ciphertext)?;
        let previous = match &m.previous_secret_ciphertext {
            Some(p) => reseal(p)?,
            None => None,
        };
        let changed = u64::from(current.is_some()) + u64::from(previous.is_some());
        let kept = 1 + u64::from(m.previous_secret_ciphertext.is_some()) - changed;
        if changed == 0 {
            out.unchanged += kept;
            continue;
        }
        let n = webhook_endpoint::Entity::update_many()
            .col_expr(
                webhook_endpoint::Column::SecretCiphertext,
                Expr::value(current.unwrap_or_else(|| m.secret_ciphertext.clone())),
            )
            .col_expr(
                webhook_endpoint::Column::PreviousSecretCiphertext,
                Expr::value(previous.or_else(|| m.previous_secret_ciphertext.clone())),
            )
            .filter(webhook_endpoint::Column::MerchantId.eq(m.merchant_id))
            .filter(webhook_endpoint::Column::Environment.eq(m.environment))
            .filter(webhook_endpoint::Column::SecretCiphertext.eq(m.secret_ciphertext.as_str()))
            .exec(db)
            .await?
            .rows_affected;
        if n == 1 {
            out.resealed += changed;
            out.unchanged += kept;
        }
    }
    Ok(out)
}
