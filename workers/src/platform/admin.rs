//! Queue administration: depths, dead jobs, replay, purge of completed jobs.
//!
//! Redis keys (apalis-redis 1.0, queue `Q` = `<prefix>:<stage>`): `Q:active` (list of due ids),
//! `Q:scheduled` (zset, score = run_at in s), `Q:inflight:<worker>` (sets), `Q:workers` (zset),
//! `Q:data` (hash id -> job bytes), `Q:meta:<id>` (hash: status, attempts, result, done_at…),
//! `Q:dead` (set of ids), `Q:done` (set of ids). SQLite: apalis' `Jobs` table, `job_type` = `Q`.

use std::collections::HashMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;
use serde::Serialize;
use serde_json::Value;
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use super::backend::{Conn, Envelope, Queues, now_ms, redis_config, sqlite_registry};

/// Jobs of one queue by state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// Full queue name, `<prefix>:<stage>`.
    pub queue: String,
    /// Due and waiting for a worker.
    pub waiting: u64,
    /// Delayed (retries with their backoff, `push_after`).
    pub scheduled: u64,
    /// Claimed by a worker (running or buffered).
    pub running: u64,
    /// Failed for good; see [`Queues::dead`].
    pub dead: u64,
}

/// A dead-lettered job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadJob {
    pub id: String,
    /// The job as pushed.
    pub args: Value,
    /// Attempts made, the failed last one included.
    pub attempts: u32,
    pub last_error: String,
    pub failed_at: Option<DateTime<Utc>>,
}

/// Result of a replay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReplayOutcome {
    pub replayed: usize,
    /// Ids that were not dead jobs of the queue (unknown, or replayed meanwhile).
    pub not_found: Vec<String>,
}

/// A dead SQLite row: `Killed` (our dead letters), or `Failed` with no attempt left (apalis'
/// own retries exhausted). A macro so queries stay string literals.
macro_rules! sqlite_dead {
    () => {
        "(status = 'Killed' OR (status = 'Failed' AND attempts >= max_attempts))"
    };
}
/// A waiting (due or delayed) SQLite row.
macro_rules! sqlite_waiting {
    () => {
        "(status = 'Pending' OR (status = 'Failed' AND attempts < max_attempts))"
    };
}
const REPLAY_BATCH: usize = 100;

/// Atomically moves a dead job back to the scheduled set with its reset envelope; 0 when the id
/// is not in the dead set (so concurrent replays cannot run it twice).
const REDIS_REPLAY: &str = r"
-- KEYS[1] dead set, KEYS[2] data hash, KEYS[3] the job's meta hash, KEYS[4] scheduled zset
-- ARGV[1] job id, ARGV[2] new job bytes, ARGV[3] run_at (s)
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], 'result', 'done_at', 'locked_at', 'locked_by')
redis.call('HSET', KEYS[3], 'status', 'Pending', 'attempts', 0)
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
return 1
";

impl Queues {
    /// Every queue under this prefix (those pushed to or run by a stage), sorted.
    pub async fn queue_names(&self) -> anyhow::Result<Vec<String>> {
        let mut names: Vec<String> = match &self.conn {
            Conn::Redis(conn) => redis::cmd("SMEMBERS").arg(self.registry_key()).query_async(&mut conn.clone()).await?,
            Conn::Sqlite(pool) => {
                sqlx::query_scalar(concat!(
                    "SELECT name FROM ",
                    sqlite_registry!(),
                    " WHERE substr(name, 1, length(?1)) = ?1"
                ))
                .bind(format!("{}:", self.prefix()))
                .fetch_all(pool)
                .await?
            }
        };
        names.sort();
        Ok(names)
    }

    /// Depth of every known queue.
    pub async fn depths(&self) -> anyhow::Result<Vec<QueueDepth>> {
        let names = self.queue_names().await?;
        match &self.conn {
            Conn::Redis(conn) => {
                let mut out = Vec::with_capacity(names.len());
                for queue in names {
                    out.push(redis_depth(&mut conn.clone(), queue).await?);
                }
                Ok(out)
            }
            Conn::Sqlite(pool) => sqlite_depths(pool, names).await,
        }
    }

    /// Jobs of one queue (stage or full name) due and waiting for a worker: [`QueueDepth::waiting`]
    /// alone, in one round trip (the webhook dispatcher asks every round).
    pub async fn waiting(&self, queue: &str) -> anyhow::Result<u64> {
        let queue = self.full_name(queue);
        match &self.conn {
            Conn::Redis(conn) => {
                let mut pipe = redis::pipe();
                waiting_cmds(&mut pipe, &redis_config(&queue), now_ms() / 1000);
                let (active, due): (u64, u64) = pipe.query_async(&mut conn.clone()).await?;
                Ok(active + due)
            }
            Conn::Sqlite(pool) => {
                let mut one = sqlite_depths(pool, vec![queue]).await?;
                Ok(one.pop().context("a depth for the queue asked")?.waiting)
            }
        }
    }

