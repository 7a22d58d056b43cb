//! The state every handler receives: the domain's state (database, configuration, caches,
//! address book; what the services take) plus what only the HTTP face holds, the rate limiter.

use std::ops::Deref;
use std::sync::Arc;

use domain::config::Config;
use domain::state::AppState;

use crate::ratelimit::RateLimiter;

#[derive(Clone)]
pub struct HttpState {
    /// Behind one `Arc`: every extractor and middleware clones the state, and a clone of
    /// `AppState` itself touches eight reference counts that every request thread shares.
    pub domain: Arc<AppState>,
    /// Request throttling (`crate::ratelimit`): in process, or shared through Redis.
    pub limiter: Arc<RateLimiter>,
    /// The operator's secrets key (`webhooks.secret_key`), sealing dashboard users' TOTP
    /// secrets. `None` when not configured: the dashboard then says so instead of signing in.
    pub secrets: Option<Arc<domain::webhooks::secrets::SecretBox>>,
}

impl HttpState {
    pub fn new(domain: AppState) -> anyhow::Result<HttpState> {
        let config: &Config = &domain.config;
        let limiter = Arc::new(RateLimiter::new(&config.rate_limits, config.redis_url.as_deref())?);
        let secrets = match domain::webhooks::secrets::SecretBox::from_config(config) {
            Ok(b) => Some(Arc::new(b)),
            Err(e) => {
                tracing::warn!(error = %e, "the dashboard cannot sign anyone in without the secrets key");
                None
            }
        };
        Ok(HttpState { domain: Arc::new(domain), limiter, secrets })
    }
}

/// Handlers call the domain's services with `&state`.
impl Deref for HttpState {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.domain
    }
}
