//! Group commit for the deliverer: attempts running side by side share their database writes.
//! Each claim and each record goes to a [`Batcher`], whose one task takes every request waiting
//! at that moment (up to [`MAX_GROUP`]) and writes them together: the claims in one guarded
//! `UPDATE … RETURNING`, the records in one transaction (one multi-row insert of the attempts,
//! one update for the deliveries delivered alike, one commit). Under load a few hundred attempts
//! cost a handful of statements instead of four round trips each; an attempt alone waits for
//! nobody. The guards are those of one attempt's writes, so a duplicated or replayed job still
//! never sends twice at once, and a record whose lease another deliverer took over is refused.
//! A group whose transaction fails is written again record by record, so a record the database
//! refuses (a value it cannot store, a constraint) fails only its own delivery, never the others
//! of its group (`record`).

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use entity::{DeliveryStatus, DeliveryTrigger, webhook_attempt, webhook_delivery};
use futures::FutureExt;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend, DbErr, EntityTrait, QueryFilter,
    QueryTrait, RuntimeErr,
};
use tokio::sync::{OwnedRwLockWriteGuard, RwLock, mpsc, oneshot};
use uuid::Uuid;

use super::{LEASE_MARGIN, NO_EARLIER_OPEN, Verdict, chrono_delay};

/// Requests written together at the most.
pub(super) const MAX_GROUP: usize = 256;

type Reply<T> = oneshot::Sender<Result<T, String>>;

/// Runs requests in groups through one task: each [`call`](Batcher::call) waits for the answer
/// to its own request, given by one run of the group function over all requests waiting then.
pub(crate) struct Batcher<Req, Resp> {
    tx: mpsc::UnboundedSender<(Req, Reply<Resp>)>,
    runs: Arc<AtomicU64>,
    /// Requests handed in and not answered yet.
    pending: Arc<AtomicUsize>,
    /// Taken for reading by each run; [`hold`](Batcher::hold) takes it for writing.
    gate: Arc<RwLock<()>>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Batcher<Req, Resp> {
    /// Starts the task on the current runtime. `run` answers a group in the order of its
    /// requests; an error (or a panic) is every request's error, and the task goes on.
    pub fn start<F, Fut>(max: usize, mut run: F) -> Batcher<Req, Resp>
    where
        F: FnMut(Vec<Req>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Vec<Resp>, DbErr>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Req, Reply<Resp>)>();
        let runs = Arc::new(AtomicU64::new(0));
        let counted = runs.clone();
        let gate = Arc::new(RwLock::new(()));
        let held = gate.clone();
        tokio::spawn(async move {
            let mut group = Vec::with_capacity(max);
            while rx.recv_many(&mut group, max).await > 0 {
                let _open = held.read().await;
                // Whatever arrived while the gate was held (or since the first request) joins.
                while group.len() < max
                    && let Ok(request) = rx.try_recv()
                {
                    group.push(request);
                }
                counted.fetch_add(1, Ordering::Relaxed);
                let (requests, replies): (Vec<Req>, Vec<Reply<Resp>>) = group.drain(..).unzip();
                let count = requests.len();
                match AssertUnwindSafe(run(requests)).catch_unwind().await {
                    Ok(Ok(answers)) if answers.len() == count => {
                        for (reply, answer) in replies.into_iter().zip(answers) {
                            let _ = reply.send(Ok(answer));
                        }
                    }
                    outcome => {
                        let error = match outcome {
                            Ok(Err(e)) => e.to_string(),
                            Ok(Ok(answers)) => format!("a group of {count} was answered {} times", answers.len()),
                            Err(_) => "the group write panicked".to_owned(),
                        };
                        for reply in replies {
                            let _ = reply.send(Err(error.clone()));
                        }
                    }
                }
            }
        });
        Batcher { tx, runs, pending: Arc::new(AtomicUsize::new(0)), gate }
    }

    /// Groups run so far.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// Requests handed in and not answered yet.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Holds the next run back until the guard is dropped; the requests arriving meanwhile
    /// wait, and then run as one group (up to the maximum). Tests use it to put chosen
    /// requests in one group.
    pub async fn hold(&self) -> OwnedRwLockWriteGuard<()> {
        self.gate.clone().write_owned().await
    }