    /// Up to `limit` dead jobs of `queue` (stage or full name), newest first.
    pub async fn dead(&self, queue: &str, limit: usize) -> anyhow::Result<Vec<DeadJob>> {
        let queue = self.full_name(queue);
        match &self.conn {
            Conn::Redis(conn) => redis_dead(&mut conn.clone(), &queue, limit).await,
            Conn::Sqlite(pool) => sqlite_dead(pool, &queue, limit).await,
        }
    }

    /// Puts dead jobs back on their queue, due now, with their attempts reset; they keep their ids.
    pub async fn replay(&self, queue: &str, ids: &[String]) -> anyhow::Result<ReplayOutcome> {
        let queue = self.full_name(queue);
        let mut outcome = ReplayOutcome::default();
        for id in ids {
            let replayed = match &self.conn {
                Conn::Redis(conn) => redis_replay(&mut conn.clone(), &queue, id).await?,
                Conn::Sqlite(pool) => sqlite_replay(pool, &queue, id).await?,
            };
            if replayed {
                outcome.replayed += 1;
            } else {
                outcome.not_found.push(id.clone());
            }
        }
        if outcome.replayed > 0 {
            tracing::info!(queue, replayed = outcome.replayed, "dead jobs replayed");
        }
        Ok(outcome)
    }

    /// Replays every dead job of `queue`, in batches; `progress(done, total)` after each batch.
    /// Returns how many were replayed.
    pub async fn replay_all(&self, queue: &str, mut progress: impl FnMut(usize, usize)) -> anyhow::Result<usize> {
        let queue = self.full_name(queue);
        let ids = self.dead_ids(&queue).await?;
        let total = ids.len();
        let mut replayed = 0;
        progress(0, total);
        for (i, batch) in ids.chunks(REPLAY_BATCH).enumerate() {
            replayed += self.replay(&queue, batch).await?.replayed;
            progress((i * REPLAY_BATCH + batch.len()).min(total), total);
        }
        Ok(replayed)
    }

    /// Ids of the dead jobs of `queue` (full name), sorted.
    pub async fn dead_ids(&self, queue: &str) -> anyhow::Result<Vec<String>> {
        let mut ids: Vec<String> = match &self.conn {
            Conn::Redis(conn) => {
                redis::cmd("SMEMBERS").arg(redis_config(queue).dead_jobs_set()).query_async(&mut conn.clone()).await?
            }
            Conn::Sqlite(pool) => {
                sqlx::query_scalar(concat!("SELECT id FROM Jobs WHERE job_type = ?1 AND ", sqlite_dead!()))
                    .bind(queue)
                    .fetch_all(pool)
                    .await?
            }
        };
        ids.sort_unstable();
        Ok(ids)
    }

    /// Deletes the completed jobs of `queue` (the database, not the queue, keeps the history).
    pub async fn purge_done(&self, queue: &str) -> anyhow::Result<u64> {
        let queue = self.full_name(queue);
        match &self.conn {
            Conn::Redis(conn) => {
                let mut conn = conn.clone();
                let cfg = redis_config(&queue);
                let mut purged = 0u64;
                loop {
                    let ids: Vec<String> =
                        redis::cmd("SPOP").arg(cfg.done_jobs_set()).arg(500).query_async(&mut conn).await?;
                    if ids.is_empty() {
                        return Ok(purged);
                    }
                    let mut pipe = redis::pipe();
                    pipe.cmd("HDEL").arg(cfg.job_data_hash()).arg(&ids).ignore();
                    for id in &ids {
                        pipe.cmd("DEL").arg(format!("{}:{id}", cfg.job_meta_hash())).ignore();
                    }
                    pipe.query_async::<()>(&mut conn).await?;
                    purged += ids.len() as u64;
                }
            }
            Conn::Sqlite(pool) => Ok(sqlx::query("DELETE FROM Jobs WHERE job_type = ?1 AND status = 'Done'")
                .bind(&queue)
                .execute(pool)
                .await?
                .rows_affected()),
        }
    }
}

fn dead_job(id: String, data: Option<&[u8]>, result: Option<&str>, done_at: Option<i64>) -> DeadJob {
    let envelope = data.and_then(|d| serde_json::from_slice::<Envelope<Value>>(d).ok());
    let (args, attempts) = match envelope {
        Some(e) => (e.job, e.attempt.saturating_add(1)),
        // Not one of ours: show the raw payload.
        None => (data.and_then(|d| serde_json::from_slice(d).ok()).unwrap_or(Value::Null), 0),
    };
    DeadJob {
        id,
        args,
        attempts,
        last_error: result.map(last_error).unwrap_or_default(),
        failed_at: done_at.and_then(|t| DateTime::from_timestamp(t, 0)),
    }
}

