//! `[dashboard]`: the merchant dashboard's sessions and invitations (sign-in throttling is
//! `[rate_limits] login_per_account` and `login_per_ip`).

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DashboardConfig {
    /// A session ends this long after sign-in, however active.
    pub session_ttl_secs: u64,
    /// ... or after this long without a request.
    pub idle_timeout_secs: u64,
    /// An invitation link works this long.
    pub invitation_ttl_secs: u64,
    /// The session cookie's `Secure` attribute. Unset: on when `public_base_url` is https
    /// (off only for development over plain http).
    pub secure_cookie: Option<bool>,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            session_ttl_secs: 12 * 3600,
            idle_timeout_secs: 3600,
            invitation_ttl_secs: 7 * 86_400,
            secure_cookie: None,
        }
    }
}

impl DashboardConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.session_ttl_secs == 0 || self.idle_timeout_secs == 0 || self.invitation_ttl_secs == 0 {
            return invalid("dashboard", "session_ttl_secs, idle_timeout_secs and invitation_ttl_secs must be above 0");
        }
        Ok(())
    }

    /// Whether the session cookie is `Secure`.
    pub fn secure_cookie(&self, public_base_url: &url::Url) -> bool {
        self.secure_cookie.unwrap_or(public_base_url.scheme() == "https")
    }
}
