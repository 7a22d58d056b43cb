//! The in-process store: `governor` keyed GCRA limiters, one per distinct limit (merchant
//! overrides make several), with `StateInformationMiddleware` for the remaining capacity.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;

use super::{Decision, Gcra};
use domain::config::RateLimit;

type Keyed = governor::RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock, StateInformationMiddleware>;

/// Forgotten keys (buckets full again) are dropped every this many checks.
const SWEEP_EVERY: u64 = 4096;

#[derive(Default)]
pub(super) struct LocalStore {
    limiters: RwLock<HashMap<RateLimit, Arc<Keyed>>>,
    /// Keys refused until then: governor cannot test a bucket without counting, so a peek
    /// answers from the last refusal.
    blocked: Mutex<HashMap<String, Instant>>,
    checks: AtomicU64,
}

impl LocalStore {
    pub fn check(&self, key: &str, limit: RateLimit, gcra: Gcra, commit: bool) -> Decision {
        if !commit {
            return self.peek(key, gcra);
        }
        let limiter = self.limiter(limit, gcra);
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep();
        }
        match limiter.check_key(&key.to_owned()) {
            Ok(snapshot) => {
                let remaining = snapshot.remaining_burst_capacity();
                Decision {
                    allowed: true,
                    limit: gcra.limit,
                    remaining,
                    reset: gcra.interval * (gcra.limit - remaining.min(gcra.limit)),
                    retry_after: Duration::ZERO,
                }
            }
            Err(not_until) => {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                self.blocked.lock().unwrap_or_else(|p| p.into_inner()).insert(key.to_owned(), Instant::now() + wait);
                refused(gcra, wait)
            }
        }
    }

    fn peek(&self, key: &str, gcra: Gcra) -> Decision {
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        match blocked.get(key).map(|until| until.saturating_duration_since(Instant::now())) {
            Some(wait) if !wait.is_zero() => refused(gcra, wait),
            Some(_) => {
                blocked.remove(key);
                Decision::allowed_uncounted(gcra)
            }
            None => Decision::allowed_uncounted(gcra),
        }
    }

    fn limiter(&self, limit: RateLimit, gcra: Gcra) -> Arc<Keyed> {
        if let Some(l) = self.limiters.read().unwrap_or_else(|p| p.into_inner()).get(&limit) {
            return l.clone();
        }
        let burst = NonZeroU32::new(gcra.limit).unwrap_or(NonZeroU32::MIN);
        let quota = governor::Quota::with_period(gcra.interval.max(Duration::from_nanos(1)))
            .unwrap_or_else(|| governor::Quota::per_second(burst))
            .allow_burst(burst);
        let mut map = self.limiters.write().unwrap_or_else(|p| p.into_inner());
        map.entry(limit)
            .or_insert_with(|| {
                Arc::new(governor::RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>())
            })
            .clone()
    }

    /// Drops the state of keys whose buckets are full again (the memory a flood of distinct
    /// keys or IPs leaves behind) and expired refusals.
    fn sweep(&self) {
        for l in self.limiters.read().unwrap_or_else(|p| p.into_inner()).values() {
            l.retain_recent();
            l.shrink_to_fit();
        }
        let now = Instant::now();
        self.blocked.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, until| *until > now);
    }
}

fn refused(gcra: Gcra, wait: Duration) -> Decision {
    Decision {
        allowed: false,
        limit: gcra.limit,
        remaining: 0,
        reset: (wait + gcra.period).saturating_sub(gcra.interval),
        retry_after: wait,
    }
}
