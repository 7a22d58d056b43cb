//! API keys managed by the merchant through the API (`/v1/api_keys`, permissions `keys:read` and
//! `keys:write`), in the caller's environment only: list, create (shown once), revoke, and roll
//! (a new key with the same permissions; the old one keeps working for an overlap, then stops).
//!
//! A key never makes or rolls a key with a permission it does not hold itself (403 naming the
//! permissions beyond it), so a narrow key cannot widen itself. Every change is in the audit log
//! with actor `api_key:<id>`, in the same transaction. A revoked key stops working at once on
//! the API process that revoked it, and on every other within `auth.cache_ttl_secs`.

use chrono::{Duration, Utc};
use entity::{ApiKeyId, api_key};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};

use crate::audit::{Entry, record};
use crate::domain_error::{DomainError, DomainResult};
use crate::keys::{Permission, Permissions, Principal};
use crate::merchants::{self, MerchantError};
use crate::state::AppState;

/// The longest overlap a roll may give the old key.
pub const MAX_OVERLAP_SECS: i64 = 7 * 24 * 3600;
/// A label's longest length.
pub const MAX_LABEL: usize = 100;

fn audited(k: &api_key::Model) -> Value {
    json!({
        "key_prefix": k.key_prefix, "permissions": k.permissions, "label": k.label,
        "revoked_at": k.revoked_at.map(|t| t.to_rfc3339()),
    })
}

fn db_error(e: MerchantError) -> DomainError {
    match e {
        MerchantError::Db(e) => e.into(),
        MerchantError::KeyNotFound(_) => DomainError::not_found("API key"),
        MerchantError::NotFound(_) | MerchantError::Invalid(_) => DomainError::internal(e),
    }
}

/// Refuses `wanted` beyond what `who` holds.
fn within_caller(who: &Principal, wanted: Permissions) -> DomainResult<()> {
    let beyond = wanted.beyond(who.permissions);
    if beyond.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = beyond.iter().map(|p| p.as_str()).collect();
    Err(DomainError::forbidden(
        format!("a key cannot grant permissions it does not hold: {}", names.join(", ")),
        vec![format!("permissions: {} not held by this key", names.join(", "))],
    ))
}

/// The permissions a request names: at least one.
pub fn permissions(named: &[Permission]) -> DomainResult<Permissions> {
    if named.is_empty() {
        return Err(DomainError::invalid_field("permissions", "name at least one"));
    }
    Ok(named.iter().copied().collect())
}

fn check_label(label: Option<&str>) -> DomainResult<()> {
    match label {
        Some(l) if l.chars().count() > MAX_LABEL => {
            Err(DomainError::invalid_field("label", format!("at most {MAX_LABEL} characters")))
        }
        Some(_) | None => Ok(()),
    }
}

/// The caller's merchant's keys in its environment, oldest first.
pub async fn list(state: &AppState, who: &Principal) -> DomainResult<Vec<api_key::Model>> {
    Ok(api_key::Entity::find()
        .filter(api_key::Column::MerchantId.eq(uuid::Uuid::from(who.merchant_id)))
        .filter(api_key::Column::Environment.eq(who.environment))
        .order_by_asc(api_key::Column::CreatedAt)
        .all(&state.db)
        .await?)
}

/// A key of the caller's merchant and environment (404 otherwise, as for every resource).
async fn owned(txn: &impl sea_orm::ConnectionTrait, who: &Principal, id: ApiKeyId) -> DomainResult<api_key::Model> {
    let k = api_key::Entity::find_by_id(id).one(txn).await?;
    k.filter(|k| k.merchant_id == uuid::Uuid::from(who.merchant_id) && k.environment == who.environment)
        .ok_or_else(|| DomainError::not_found("API key"))
}

/// A new key in the caller's environment with `permissions` (within the caller's) and the key
/// string, shown once.
pub async fn create(
    state: &AppState,
    who: &Principal,
    permissions: Permissions,
    label: Option<&str>,
) -> DomainResult<(api_key::Model, String)> {
    within_caller(who, permissions)?;
    check_label(label)?;
    let txn = crate::db::begin_write(&state.db).await?;
    let (k, key) = merchants::create_api_key(&txn, who.merchant_id, who.environment, permissions, label)
        .await
        .map_err(db_error)?;
    let entry = Entry::new(&who.actor(), "api_key.create", "api_key", k.id)
        .merchant(who.merchant_id, Some(who.environment))
        .change(None, Some(audited(&k)));
    record(&txn, entry).await?;
    txn.commit().await?;
    Ok((k, key))
}

