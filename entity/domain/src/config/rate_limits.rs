//! `[rate_limits]`: request throttling per API key, client IP and test merchant.

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};

/// `[rate_limits]`: GCRA limits per class. Each class allows `limit` requests per
/// `period_secs`, all of them at once as a burst, refilled evenly over the period.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    pub enabled: bool,
    /// Per API key, GET and HEAD requests.
    pub reads: RateLimit,
    /// Per API key, every other method.
    pub writes: RateLimit,
    /// Per client IP on `/v1/currencies`, `/v1/rates` and every `/checkout/...` route.
    pub public: RateLimit,
    /// Per client IP: failed API key checks (a throttled IP's keys are not looked up).
    pub auth_failures: RateLimit,
    /// Per merchant, `/v1/test/*` (the shared sandbox).
    pub test_helpers: RateLimit,
    /// Dashboard sign-in attempts per e-mail address.
    pub login_per_account: RateLimit,
    /// Dashboard sign-in attempts per client IP.
    pub login_per_ip: RateLimit,
    /// Keys of the shared store (when `redis_url` is set) start with this prefix.
    pub redis_prefix: String,
    /// Each Redis call (and connection attempt) gives up after this long; the request passes.
    pub redis_timeout_ms: u64,
    /// A store failure (Redis unreachable) is logged at most once per this many seconds.
    pub failure_log_interval_secs: u64,
    /// Header holding the client address set by a reverse proxy (`x-forwarded-for`), read only
    /// on connections from `trusted_proxies`.
    pub trusted_proxy_header: Option<String>,
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// `limit` requests per `period_secs`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub limit: u32,
    pub period_secs: u64,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        let per_minute = |limit| RateLimit { limit, period_secs: 60 };
        RateLimitsConfig {
            enabled: true,
            reads: per_minute(1200),
            writes: per_minute(300),
            public: per_minute(600),
            auth_failures: per_minute(20),
            test_helpers: per_minute(120),
            login_per_account: RateLimit { limit: 10, period_secs: 900 },
            login_per_ip: RateLimit { limit: 30, period_secs: 900 },
            redis_prefix: "paygate:rl".into(),
            redis_timeout_ms: 200,
            failure_log_interval_secs: 60,
            trusted_proxy_header: None,
            trusted_proxies: Vec::new(),
        }
    }
}

impl RateLimitsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (class, l) in [
            ("reads", self.reads),
            ("writes", self.writes),
            ("public", self.public),
            ("auth_failures", self.auth_failures),
            ("test_helpers", self.test_helpers),
            ("login_per_account", self.login_per_account),
            ("login_per_ip", self.login_per_ip),
        ] {
            if l.limit == 0 || l.period_secs == 0 || l.period_secs > 86_400 {
                return invalid(
                    &format!("rate_limits.{class}"),
                    "limit must be at least 1 and period_secs between 1 and 86400",
                );
            }
        }
        if self.redis_timeout_ms == 0 {
            return invalid("rate_limits.redis_timeout_ms", "must be at least 1");
        }
        if let Some(h) = &self.trusted_proxy_header
            && reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err()
        {
            return invalid("rate_limits.trusted_proxy_header", "not a valid header name");
        }
        if self.trusted_proxy_header.is_some() == self.trusted_proxies.is_empty() {
            return invalid(
                "rate_limits.trusted_proxies",
                "trusted_proxy_header and trusted_proxies are set together (the header is read only from those proxies)",
            );
        }
        Ok(())
    }
}
