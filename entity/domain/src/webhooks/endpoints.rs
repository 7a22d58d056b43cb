//! Endpoints: a merchant has any number of them per environment (up to [`MAX_PER_ENV`]), each
//! with its URL, an optional description, the event types it receives (`enabled_events`; empty:
//! every event), a `disabled` flag and its own secret. The secret is returned once, when it is
//! made or rotated, and stored only encrypted. Managed by the merchant through the API
//! (`manage`) and by the operator with `ops webhooks`, which addresses "the" endpoint of a
//! merchant with a single one, or one endpoint by id ([`resolve`]).

use chrono::{DateTime, Duration, Utc};
use entity::{DeliveryStatus, DeliveryTrigger, Environment, MerchantId, webhook_delivery, webhook_endpoint};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, PaginatorTrait, QueryFilter,
    QueryOrder,
};
use uuid::Uuid;

use super::WebhookError;
use super::outbound::TargetPolicy;
use super::secrets::{self, SecretBox};
use crate::events::EventKind;

/// Most endpoints one merchant may have in one environment: every event is delivered to each
/// matching endpoint, so the fan-out stays bounded.
pub const MAX_PER_ENV: u64 = 16;
/// Longest description, in characters.
pub const DESCRIPTION_MAX: usize = 512;
/// What a delivery stopped by its endpoint's removal keeps as its last error.
pub const REMOVED: &str = "the webhook endpoint was removed";

impl crate::owned::Owned for webhook_endpoint::Entity {
    const NAME: &'static str = "webhook endpoint";
    type Id = Uuid;
    const ID: Self::Column = webhook_endpoint::Column::Id;
    const MERCHANT_ID: Self::Column = webhook_endpoint::Column::MerchantId;
    const ENVIRONMENT: Self::Column = webhook_endpoint::Column::Environment;
    const CREATED_AT: Self::Column = webhook_endpoint::Column::CreatedAt;
}

