//! Authentication at the HTTP edge: the `Auth` and `Allowed<P>` extractors over the key rules
//! and cache of [`domain::keys`] (re-exported here for callers that name `auth::…`).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

pub use domain::keys::{
    KeyCache, KeyError, Permission, Permissions, Principal, generate_key, hash_key, parse_key_format,
};

use crate::error::ApiError;
use crate::state::HttpState;

pub const API_KEY_HEADER: &str = "x-api-key";

/// 403 `forbidden` naming the permission unless the key holds it.
pub fn require(who: &Principal, p: Permission) -> Result<(), ApiError> {
    if who.permissions.contains(p) { Ok(()) } else { Err(ApiError::forbidden(p.as_str())) }
}

/// A key the rate limiting layer already verified for this request (a request extension), so
/// the extractor does not verify it twice.
#[derive(Clone)]
pub struct VerifiedKey(pub Arc<Principal>);

/// Extractor: the authenticated caller. 401 for a missing, malformed, unknown or revoked key.
pub struct Auth(pub Arc<Principal>);

impl FromRequestParts<HttpState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, Self::Rejection> {
        if let Some(VerifiedKey(p)) = parts.extensions.get::<VerifiedKey>() {
            return Ok(Auth(p.clone()));
        }
        let key = parts
            .headers
            .get(API_KEY_HEADER)
            .ok_or_else(|| ApiError::unauthorized("missing X-API-Key header"))?
            .to_str()
            .map_err(|_| ApiError::unauthorized("malformed API key"))?;
        Ok(Auth(state.keys.verify(&state.db, key).await?))
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
        EventsRead,
        SettingsRead,
        SettingsWrite,
        KeysRead,
        KeysWrite,
        WebhooksRead,
        WebhooksWrite,
        ExportsRead,
    );
}

/// Extractor: an authenticated caller holding permission `P`. 401 as [`Auth`], then 403 when
/// the key lacks `P`. Put it before every other extractor of a handler (path, query, headers,
/// body last): axum runs extractors in order, so a key without the permission gets 403 whatever
/// it sends, and learns nothing about what the route would accept.
pub struct Allowed<P: RequiredPermission>(pub Arc<Principal>, std::marker::PhantomData<P>);

impl<P: RequiredPermission> FromRequestParts<HttpState> for Allowed<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, Self::Rejection> {
        let Auth(who) = Auth::from_request_parts(parts, state).await?;
        require(&who, P::PERMISSION)?;
        Ok(Allowed(who, std::marker::PhantomData))
    }
}

impl<P: RequiredPermission> std::ops::Deref for Allowed<P> {
    type Target = Principal;
    fn deref(&self) -> &Principal {
        &self.0
    }
}
