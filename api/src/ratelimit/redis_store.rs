//! The shared store: GCRA as an atomic Lua script in Redis (Redis's own clock via `TIME`, so
//! API processes with skewed clocks agree). The key holds the theoretical arrival time (TAT) in
//! microseconds and expires when the bucket is full again.
//!
//! A busy key does not cost a round trip per request: a process takes a small **lease** of
//! requests from the shared bucket in one step (the script advances the TAT by all of them, so
//! the sum over every process never exceeds the limit) and spends it locally for at most
//! [`LEASE_TTL`]. The lease grows (doubling, up to a twentieth of the limit) while it is used
//! up in time and shrinks when it lapses with requests left; the leftovers go back to the bucket
//! with the key's next script call. A key with a limit under 40 gets leases of one: every
//! request is a round trip, exact as before. What a lease can hold back from another process is
//! at most a twentieth of the limit, for at most [`LEASE_TTL`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Decision, Gcra, StoreError};

/// KEYS[1]: the bucket. ARGV: emission interval (µs), period (µs), 1 to take or 0 to only test,
/// requests wanted (≥ 1), requests given back from a lapsed lease. Takes as many of the wanted
/// requests as fit. Returns {taken, remaining after, retry_after µs, reset µs}.
const GCRA_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local commit = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local returned = tonumber(ARGV[5])
local stored = redis.call('GET', KEYS[1])
local tat = tonumber(stored or now)
if returned > 0 then tat = tat - returned * interval end
if tat < now then tat = now end
local room = math.floor((period - (tat - now)) / interval)
if room < 1 then
  if commit == 1 and returned > 0 and stored then
    redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
  end
  return {0, 0, tat + interval - now - period, tat - now}
end
local taken = math.min(want, room)
local new_tat = tat + taken * interval
if commit == 1 then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
end
return {taken, room - taken, 0, new_tat - now}
"#;

/// How long a lease may be spent.
pub(crate) const LEASE_TTL: Duration = Duration::from_millis(250);
/// A lease holds at most this fraction of the limit (1/20).
const LEASE_SHARE: u32 = 20;
/// Leases are dropped from memory once this many keys are held and they lapsed.
const MAX_LEASES: usize = 10_000;

/// Requests of one key taken from the shared bucket and not spent yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    pub left: u32,
    /// Size of the last lease taken (the next one doubles or halves from it).
    pub size: u32,
    pub until: Instant,
    /// The shared bucket's remaining capacity when it was taken.
    pub shared_remaining: u32,
    pub reset: Duration,
}

/// What a check does with the key's lease (if any) at `now`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Spend one leased request.
    Spend,
    /// Ask the bucket for `want` requests, giving `returned` back.
    Take { want: u32, returned: u32 },
}

/// The lease rule: spend while one is live; else take a new one, twice the last size if the
/// last was used up in time, half if it lapsed with requests left, never more than a twentieth
/// of the limit.
pub(crate) fn step(lease: Option<&Lease>, limit: u32, now: Instant) -> Step {
    let cap = (limit / LEASE_SHARE).max(1);
    match lease {
        Some(l) if l.left > 0 && now < l.until => Step::Spend,
        Some(l) if l.left > 0 => Step::Take { want: (l.size / 2).clamp(1, cap), returned: l.left },
        Some(l) => Step::Take { want: l.size.saturating_mul(2).clamp(1, cap), returned: 0 },
        None => Step::Take { want: 1, returned: 0 },
    }
}

pub(super) struct RedisStore {
    conn: ConnectionManager,
    script: redis::Script,
    prefix: String,
    timeout: Duration,
    leases: Mutex<HashMap<String, Lease>>,
}