/// An endpoint as shown: never the secret.
#[derive(Debug, Clone)]
pub struct EndpointInfo {
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub url: String,
    pub description: Option<String>,
    /// Empty: every event.
    pub enabled_events: Vec<String>,
    pub disabled: bool,
    /// During a rotation, when the previous secret stops signing.
    pub previous_secret_until: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl EndpointInfo {
    pub fn from_model(m: &webhook_endpoint::Model, now: DateTime<Utc>) -> EndpointInfo {
        EndpointInfo {
            id: m.id,
            merchant_id: m.merchant_id,
            environment: m.environment,
            url: m.url.clone(),
            description: m.description.clone(),
            enabled_events: EventFilter::stored(&m.enabled_events).0,
            disabled: m.disabled,
            previous_secret_until: m.previous_secret_expires_at.filter(|t| *t > now),
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

/// Which events an endpoint receives: the listed event types, or every event when the list is
/// empty. A `test` event is always received (it is sent to check the endpoint itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFilter(pub Vec<String>);

impl EventFilter {
    /// Checks names given by a caller: each must be an event type (`EventKind`); duplicates are
    /// dropped, the order kept. The error names the first offending entry (`enabled_events[2]`).
    pub fn parse(given: &[String]) -> Result<EventFilter, WebhookError> {
        let mut out: Vec<String> = Vec::new();
        for (i, name) in given.iter().enumerate() {
            let Some(kind) = EventKind::ALL.iter().find(|k| k.as_str() == name.as_str()) else {
                return Err(WebhookError::InvalidEvent(format!(
                    "enabled_events[{i}]: unknown event type {name:?}; one of {}",
                    EventKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                )));
            };
            if !out.iter().any(|o| o == kind.as_str()) {
                out.push(kind.as_str().to_owned());
            }
        }
        Ok(EventFilter(out))
    }

    /// The stored column (a JSON array). A value that does not read as one receives nothing
    /// but `test` (fails closed; only this module writes the column).
    pub fn stored(raw: &str) -> EventFilter {
        match serde_json::from_str::<Vec<String>>(raw) {
            Ok(v) => EventFilter(v),
            Err(_) => EventFilter(vec![EventKind::Test.as_str().to_owned()]),
        }
    }

    pub fn to_column(&self) -> String {
        serde_json::to_string(&self.0).expect("a list of strings serialises")
    }

    pub fn matches(&self, event_type: &str) -> bool {
        self.0.is_empty() || event_type == EventKind::Test.as_str() || self.0.iter().any(|e| e == event_type)
    }
}

/// Whether a new event of `event_type` is delivered to this endpoint: enabled and matching.
pub fn receives(m: &webhook_endpoint::Model, event_type: &str) -> bool {
    !m.disabled && EventFilter::stored(&m.enabled_events).matches(event_type)
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

/// A description as stored: trimmed, empty as none, at most [`DESCRIPTION_MAX`] characters.
pub fn clean_description(given: Option<&str>) -> Result<Option<String>, WebhookError> {
    let Some(d) = given.map(str::trim).filter(|d| !d.is_empty()) else { return Ok(None) };
    if d.chars().count() > DESCRIPTION_MAX {
        return Err(WebhookError::InvalidDescription(format!("longer than {DESCRIPTION_MAX} characters")));
    }
    if d.chars().any(|c| c.is_control()) {
        return Err(WebhookError::InvalidDescription("contains control characters".into()));
    }
    Ok(Some(d.to_owned()))
}

/// A new endpoint.
#[derive(Debug, Clone, Default)]
pub struct NewEndpoint {
    pub url: String,
    pub description: Option<String>,
    /// Event type names; empty: every event.
    pub enabled_events: Vec<String>,
}

/// What an update changes; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    /// `Some(None)` clears the description.
    pub description: Option<Option<String>>,
    pub enabled_events: Option<Vec<String>>,
    pub disabled: Option<bool>,
}

/// The merchant's endpoints in `env`, oldest first.
pub async fn list_for(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<Vec<webhook_endpoint::Model>, WebhookError> {
    Ok(webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::MerchantId.eq(merchant_id))
        .filter(webhook_endpoint::Column::Environment.eq(env))
        .order_by_asc(webhook_endpoint::Column::CreatedAt)
        .order_by_asc(webhook_endpoint::Column::Id)
        .all(db)
        .await?)
}

/// The endpoint `id` if it is the merchant's in `env`.
pub async fn find(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    id: Uuid,
) -> Result<Option<webhook_endpoint::Model>, WebhookError> {
    Ok(webhook_endpoint::Entity::find_by_id(id)
        .filter(webhook_endpoint::Column::MerchantId.eq(merchant_id))
        .filter(webhook_endpoint::Column::Environment.eq(env))
        .one(db)
        .await?)
}

/// The endpoint an operator command means: `endpoint` when given (it must be the merchant's in
/// `env`), else the merchant's only endpoint in `env`. `None`: there is none; an error when the
/// merchant has several and none was named.
pub async fn resolve(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
) -> Result<Option<webhook_endpoint::Model>, WebhookError> {
    if let Some(id) = endpoint {
        return find(db, merchant_id, env, id).await;
    }
    let mut all = list_for(db, merchant_id, env).await?;
    match all.len() {
        0 | 1 => Ok(all.pop()),
        n => Err(WebhookError::SeveralEndpoints(merchant_id, env, n)),
    }
}

/// Creates an endpoint with a fresh secret, returned here and never again.
pub async fn create(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    policy: TargetPolicy,
    merchant_id: MerchantId,
    env: Environment,
    new: &NewEndpoint,
) -> Result<(webhook_endpoint::Model, String), WebhookError> {
    crate::merchants::get_merchant(db, merchant_id).await.map_err(|_| WebhookError::UnknownMerchant(merchant_id))?;
    let url = validate_url(policy, env, &new.url).await?;
    let description = clean_description(new.description.as_deref())?;
    let filter = EventFilter::parse(&new.enabled_events)?;
    let count = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::MerchantId.eq(merchant_id))
        .filter(webhook_endpoint::Column::Environment.eq(env))
        .count(db)
        .await?;
    if count >= MAX_PER_ENV {
        return Err(WebhookError::TooManyEndpoints(MAX_PER_ENV));
    }
    let now = Utc::now();
    let secret = secrets::generate();
    let row = webhook_endpoint::Model {
        id: Uuid::now_v7(),
        merchant_id: merchant_id.into(),
        environment: env,
        url: url.to_string(),
        description,
        enabled_events: filter.to_column(),
        disabled: false,
        secret_ciphertext: sbox.seal(merchant_id, env, &secret),
        previous_secret_ciphertext: None,
        previous_secret_expires_at: None,
        created_at: now,
        updated_at: now,
    };
    let model = webhook_endpoint::Entity::insert(row.into_active_model()).exec_with_returning(db).await?;
    Ok((model, secret))
}

/// Changes an endpoint's URL, description, filter or `disabled` flag; its secret stays.
pub async fn update(
    db: &impl ConnectionTrait,
    policy: TargetPolicy,
    m: webhook_endpoint::Model,
    change: &EndpointChange,
) -> Result<webhook_endpoint::Model, WebhookError> {
    let url = match &change.url {
        Some(u) => Some(validate_url(policy, m.environment, u).await?),
        None => None,
    };
    let description = match &change.description {
        Some(d) => Some(clean_description(d.as_deref())?),
        None => None,
    };
    let filter = match &change.enabled_events {
        Some(e) => Some(EventFilter::parse(e)?),
        None => None,
    };
    let mut am = m.into_active_model();
    if let Some(u) = url {
        am.url = Set(u.to_string());
    }
    if let Some(d) = description {
        am.description = Set(d);
    }
    if let Some(f) = filter {
        am.enabled_events = Set(f.to_column());
    }
    if let Some(d) = change.disabled {
        am.disabled = Set(d);
    }
    am.updated_at = Set(Utc::now());
    Ok(webhook_endpoint::Entity::update(am).exec(db).await?)
}

/// Makes a new secret for the endpoint; the previous one keeps signing (a second `v1`) for
/// `overlap`, so receivers can switch without rejecting deliveries. Returns the new secret,
/// shown once.
pub async fn rotate_secret(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    m: webhook_endpoint::Model,
    overlap: Duration,
) -> Result<(webhook_endpoint::Model, String), WebhookError> {
    let now = Utc::now();
    let secret = secrets::generate();
    let (merchant_id, env) = (MerchantId::from(m.merchant_id), m.environment);
    let previous = m.secret_ciphertext.clone();
    let mut am = m.into_active_model();
    am.secret_ciphertext = Set(sbox.seal(merchant_id, env, &secret));
    am.previous_secret_ciphertext = Set((overlap > Duration::zero()).then_some(previous));
    am.previous_secret_expires_at = Set((overlap > Duration::zero()).then(|| now + overlap));
    am.updated_at = Set(now);
    Ok((webhook_endpoint::Entity::update(am).exec(db).await?, secret))
}

/// Deletes the endpoint and stops its open deliveries: each pending or retrying one becomes
/// `dead` with [`REMOVED`] as its last error, without being sent (never to another endpoint).
/// Returns whether the endpoint was there and how many deliveries stopped.
pub async fn delete(db: &impl ConnectionTrait, m: &webhook_endpoint::Model) -> Result<(bool, u64), WebhookError> {
    let gone = webhook_endpoint::Entity::delete_many()
        .filter(webhook_endpoint::Column::Id.eq(m.id))
        .filter(webhook_endpoint::Column::MerchantId.eq(m.merchant_id))
        .exec(db)
        .await?
        .rows_affected
        == 1;
    let mut stopped = 0;
    let now = Utc::now();
    for from in [DeliveryStatus::Pending, DeliveryStatus::Retrying] {
        let Some(to) = from.on(DeliveryTrigger::EndpointRemoved) else { continue };
        let none: Option<DateTime<Utc>> = None;
        stopped += webhook_delivery::Entity::update_many()
            .col_expr(webhook_delivery::Column::Status, Expr::value(to.as_str()))
            .col_expr(webhook_delivery::Column::DeadAt, Expr::value(now))
            .col_expr(webhook_delivery::Column::LeaseUntil, Expr::value(none))
            .col_expr(webhook_delivery::Column::LastError, Expr::value(REMOVED))
            .col_expr(webhook_delivery::Column::UpdatedAt, Expr::value(now))
            .filter(webhook_delivery::Column::EndpointId.eq(m.id))
            .filter(webhook_delivery::Column::MerchantId.eq(m.merchant_id))
            .filter(webhook_delivery::Column::Status.eq(from))
            .exec(db)
            .await?
            .rows_affected;
    }
    Ok((gone, stopped))
}

/// Sets the URL of the endpoint `endpoint` names ([`resolve`]); with none named and none there,
/// creates one with every event and returns its fresh secret (shown once). An existing
/// endpoint keeps its secret.
pub async fn set_on(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    policy: TargetPolicy,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
    raw_url: &str,
) -> Result<(EndpointInfo, Option<String>), WebhookError> {
    crate::merchants::get_merchant(db, merchant_id).await.map_err(|_| WebhookError::UnknownMerchant(merchant_id))?;
    let now = Utc::now();
    match (resolve(db, merchant_id, env, endpoint).await?, endpoint) {
        (Some(m), _) => {
            let change = EndpointChange { url: Some(raw_url.to_owned()), ..EndpointChange::default() };
            let model = update(db, policy, m, &change).await?;
            Ok((EndpointInfo::from_model(&model, now), None))
        }
        (None, Some(id)) => Err(WebhookError::UnknownEndpoint(id)),
        (None, None) => {
            let new = NewEndpoint { url: raw_url.to_owned(), ..NewEndpoint::default() };
            let (model, secret) = create(db, sbox, policy, merchant_id, env, &new).await?;
            Ok((EndpointInfo::from_model(&model, now), Some(secret)))
        }
    }
}

/// [`set_on`] the merchant's only endpoint in `env` (created when there is none).
pub async fn set(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    policy: TargetPolicy,
    merchant_id: MerchantId,
    env: Environment,
    raw_url: &str,
) -> Result<(EndpointInfo, Option<String>), WebhookError> {
    set_on(db, sbox, policy, merchant_id, env, None, raw_url).await
}

/// [`rotate_secret`] of the endpoint `endpoint` names ([`resolve`]).
pub async fn rotate_on(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
    overlap: Duration,
) -> Result<(EndpointInfo, String), WebhookError> {
    let m = resolve(db, merchant_id, env, endpoint).await?.ok_or(WebhookError::NoEndpoint(merchant_id, env))?;
    let (model, secret) = rotate_secret(db, sbox, m, overlap).await?;
    Ok((EndpointInfo::from_model(&model, Utc::now()), secret))
}

/// [`rotate_on`] the merchant's only endpoint in `env`.
pub async fn rotate(
    db: &impl ConnectionTrait,
    sbox: &SecretBox,
    merchant_id: MerchantId,
    env: Environment,
    overlap: Duration,
) -> Result<(EndpointInfo, String), WebhookError> {
    rotate_on(db, sbox, merchant_id, env, None, overlap).await
}

/// [`delete`] the endpoint `endpoint` names ([`resolve`]); `None` when there was none.
pub async fn remove_on(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
) -> Result<Option<(EndpointInfo, u64)>, WebhookError> {
    let Some(m) = resolve(db, merchant_id, env, endpoint).await? else { return Ok(None) };
    let (gone, stopped) = delete(db, &m).await?;
    Ok(gone.then(|| (EndpointInfo::from_model(&m, Utc::now()), stopped)))
}

/// Removes the merchant's only endpoint in `env`: events from now on are not delivered, and
/// its open deliveries stop ([`delete`]).
pub async fn remove(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<bool, WebhookError> {
    Ok(remove_on(db, merchant_id, env, None).await?.is_some())
}

/// The endpoint `endpoint` names ([`resolve`]).
pub async fn get_on(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
    endpoint: Option<Uuid>,
) -> Result<Option<EndpointInfo>, WebhookError> {
    let now = Utc::now();
    Ok(resolve(db, merchant_id, env, endpoint).await?.map(|m| EndpointInfo::from_model(&m, now)))
}

/// The merchant's only endpoint in `env`.
pub async fn get(
    db: &impl ConnectionTrait,
    merchant_id: MerchantId,
    env: Environment,
) -> Result<Option<EndpointInfo>, WebhookError> {
    get_on(db, merchant_id, env, None).await
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
            .filter(webhook_endpoint::Column::Id.eq(m.id))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn endpoint(filter: &[&str], disabled: bool) -> webhook_endpoint::Model {
        let now = Utc::now();
        webhook_endpoint::Model {
            id: Uuid::now_v7(),
            merchant_id: Uuid::now_v7(),
            environment: Environment::Test,
            url: "https://shop.example/hook".into(),
            description: None,
            enabled_events: EventFilter(names(filter)).to_column(),
            disabled,
            secret_ciphertext: String::new(),
            previous_secret_ciphertext: None,
            previous_secret_expires_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn an_empty_filter_receives_every_event_and_a_list_only_its_own() {
        let all = endpoint(&[], false);
        let paid = endpoint(&["invoice.paid", "payout.failed"], false);
        for k in EventKind::ALL {
            assert!(receives(&all, k.as_str()), "{k}");
        }
        assert!(receives(&paid, "invoice.paid"));
        assert!(receives(&paid, "payout.failed"));
        assert!(!receives(&paid, "invoice.expired"));
        assert!(!receives(&paid, "balance.credited"));
        assert!(receives(&paid, "test"), "a test event checks the endpoint itself");
    }

    #[test]
    fn a_disabled_endpoint_receives_nothing() {
        for k in EventKind::ALL {
            assert!(!receives(&endpoint(&[], true), k.as_str()), "{k}");
        }
    }

    #[test]
    fn filters_name_known_event_types_only() {
        let f = EventFilter::parse(&names(&["invoice.paid", "invoice.paid", "payout.completed"])).unwrap();
        assert_eq!(f.0, names(&["invoice.paid", "payout.completed"]), "duplicates dropped, order kept");
        let err = EventFilter::parse(&names(&["invoice.paid", "invoice.payed"])).unwrap_err().to_string();
        assert!(err.contains("enabled_events[1]") && err.contains("invoice.payed"), "{err}");
        assert_eq!(EventFilter::stored(&f.to_column()), f, "round trip through the column");
        let broken = EventFilter::stored("not json");
        assert!(!broken.matches("invoice.paid"), "an unreadable filter fails closed");
    }

    #[test]
    fn descriptions_are_trimmed_and_bounded() {
        assert_eq!(clean_description(Some("  shop  ")).unwrap().as_deref(), Some("shop"));
        assert_eq!(clean_description(Some("   ")).unwrap(), None);
        assert!(clean_description(Some(&"x".repeat(DESCRIPTION_MAX + 1))).is_err());
        assert!(clean_description(Some("a\u{0}b")).is_err());
    }
}
