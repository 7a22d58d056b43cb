//! The shared store: one GCRA step per request as an atomic Lua script in Redis (one round
//! trip, Redis's own clock via `TIME`, so API processes with skewed clocks agree). The key holds
//! the theoretical arrival time (TAT) in microseconds and expires when the bucket is full again.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::{Decision, Gcra, StoreError};

/// KEYS[1]: the bucket. ARGV: emission interval (µs), period (µs), 1 to count the request or 0
/// to only test it. Returns {allowed, remaining, retry_after µs, reset µs}.
const GCRA_LUA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local commit = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local ahead = new_tat - now
if ahead > period then
  return {0, 0, ahead - period, tat - now}
end
if commit == 1 then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000) + 1)
end
return {1, math.floor((period - ahead) / interval), 0, ahead}
"#;

pub(super) struct RedisStore {
    conn: ConnectionManager,
    script: redis::Script,
    prefix: String,
    timeout: Duration,
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
        })
    }

    pub async fn check(&self, key: &str, gcra: Gcra, commit: bool) -> Result<Decision, StoreError> {
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(format!("{}:{key}", self.prefix));
        invocation.arg(micros(gcra.interval)).arg(micros(gcra.period)).arg(u8::from(commit));
        let call = invocation.invoke_async::<(i64, i64, i64, i64)>(&mut conn);
        // The script is loaded on first use (EVALSHA, then EVAL): two round trips at most.
        let (allowed, remaining, retry_after, reset) = tokio::time::timeout(self.timeout * 2, call)
            .await
            .map_err(|_| StoreError(format!("no answer within {} ms", (self.timeout * 2).as_millis())))?
            .map_err(|e| StoreError(e.to_string()))?;
        let us = |v: i64| Duration::from_micros(u64::try_from(v).unwrap_or(0));
        Ok(Decision {
            allowed: allowed == 1,
            limit: gcra.limit,
            remaining: u32::try_from(remaining).unwrap_or(0).min(gcra.limit),
            reset: us(reset),
            retry_after: us(retry_after),
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}