/// apalis stores `{"Err": "AbortError: <message>"}`; keep the message.
fn last_error(result: &str) -> String {
    let message = match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) => match map.get("Err") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => result.to_owned(),
        },
        _ => result.to_owned(),
    };
    message.strip_prefix("AbortError: ").map(str::to_owned).unwrap_or(message)
}

/// The envelope of a dead job, reset for a new first attempt due now.
fn reset_envelope(data: &[u8]) -> anyhow::Result<(Vec<u8>, u64)> {
    let mut envelope: Envelope<Value> = serde_json::from_slice(data).context("dead job is not a job envelope")?;
    envelope.attempt = 0;
    envelope.ready_at_ms = now_ms();
    Ok((envelope.to_bytes()?, envelope.ready_at_ms / 1000))
}

/// A job's stored bytes and its meta hash.
type RedisJobRecord = (Option<Vec<u8>>, HashMap<String, String>);

async fn redis_dead(conn: &mut ConnectionManager, queue: &str, limit: usize) -> anyhow::Result<Vec<DeadJob>> {
    let cfg = redis_config(queue);
    let mut ids: Vec<String> = redis::cmd("SMEMBERS").arg(cfg.dead_jobs_set()).query_async(conn).await?;
    // Ids are ULIDs: sorting them sorts by creation time.
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.truncate(limit);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("HGET").arg(cfg.job_data_hash()).arg(id);
        pipe.cmd("HGETALL").arg(format!("{}:{id}", cfg.job_meta_hash()));
    }
    let flat: Vec<redis::Value> = pipe.query_async(conn).await?;
    let records = flat
        .chunks(2)
        .map(|pair| Ok((redis::from_redis_value(pair[0].clone())?, redis::from_redis_value(pair[1].clone())?)))
        .collect::<Result<Vec<RedisJobRecord>, redis::ParsingError>>()?;
    Ok(ids
        .into_iter()
        .zip(records)
        .map(|(id, (data, meta))| {
            let done_at = meta.get("done_at").and_then(|t| t.parse().ok());
            dead_job(id, data.as_deref(), meta.get("result").map(String::as_str), done_at)
        })
        .collect())
}

async fn sqlite_dead(pool: &SqlitePool, queue: &str, limit: usize) -> anyhow::Result<Vec<DeadJob>> {
    let rows = sqlx::query(concat!(
        "SELECT id, job, last_result, done_at FROM Jobs WHERE job_type = ?1 AND ",
        sqlite_dead!(),
        " ORDER BY done_at DESC, id DESC LIMIT ?2"
    ))
    .bind(queue)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(dead_job(
                r.try_get("id")?,
                r.try_get::<Option<Vec<u8>>, _>("job")?.as_deref(),
                r.try_get::<Option<String>, _>("last_result")?.as_deref(),
                r.try_get("done_at")?,
            ))
        })
        .collect()
}

/// Adds the two counts of a Redis queue's waiting jobs to `pipe`: the active list, and the
/// scheduled jobs already due at `now` (seconds).
fn waiting_cmds(pipe: &mut redis::Pipeline, cfg: &apalis_redis::Config, now: u64) {
    pipe.cmd("LLEN").arg(cfg.active_jobs_list());
    pipe.cmd("ZCOUNT").arg(cfg.scheduled_jobs_set()).arg("-inf").arg(now);
}

async fn redis_depth(conn: &mut ConnectionManager, queue: String) -> anyhow::Result<QueueDepth> {
    let cfg = redis_config(&queue);
    let now = now_ms() / 1000;
    let mut pipe = redis::pipe();
    waiting_cmds(&mut pipe, &cfg, now);
    let (active, due, later, dead, workers): (u64, u64, u64, u64, Vec<String>) = pipe
        .cmd("ZCOUNT")
        .arg(cfg.scheduled_jobs_set())
        .arg(format!("({now}"))
        .arg("+inf")
        .cmd("SCARD")
        .arg(cfg.dead_jobs_set())
        .cmd("ZRANGE")
        .arg(cfg.workers_set())
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await?;
    let mut running = 0;
    if !workers.is_empty() {
        let mut pipe = redis::pipe();
        for w in &workers {
            pipe.cmd("SCARD").arg(format!("{}:{w}", cfg.inflight_jobs_set()));
        }
        let counts: Vec<u64> = pipe.query_async(conn).await?;
        running = counts.iter().sum();
    }
    Ok(QueueDepth { queue, waiting: active + due, scheduled: later, running, dead })
}