    /// Hands `req` to the next group and waits for its answer.
    pub async fn call(&self, req: Req) -> Result<Resp, DbErr> {
        let stopped = || DbErr::Custom("the deliverer's group writer has stopped".to_owned());
        let (reply, answer) = oneshot::channel();
        let _pending = Pending::count(&self.pending);
        self.tx.send((req, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?.map_err(DbErr::Custom)
    }
}

/// One request counted as pending while it lives (also when its caller gives up waiting).
struct Pending<'a>(&'a AtomicUsize);

impl<'a> Pending<'a> {
    fn count(pending: &'a AtomicUsize) -> Pending<'a> {
        pending.fetch_add(1, Ordering::SeqCst);
        Pending(pending)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Claims the deliveries of `ids` that are open, due and not leased by a live attempt (and, in
/// order, wait for no earlier open one), in one statement. A row goes to the first request for
/// its id: a job that runs twice at once gets `None` the second time.
pub(super) async fn claim(
    db: &DatabaseConnection,
    timeout: Duration,
    ordered: bool,
    ids: Vec<Uuid>,
) -> Result<Vec<Option<webhook_delivery::Model>>, DbErr> {
    let now = Utc::now();
    let until = now + chrono_delay(timeout + LEASE_MARGIN);
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    let mut claimed: HashMap<Uuid, webhook_delivery::Model> = claim_update(unique, now, until, ordered)
        .exec_with_returning(db)
        .await?
        .into_iter()
        .map(|d| (d.id, d))
        .collect();
    Ok(ids.iter().map(|id| claimed.remove(id)).collect())
}

/// The claim of the deliveries `ids` at `now`, leased until `until`: those open, due and not
/// leased (and, `ordered`, with no earlier open sibling: `NO_EARLIER_OPEN`, which reads the open
/// deliveries' index).
pub fn claim_update(
    ids: Vec<Uuid>,
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    ordered: bool,
) -> sea_orm::UpdateMany<webhook_delivery::Entity> {
    let claim = webhook_delivery::Entity::update_many()
        .col_expr(webhook_delivery::Column::AttemptCount, Expr::col(webhook_delivery::Column::AttemptCount).add(1))
        .col_expr(webhook_delivery::Column::LeaseUntil, Expr::value(until))
        .col_expr(webhook_delivery::Column::UpdatedAt, Expr::value(now))
        .filter(webhook_delivery::Column::Id.is_in(ids))
        .filter(webhook_delivery::Column::Status.is_in([DeliveryStatus::Pending, DeliveryStatus::Retrying]))
        .filter(webhook_delivery::Column::NextAttemptAt.lte(now))
        .filter(webhook_delivery::Column::LeaseUntil.is_null().or(webhook_delivery::Column::LeaseUntil.lt(now)));
    if ordered { claim.filter(Expr::cust(NO_EARLIER_OPEN)) } else { claim }
}

/// The outcome of one claimed attempt, to be written: its attempt row (whose number, answer
/// code and error the delivery's update takes too) and the delivery's transition.
pub(super) struct Record {
    pub attempt: webhook_attempt::Model,
    /// The delivery's status as claimed: the update applies only while it and the attempt count
    /// are still so, i.e. while no other deliverer took it over after the lease lapsed.
    pub from: DeliveryStatus,
    pub retry_step: i32,
    pub next: DeliveryStatus,
    pub verdict: Verdict,
}

impl Record {
    /// Deliveries whose records share this key are updated by one statement.
    fn group_key(&self) -> Option<(DeliveryStatus, Option<i32>)> {
        match self.verdict {
            Verdict::Delivered => Some((self.from, self.attempt.status_code)),
            Verdict::Retry(_) | Verdict::Dead => None,
        }
    }

    /// The delivery's columns after this attempt (the guard is the caller's).
    fn set(&self, now: DateTime<Utc>) -> sea_orm::UpdateMany<webhook_delivery::Entity> {
        let update = webhook_delivery::Entity::update_many()
            .col_expr(webhook_delivery::Column::Status, Expr::value(self.next.as_str()))
            .col_expr(webhook_delivery::Column::LeaseUntil, Expr::value(Option::<DateTime<Utc>>::None))
            .col_expr(webhook_delivery::Column::LastStatusCode, Expr::value(self.attempt.status_code))
            .col_expr(webhook_delivery::Column::LastError, Expr::value(self.attempt.error.clone()))
            .col_expr(webhook_delivery::Column::UpdatedAt, Expr::value(now))
            .filter(webhook_delivery::Column::Status.eq(self.from));
        match self.verdict {
            Verdict::Delivered => update.col_expr(webhook_delivery::Column::DeliveredAt, Expr::value(now)),
            Verdict::Retry(delay) => update
                .col_expr(webhook_delivery::Column::RetryStep, Expr::value(self.retry_step.saturating_add(1)))
                .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(now + chrono_delay(delay)))
                .col_expr(webhook_delivery::Column::EnqueuedAt, Expr::value(now)),
            Verdict::Dead => update.col_expr(webhook_delivery::Column::DeadAt, Expr::value(now)),
        }
    }

    fn guard(&self) -> Condition {
        Condition::all()
            .add(webhook_delivery::Column::Id.eq(self.attempt.delivery_id))
            .add(webhook_delivery::Column::AttemptCount.eq(self.attempt.attempt_no))
    }
}

/// What became of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// The attempt row is stored and the delivery moved on.
    Applied,
    /// The attempt row is stored, but the delivery's guard no longer held: another deliverer
    /// took it over after the lease lapsed, and it decides.
    TakenOver,
    /// The database refused the record, alone too: the delivery is dead with the reason.
    Dead,
}

/// Writes `records` in one transaction (`write`). When that fails, each record is written
/// alone, so one the database refuses fails only itself and never the other deliveries of its
/// group (which would otherwise all be sent again): one it refuses alone too leaves its delivery
/// dead with the reason (`give_up`); any other error is that record's error (the job retries).
pub(super) async fn record(
    db: &DatabaseConnection,
    records: Vec<Record>,
) -> Result<Vec<Result<Written, DbErr>>, DbErr> {
    let group_error = match write(db, &records).await {
        Ok(written) => return Ok(written.into_iter().map(Ok).collect()),
        Err(e) => e,
    };
    if let [alone] = &records[..] {
        return Ok(vec![give_up(db, alone, group_error).await]);
    }
    tracing::warn!(error = %group_error, records = records.len(), "a group of webhook attempt records failed; writing each alone");
    let mut written = Vec::with_capacity(records.len());
    for r in &records {
        written.push(match write(db, std::slice::from_ref(r)).await {
            Ok(w) => Ok(w[0]),
            Err(e) => give_up(db, r, e).await,
        });
    }
    Ok(written)
}

/// Writes `records` in one transaction: every attempt row, then each delivery's new state where
/// its guard still holds. Answers, per record, whether the delivery's update applied.
async fn write(db: &DatabaseConnection, records: &[Record]) -> Result<Vec<Written>, DbErr> {
    let now = Utc::now();
    let mut written = vec![Written::TakenOver; records.len()];
    let applied = |updated: bool| if updated { Written::Applied } else { Written::TakenOver };
    let mut alike: HashMap<(DeliveryStatus, Option<i32>), Vec<usize>> = HashMap::new();
    let txn = domain::db::begin_write(db).await?;
    domain::bulk::insert::<webhook_attempt::Entity, _>(&txn, records.iter().map(|r| r.attempt.clone()).collect(), &[])
        .await?;
    for (i, r) in records.iter().enumerate() {
        match r.group_key() {
            Some(key) => alike.entry(key).or_default().push(i),
            None => written[i] = applied(r.set(now).filter(r.guard()).exec(&txn).await?.rows_affected == 1),
        }
    }
    for members in alike.into_values() {
        let guard = members.iter().fold(Condition::any(), |any, &i| any.add(records[i].guard()));
        let mut statement = records[members[0]].set(now).filter(guard).into_query();
        statement.returning_col(webhook_delivery::Column::Id);
        let rows = txn.query_all(&statement).await?;
        let updated = rows.iter().map(|row| row.try_get::<Uuid>("", "id")).collect::<Result<Vec<_>, _>>()?;
        for i in members {
            written[i] = applied(updated.contains(&records[i].attempt.delivery_id));
        }
    }
    txn.commit().await?;
    Ok(written)
}

/// After `r` failed written alone with `error`: when the database refused it (its data or a
/// constraint, which no retry changes), the delivery is dead with the reason, without the
/// attempt row, so it is neither lost nor sent again and again (an operator's replay sends it
/// again). Any other error (the database unreachable, a conflict) is returned: the job retries
/// and the lapsed lease lets the delivery be attempted again.
async fn give_up(db: &DatabaseConnection, r: &Record, error: DbErr) -> Result<Written, DbErr> {
    if !refused(db.get_database_backend(), &error) {
        return Err(error);
    }
    let answer = r.attempt.status_code.map_or_else(|| "no answer".to_owned(), |c| format!("HTTP {c}"));
    let reason = format!("attempt {} ({answer}) could not be recorded: {error}", r.attempt.attempt_no);
    tracing::error!(delivery = %r.attempt.delivery_id, %reason, "the database refused a webhook attempt's record; the delivery is dead");
    let next = r
        .from
        .on(DeliveryTrigger::FailedFinal)
        .ok_or_else(|| DbErr::Custom(format!("a delivery claimed as {} cannot go dead", r.from.as_str())))?;
    let mut attempt = r.attempt.clone();
    attempt.error = Some(super::storable(&reason, super::ERROR_COLUMN));
    let dead = Record { attempt, from: r.from, retry_step: r.retry_step, next, verdict: Verdict::Dead };
    // Still this claim's: same status and attempt count, lease not yet cleared by a record.
    let updated = dead
        .set(Utc::now())
        .filter(dead.guard())
        .filter(webhook_delivery::Column::LeaseUntil.is_not_null())
        .exec(db)
        .await?;
    Ok(if updated.rows_affected == 1 { Written::Dead } else { Written::TakenOver })
}

/// Whether the database refused a statement for what it holds (a value it cannot store, a
/// constraint), rather than failing to run it: PostgreSQL's SQLSTATE classes 22 (data
/// exception: NUL in text, a value too long) and 23 (integrity constraint violation); SQLite's
/// `SQLITE_TOOBIG`, `SQLITE_CONSTRAINT` and `SQLITE_MISMATCH`.
fn refused(backend: DbBackend, error: &DbErr) -> bool {
    let (DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e))) = error else {
        return false;
    };
    let sea_orm::sqlx::Error::Database(e) = &**e else { return false };
    let Some(code) = e.code() else { return false };
    match backend {
        DbBackend::Postgres => code.starts_with("22") || code.starts_with("23"),
        DbBackend::Sqlite => code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 18..=20)),
        // MySQL (and any backend to come, the enum is non-exhaustive): the project runs on neither.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_waiting_together_are_answered_by_one_run_each_with_its_own_answer() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let batcher = Arc::new(Batcher::start(MAX_GROUP, move |group: Vec<u32>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(group.into_iter().map(|n| n * 10).collect())
            }
        }));
        let calls: Vec<_> = (0..100u32)
            .map(|n| {
                let b = batcher.clone();
                tokio::spawn(async move { (n, b.call(n).await.unwrap()) })
            })
            .collect();
        for call in calls {
            let (n, answer) = call.await.unwrap();
            assert_eq!(answer, n * 10, "each request gets the answer to itself");
        }
        let runs = runs.load(Ordering::SeqCst);
        assert!((1..100).contains(&runs), "100 requests waiting together ran {runs} times");
        assert_eq!(batcher.runs(), runs as u64);
    }

    #[tokio::test]
    async fn requests_arriving_while_held_run_as_one_group() {
        let batcher = Arc::new(Batcher::start(MAX_GROUP, |group: Vec<u32>| async move {
            let size = u32::try_from(group.len()).unwrap();
            Ok(group.into_iter().map(|_| size).collect())
        }));
        let held = batcher.hold().await;
        let calls: Vec<_> = (0..20u32)
            .map(|n| {
                let b = batcher.clone();
                tokio::spawn(async move { b.call(n).await.unwrap() })
            })
            .collect();
        while batcher.pending() < 20 {
            tokio::task::yield_now().await;
        }
        assert_eq!(batcher.runs(), 0, "nothing runs while held");
        drop(held);
        for call in calls {
            assert_eq!(call.await.unwrap(), 20, "every request ran in the one group");
        }
        assert_eq!((batcher.runs(), batcher.pending()), (1, 0));
    }

    #[tokio::test]
    async fn a_failed_or_panicking_group_fails_its_requests_and_the_next_group_runs() {
        let batcher = Batcher::start(MAX_GROUP, |group: Vec<u32>| async move {
            match group[0] {
                0 => Err(DbErr::Custom("database gone".into())),
                1 => panic!("a bug"),
                2 => Ok(vec![]),
                _ => Ok(group),
            }
        });
        assert!(batcher.call(0).await.unwrap_err().to_string().contains("database gone"));
        assert!(batcher.call(1).await.unwrap_err().to_string().contains("panicked"));
        assert!(batcher.call(2).await.unwrap_err().to_string().contains("answered 0 times"));
        assert_eq!(batcher.call(7).await.unwrap(), 7);
    }
}