impl RedisStore {
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> anyhow::Result<RedisStore> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(RedisStore {
            conn,
            script: redis::Script::new(GCRA_LUA),
            prefix: prefix.trim_end_matches(':').to_owned(),
            timeout,
            leases: Mutex::new(HashMap::new()),
        })
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub async fn check(&self, key: &str, gcra: Gcra, commit: bool) -> Result<Decision, StoreError> {
        let now = Instant::now();
        let step = {
            let mut leases = self.leases();
            let lease = leases.get_mut(key);
            match step(lease.as_deref(), gcra.limit, now) {
                Step::Spend => {
                    let l = lease.expect("a live lease");
                    if commit {
                        l.left -= 1;
                    }
                    return Ok(Decision {
                        allowed: true,
                        limit: gcra.limit,
                        remaining: l.shared_remaining.saturating_add(l.left).min(gcra.limit),
                        reset: l.reset,
                        retry_after: Duration::ZERO,
                    });
                }
                Step::Take { want, returned } => {
                    if commit && let Some(l) = lease {
                        // The leftovers go back with this call.
                        l.left = 0;
                    }
                    if commit { (want, returned) } else { (1, 0) }
                }
            }
        };
        let (want, returned) = step;
        let (taken, remaining, retry_after, reset) = self.call(key, gcra, commit, want, returned).await?;
        let us = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
        let taken = u32::try_from(taken).unwrap_or(0);
        let remaining = u32::try_from(remaining).unwrap_or(0).min(gcra.limit);
        if commit && taken > 0 {
            let mut leases = self.leases();
            if leases.len() >= MAX_LEASES {
                leases.retain(|_, l| l.left > 0 && l.until > now);
            }
            let l = leases.entry(key.to_owned()).or_insert(Lease {
                left: 0,
                size: want,
                until: now,
                shared_remaining: remaining,
                reset: us(reset),
            });
            // Another request of this process may have taken a lease meanwhile: keep both.
            l.left = l.left.saturating_add(taken - 1);
            l.size = want;
            l.until = now + LEASE_TTL;
            l.shared_remaining = remaining;
            l.reset = us(reset);
        }
        let left = if commit { self.leases().get(key).map_or(0, |l| l.left) } else { 0 };
        Ok(Decision {
            allowed: taken > 0,
            limit: gcra.limit,
            remaining: remaining.saturating_add(left).min(gcra.limit),
            reset: us(reset),
            retry_after: us(retry_after),
        })
    }

    async fn call(
        &self,
        key: &str,
        gcra: Gcra,
        commit: bool,
        want: u32,
        returned: u32,
    ) -> Result<(i64, i64, i64, i64), StoreError> {
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(format!("{}:{key}", self.prefix));
        invocation
            .arg(micros(gcra.interval))
            .arg(micros(gcra.period))
            .arg(u8::from(commit))
            .arg(want.max(1))
            .arg(returned);
        let call = invocation.invoke_async::<(i64, i64, i64, i64)>(&mut conn);
        // The script is loaded on first use (EVALSHA, then EVAL): two round trips at most.
        tokio::time::timeout(self.timeout * 2, call)
            .await
            .map_err(|_| StoreError(format!("no answer within {} ms", (self.timeout * 2).as_millis())))?
            .map_err(|e| StoreError(e.to_string()))
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(left: u32, size: u32, until: Instant) -> Lease {
        Lease { left, size, until, shared_remaining: 0, reset: Duration::ZERO }
    }

    #[test]
    fn leases_spend_grow_shrink_and_stay_small_for_small_limits() {
        let now = Instant::now();
        let later = now + LEASE_TTL;
        // First request of a key: one, as without leases.
        assert_eq!(step(None, 1200, now), Step::Take { want: 1, returned: 0 });
        // A live lease is spent locally.
        assert_eq!(step(Some(&lease(3, 4, later)), 1200, now), Step::Spend);
        // Used up: twice as many next time, at most a twentieth of the limit.
        assert_eq!(step(Some(&lease(0, 4, later)), 1200, now), Step::Take { want: 8, returned: 0 });
        assert_eq!(step(Some(&lease(0, 40, later)), 1200, now), Step::Take { want: 60, returned: 0 });
        // Lapsed with requests left: they go back, and the next lease is half as big.
        assert_eq!(step(Some(&lease(5, 8, now)), 1200, now), Step::Take { want: 4, returned: 5 });
        // Limits under 40: every request asks the bucket for exactly one.
        assert_eq!(step(Some(&lease(0, 1, later)), 10, now), Step::Take { want: 1, returned: 0 });
        assert_eq!(step(Some(&lease(0, 1, later)), 39, now), Step::Take { want: 1, returned: 0 });
    }
}