async fn sqlite_depths(pool: &SqlitePool, names: Vec<String>) -> anyhow::Result<Vec<QueueDepth>> {
    let rows = sqlx::query(concat!(
        "SELECT job_type,
            SUM(CASE WHEN ",
        sqlite_waiting!(),
        " AND run_at <= ?1 THEN 1 ELSE 0 END) AS waiting,
            SUM(CASE WHEN ",
        sqlite_waiting!(),
        " AND run_at > ?1 THEN 1 ELSE 0 END) AS scheduled,
            SUM(CASE WHEN status IN ('Queued', 'Running') THEN 1 ELSE 0 END) AS running,
            SUM(CASE WHEN ",
        sqlite_dead!(),
        " THEN 1 ELSE 0 END) AS dead
         FROM Jobs WHERE job_type IN (SELECT value FROM json_each(?2)) GROUP BY job_type"
    ))
    .bind(i64::try_from(now_ms() / 1000)?)
    .bind(serde_json::to_string(&names)?)
    .fetch_all(pool)
    .await?;
    let mut by_queue = HashMap::new();
    for r in &rows {
        let count = |col: &str| -> anyhow::Result<u64> { Ok(u64::try_from(r.try_get::<i64, _>(col)?)?) };
        let queue: String = r.try_get("job_type")?;
        by_queue.insert(
            queue.clone(),
            QueueDepth {
                queue,
                waiting: count("waiting")?,
                scheduled: count("scheduled")?,
                running: count("running")?,
                dead: count("dead")?,
            },
        );
    }
    Ok(names
        .into_iter()
        .map(|queue| {
            by_queue.remove(&queue).unwrap_or(QueueDepth { queue, waiting: 0, scheduled: 0, running: 0, dead: 0 })
        })
        .collect())
}

async fn redis_replay(conn: &mut ConnectionManager, queue: &str, id: &str) -> anyhow::Result<bool> {
    let cfg = redis_config(queue);
    let is_dead: bool = redis::cmd("SISMEMBER").arg(cfg.dead_jobs_set()).arg(id).query_async(conn).await?;
    if !is_dead {
        return Ok(false);
    }
    let data: Option<Vec<u8>> = redis::cmd("HGET").arg(cfg.job_data_hash()).arg(id).query_async(conn).await?;
    let Some(data) = data else { return Ok(false) };
    let (bytes, run_at) = reset_envelope(&data).with_context(|| format!("job {id}"))?;
    let moved: i64 = redis::Script::new(REDIS_REPLAY)
        .key(cfg.dead_jobs_set())
        .key(cfg.job_data_hash())
        .key(format!("{}:{id}", cfg.job_meta_hash()))
        .key(cfg.scheduled_jobs_set())
        .arg(id)
        .arg(bytes)
        .arg(run_at)
        .invoke_async(conn)
        .await?;
    Ok(moved == 1)
}

async fn sqlite_replay(pool: &SqlitePool, queue: &str, id: &str) -> anyhow::Result<bool> {
    let data: Option<Vec<u8>> =
        sqlx::query_scalar(concat!("SELECT job FROM Jobs WHERE id = ?1 AND job_type = ?2 AND ", sqlite_dead!()))
            .bind(id)
            .bind(queue)
            .fetch_optional(pool)
            .await?;
    let Some(data) = data else { return Ok(false) };
    let (bytes, run_at) = reset_envelope(&data).with_context(|| format!("job {id}"))?;
    let updated = sqlx::query(concat!(
        "UPDATE Jobs SET job = ?1, status = 'Pending', attempts = 0, run_at = ?2, last_result = NULL,
            done_at = NULL, lock_by = NULL, lock_at = NULL
         WHERE id = ?3 AND job_type = ?4 AND ",
        sqlite_dead!()
    ))
    .bind(bytes)
    .bind(i64::try_from(run_at)?)
    .bind(id)
    .bind(queue)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_error_unwraps_apalis_result() {
        assert_eq!(last_error(r#"{"Err":"AbortError: rpc down: timeout"}"#), "rpc down: timeout");
        assert_eq!(last_error(r#"{"Err":"plain"}"#), "plain");
        assert_eq!(last_error("not json"), "not json");
    }

    #[test]
    fn dead_job_reads_the_envelope() {
        let data = br#"{"job":{"invoice_id":7},"attempt":2,"ready_at_ms":1}"#;
        let d = dead_job("01J".into(), Some(data), Some(r#"{"Err":"AbortError: boom"}"#), Some(1_700_000_000));
        assert_eq!(d.args, serde_json::json!({"invoice_id": 7}));
        assert_eq!(d.attempts, 3);
        assert_eq!(d.last_error, "boom");
        assert_eq!(d.failed_at.unwrap().timestamp(), 1_700_000_000);
    }
}
