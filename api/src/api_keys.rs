//! API keys managed by the merchant: `GET`/`POST /v1/api_keys`, `POST /v1/api_keys/{key_id}/revoke`
//! and `/roll` (domain::api_keys), in the key's environment.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::{Allowed, perm};
use crate::envelope::Data;
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::{JsonBody, PathId};
use crate::state::HttpState;
use domain::api_keys;
use domain::invoices::types::ts;
use entity::ApiKeyId;

/// This resource's routes.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default()
        .routes(routes!(list_keys, create_key))
        .routes(routes!(revoke_key))
        .routes(routes!(roll_key))
}

crate::envelope::documented! {
    ApiKeyListEnvelope = Vec<ApiKeyResponse>;
    ApiKeyEnvelope = ApiKeyResponse;
    NewApiKeyEnvelope = NewApiKeyResponse;
}

/// An API key (never the key itself, which is shown once, when it is made).
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyResponse {
    pub id: Uuid,
    /// The key's first characters (`sk_test_1a2b3c4d`), to recognise it.
    pub key_prefix: String,
    pub permissions: Vec<String>,
    pub label: Option<String>,
    #[schema(value_type = entity::Environment)]
    pub environment: String,
    pub created_at: String,
    /// When it stops (or stopped) working: null while in use; ahead of now for a rolled key
    /// still in its overlap.
    pub revoked_at: Option<String>,
    /// Whether it authenticates now.
    pub active: bool,
}

impl ApiKeyResponse {
    fn from_model(k: &entity::api_key::Model) -> Self {
        let permissions = k.permissions.as_array().into_iter().flatten().filter_map(|v| v.as_str()).map(str::to_owned);
        ApiKeyResponse {
            id: k.id,
            key_prefix: k.key_prefix.clone(),
            permissions: permissions.collect(),
            label: k.label.clone(),
            environment: k.environment.as_str().to_owned(),
            created_at: ts(k.created_at),
            revoked_at: k.revoked_at.map(ts),
            active: k.revoked_at.is_none_or(|t| t > chrono::Utc::now()),
        }
    }
}

/// A key just made: its details and the key itself, shown this once (store it now).
#[derive(Debug, Serialize, ToSchema)]
pub struct NewApiKeyResponse {
    #[serde(flatten)]
    pub details: ApiKeyResponse,
    /// The key (`sk_test_…`/`sk_live_…`): not stored, never shown again.
    pub key: String,
    /// The key a roll replaced, with the time it stops working; null for a new key.
    pub replaces: Option<ApiKeyResponse>,
}

/// A new key in the caller's environment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKeyRequest {
    /// Permission names (`invoices:read`, …): at least one, none that the calling key lacks.
    #[schema(min_items = 1)]
    pub permissions: Vec<domain::keys::Permission>,
    /// At most 100 characters.
    #[schema(max_length = 100, pattern = "^[^\\u0000]*$")]
    pub label: Option<String>,
}

/// How long the rolled key keeps working.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollApiKeyRequest {
    /// Seconds the old key keeps working, from 0 to 604800 (7 days); default 3600.
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 604800)]
    #[serde(default, deserialize_with = "crate::extract::optional_whole_number")]
    pub overlap_secs: Option<u64>,
}

/// The merchant's API keys in this environment, oldest first.
#[utoipa::path(get, path = "/v1/api_keys", tag = "api keys", security(("api_key" = [])),
    responses(
        (status = 200, body = ApiKeyListEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn list_keys(
    State(state): State<HttpState>,
    auth: Allowed<perm::KeysRead>,
) -> ApiResult<Data<Vec<ApiKeyResponse>>> {
    let keys = api_keys::list(&state, &auth).await?;
    Ok(Data::ok(keys.iter().map(ApiKeyResponse::from_model).collect()))
}

/// Make a key in this environment with some of the calling key's permissions (403 beyond them).
#[utoipa::path(post, path = "/v1/api_keys", tag = "api keys", security(("api_key" = [])),
    request_body = CreateApiKeyRequest,
    responses(
        (status = 201, description = "Made: store `key` now, it is not shown again", body = NewApiKeyEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn create_key(
    State(state): State<HttpState>,
    auth: Allowed<perm::KeysWrite>,
    body: JsonBody<CreateApiKeyRequest>,
) -> ApiResult<Data<NewApiKeyResponse>> {
    let permissions = api_keys::permissions(&body.value.permissions)?;
    let (k, key) = api_keys::create(&state, &auth, permissions, body.value.label.as_deref()).await?;
    Ok(Data::created(NewApiKeyResponse { details: ApiKeyResponse::from_model(&k), key, replaces: None }))
}

/// Revoke a key now (it stops working on every API process within `auth.cache_ttl_secs`).
#[utoipa::path(post, path = "/v1/api_keys/{key_id}/revoke", tag = "api keys", security(("api_key" = [])),
    params(("key_id" = uuid::Uuid, Path)),
    responses(
        (status = 200, description = "Revoked", body = ApiKeyEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope),
    ))]
pub async fn revoke_key(
    State(state): State<HttpState>,
    auth: Allowed<perm::KeysWrite>,
    PathId(id): PathId<ApiKeyId>,
) -> ApiResult<Data<ApiKeyResponse>> {
    Ok(Data::ok(ApiKeyResponse::from_model(&api_keys::revoke(&state, &auth, id).await?)))
}

/// Roll a key: a new key with its permissions and label; the old one keeps working for
/// `overlap_secs`, then stops.
#[utoipa::path(post, path = "/v1/api_keys/{key_id}/roll", tag = "api keys", security(("api_key" = [])),
    params(("key_id" = uuid::Uuid, Path)),
    request_body = RollApiKeyRequest,
    responses(
        (status = 201, description = "Rolled: store `key` now, it is not shown again", body = NewApiKeyEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "api_key_revoked", body = ErrorEnvelope),
    ))]
pub async fn roll_key(
    State(state): State<HttpState>,
    auth: Allowed<perm::KeysWrite>,
    PathId(id): PathId<ApiKeyId>,
    body: JsonBody<RollApiKeyRequest>,
) -> ApiResult<Data<NewApiKeyResponse>> {
    let overlap = i64::try_from(body.value.overlap_secs.unwrap_or(3600)).unwrap_or(i64::MAX);
    let (old, new, key) = api_keys::roll(&state, &auth, id, overlap).await?;
    Ok(Data::created(NewApiKeyResponse {
        details: ApiKeyResponse::from_model(&new),
        key,
        replaces: Some(ApiKeyResponse::from_model(&old)),
    }))
}
