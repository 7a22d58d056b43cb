//! Request throttling (GCRA) per API key, client IP and test merchant.
//!
//! Classes (`Class`): reads and writes per API key (separate buckets, writes lower), public
//! routes per client IP, failed key checks per client IP (checked before a key costs a database
//! lookup), and `/v1/test/*` per merchant. Each class's limit comes from `[rate_limits]`; reads,
//! writes and test helpers can be raised or lowered per merchant (`ops merchants settings`).
//!
//! Stores: in process with `governor` (the embedded default), or, when `redis_url` is set, one
//! atomic Lua GCRA script in Redis so every API process enforces the same limit per key. A
//! failing store lets the request pass (fail open): counted, logged at most once per interval.
//! docs/api-decisions.md explains the choices.

pub mod layer;
mod local;
mod redis_store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use domain::config::{RateLimit, RateLimitsConfig};

/// What a request is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Reads,
    Writes,
    Public,
    AuthFailures,
    TestHelpers,
    /// Dashboard sign-in attempts per e-mail address.
    LoginAccount,
    /// Dashboard sign-in attempts per client IP.
    LoginIp,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Reads => "reads",
            Class::Writes => "writes",
            Class::Public => "public",
            Class::AuthFailures => "auth_failures",
            Class::TestHelpers => "test_helpers",
            Class::LoginAccount => "login_account",
            Class::LoginIp => "login_ip",
        }
    }

    /// The configured limit of the class.
    pub fn configured(self, c: &RateLimitsConfig) -> RateLimit {
        match self {
            Class::Reads => c.reads,
            Class::Writes => c.writes,
            Class::Public => c.public,
            Class::AuthFailures => c.auth_failures,
            Class::TestHelpers => c.test_helpers,
            Class::LoginAccount => c.login_per_account,
            Class::LoginIp => c.login_per_ip,
        }
    }
}

/// The outcome of one check, with what the `RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u32,
    /// Requests still allowed right now.
    pub remaining: u32,
    /// Until the bucket is full again.
    pub reset: Duration,
    /// Until the next request is allowed (zero when allowed).
    pub retry_after: Duration,
}

impl Decision {
    /// Allowed without counting (a peek that found no refusal, or a store that failed open):
    /// the remaining capacity is not known, so the full limit is reported.
    pub(crate) fn allowed_uncounted(gcra: Gcra) -> Decision {
        Decision {
            allowed: true,
            limit: gcra.limit,
            remaining: gcra.limit,
            reset: Duration::ZERO,
            retry_after: Duration::ZERO,
        }
    }
}

/// GCRA arithmetic shared by both stores: emission interval and tolerance of a limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gcra {
    /// Time one request "costs": period / limit.
    pub interval: Duration,
    /// The whole bucket: `limit` requests at once.
    pub period: Duration,
    pub limit: u32,
}

impl Gcra {
    pub fn new(l: RateLimit) -> Gcra {
        let limit = l.limit.max(1);
        let period = Duration::from_secs(l.period_secs.max(1));
        Gcra { interval: period / limit, period, limit }
    }
}

/// Whole seconds, rounded up (`Retry-After`, `RateLimit-Reset`).
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[derive(Debug, thiserror::Error)]
#[error("rate limit store: {0}")]
pub struct StoreError(String);

enum Store {
    Local(local::LocalStore),
    Redis(redis_store::RedisStore),
}

/// The limiter of an API process.
pub struct RateLimiter {
    config: RateLimitsConfig,
    store: Store,
    failures: AtomicU64,
    last_failure_log: AtomicU64,
}

impl RateLimiter {
    /// Redis when `redis_url` is given, else in process. Connecting is lazy: an unreachable
    /// Redis at start-up fails open like one lost later.
    pub fn new(config: &RateLimitsConfig, redis_url: Option<&str>) -> anyhow::Result<RateLimiter> {
        let store = match redis_url.filter(|u| !u.is_empty()) {
            Some(url) => Store::Redis(redis_store::RedisStore::new(
                url,
                &config.redis_prefix,
                Duration::from_millis(config.redis_timeout_ms),
            )?),
            None => Store::Local(local::LocalStore::default()),
        };
        Ok(RateLimiter {
            config: config.clone(),
            store,
            failures: AtomicU64::new(0),
            last_failure_log: AtomicU64::new(0),
        })
    }

    pub fn config(&self) -> &RateLimitsConfig {
        &self.config
    }

    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Whether the store is shared through Redis.
    pub fn shared(&self) -> bool {
        matches!(self.store, Store::Redis(_))
    }

    /// How many checks failed open because the store did not answer.
    pub fn store_failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Counts one request of `key` in `class` under `limit`.
    pub async fn check(&self, class: Class, key: &str, limit: RateLimit) -> Decision {
        self.run(class, key, limit, true).await
    }

    /// Whether one more request would pass, without counting it.
    pub async fn peek(&self, class: Class, key: &str, limit: RateLimit) -> Decision {
        self.run(class, key, limit, false).await
    }

    async fn run(&self, class: Class, key: &str, limit: RateLimit, commit: bool) -> Decision {
        let gcra = Gcra::new(limit);
        let key = format!("{}:{key}", class.as_str());
        let result = match &self.store {
            Store::Local(s) => Ok(s.check(&key, limit, gcra, commit)),
            Store::Redis(s) => s.check(&key, gcra, commit).await,
        };
        match result {
            Ok(d) => {
                if !d.allowed {
                    metrics::counter!("paygate_rate_limited_total", "class" => class.as_str()).increment(1);
                }
                d
            }
            Err(e) => {
                self.failed_open(&e);
                Decision::allowed_uncounted(gcra)
            }
        }
    }

    /// Counts a store failure and logs it unless one was logged within the interval.
    fn failed_open(&self, e: &StoreError) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("paygate_rate_limit_store_failures_total").increment(1);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let last = self.last_failure_log.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= self.config.failure_log_interval_secs
            && self.last_failure_log.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            let total = self.failures.load(Ordering::Relaxed);
            tracing::warn!(error = %e, failures = total, "rate limit store unreachable: requests pass unthrottled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_interval_and_rounding() {
        let g = Gcra::new(RateLimit { limit: 10, period_secs: 60 });
        assert_eq!(g.interval, Duration::from_secs(6));
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_millis(2001)), 3);
    }

    #[tokio::test]
    async fn local_store_counts_a_burst_and_peek_counts_nothing() {
        let rl = RateLimiter::new(&RateLimitsConfig::default(), None).unwrap();
        let l = RateLimit { limit: 3, period_secs: 60 };
        assert!(rl.peek(Class::AuthFailures, "ip", l).await.allowed);
        let seen: Vec<u32> = {
            let mut v = Vec::new();
            for _ in 0..3 {
                let d = rl.check(Class::AuthFailures, "ip", l).await;
                assert!(d.allowed);
                v.push(d.remaining);
            }
            v
        };
        assert_eq!(seen, [2, 1, 0]);
        let d = rl.check(Class::AuthFailures, "ip", l).await;
        assert!(!d.allowed);
        assert!(d.retry_after > Duration::from_secs(18) && d.retry_after <= Duration::from_secs(20), "{d:?}");
        assert!(!rl.peek(Class::AuthFailures, "ip", l).await.allowed);
        // Another key and another class have their own buckets.
        assert!(rl.check(Class::AuthFailures, "other", l).await.allowed);
        assert!(rl.check(Class::Public, "ip", l).await.allowed);
    }
}