/// Revokes one of the merchant's keys now (the caller's own too). Idempotent.
pub async fn revoke(state: &AppState, who: &Principal, id: ApiKeyId) -> DomainResult<api_key::Model> {
    let txn = crate::db::begin_write(&state.db).await?;
    let before = owned(&txn, who, id).await?;
    let after = merchants::revoke_api_key(&txn, id).await.map_err(db_error)?;
    if before.revoked_at != after.revoked_at {
        let entry = Entry::new(&who.actor(), "api_key.revoke", "api_key", id)
            .merchant(who.merchant_id, Some(who.environment))
            .change(Some(audited(&before)), Some(audited(&after)));
        record(&txn, entry).await?;
    }
    txn.commit().await?;
    state.keys.forget(&after.key_hash);
    Ok(after)
}

/// Rolls a key: a new key with its permissions and label, and the old one revoked
/// `overlap_secs` from now (0: at once), so that deployments can move over without a gap.
/// Refused for a key already revoked, or with a permission the caller does not hold.
pub async fn roll(
    state: &AppState,
    who: &Principal,
    id: ApiKeyId,
    overlap_secs: i64,
) -> DomainResult<(api_key::Model, api_key::Model, String)> {
    if !(0..=MAX_OVERLAP_SECS).contains(&overlap_secs) {
        return Err(DomainError::invalid_field(
            "overlap_secs",
            format!("must be from 0 to {MAX_OVERLAP_SECS} (7 days)"),
        ));
    }
    let txn = crate::db::begin_write(&state.db).await?;
    let old = owned(&txn, who, id).await?;
    if old.revoked_at.is_some() {
        return Err(DomainError::conflict(
            crate::domain_error::ErrorCode::ApiKeyRevoked,
            "this key is revoked (or already rolled): roll a key in use",
        ));
    }
    let permissions = Permissions::from_json(&old.permissions);
    within_caller(who, permissions)?;
    let (new, key) =
        merchants::create_api_key(&txn, who.merchant_id, who.environment, permissions, old.label.as_deref())
            .await
            .map_err(db_error)?;
    let until = Utc::now() + Duration::seconds(overlap_secs);
    let rolled = merchants::revoke_api_key_at(&txn, id, until).await.map_err(db_error)?;
    let entry = Entry::new(&who.actor(), "api_key.roll", "api_key", id)
        .merchant(who.merchant_id, Some(who.environment))
        .change(
            Some(audited(&old)),
            Some(json!({"old": audited(&rolled), "new_key_id": new.id, "new": audited(&new)})),
        );
    record(&txn, entry).await?;
    txn.commit().await?;
    state.keys.forget(&rolled.key_hash);
    Ok((rolled, new, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(perms: &[Permission]) -> Principal {
        Principal {
            key_id: uuid::Uuid::now_v7().into(),
            merchant_id: uuid::Uuid::now_v7().into(),
            environment: entity::Environment::Test,
            permissions: perms.iter().copied().collect(),
            user_id: None,
        }
    }

    #[test]
    fn a_key_grants_only_what_it_holds() {
        let who = caller(&[Permission::KeysWrite, Permission::InvoicesRead]);
        assert!(within_caller(&who, [Permission::InvoicesRead].into_iter().collect()).is_ok());
        let err = within_caller(&who, [Permission::InvoicesRead, Permission::PayoutsWrite].into_iter().collect())
            .unwrap_err();
        assert_eq!(err.code, crate::domain_error::ErrorCode::Forbidden);
        assert_eq!(err.details, ["permissions: payouts:write not held by this key"]);
    }

    #[test]
    fn a_request_names_at_least_one_permission() {
        let p = permissions(&[Permission::InvoicesRead, Permission::KeysRead]).unwrap();
        assert!(p.contains(Permission::KeysRead) && !p.contains(Permission::KeysWrite));
        assert!(permissions(&[]).unwrap_err().details[0].starts_with("permissions:"));
    }
}
