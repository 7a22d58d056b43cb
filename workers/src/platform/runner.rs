//! Running stages: one apalis worker per registered queue, supervised, with durable retries.

use std::any::Any;
use std::collections::HashSet;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use apalis::prelude::BackendExt;
use apalis::prelude::{AbortError, BoxDynError, Task, WorkerBuilder, WorkerBuilderExt, WorkerContext, WorkerError};
use apalis_redis::RedisStorage;
use apalis_sqlite::SqliteStorage;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backend::{Conn, Envelope, Queues, millis, now_ms, redis_config};
use super::config::{RuntimeSettings, StageSettings};
use super::draining::Draining;
use super::{Job, metrics, valid_queue_name};

/// How a handler failed.
///
/// `?` on any error gives [`JobError::Retry`]: failures are taken as transient unless the
/// handler says otherwise.
pub enum JobError {
    /// Try again after a backoff; the job is dead once `max_attempts` attempts have failed.
    Retry(anyhow::Error),
    /// Retrying cannot help (invalid input, a state that will not change): dead at once.
    Permanent(anyhow::Error),
}

impl JobError {
    pub fn retry(e: impl Into<anyhow::Error>) -> JobError {
        JobError::Retry(e.into())
    }

    pub fn permanent(e: impl Into<anyhow::Error>) -> JobError {
        JobError::Permanent(e.into())
    }
}

impl<E: Into<anyhow::Error>> From<E> for JobError {
    fn from(e: E) -> Self {
        JobError::Retry(e.into())
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retry(e) => write!(f, "Retry({e:#})"),
            JobError::Permanent(e) => write!(f, "Permanent({e:#})"),
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::Retry(e) | JobError::Permanent(e) => write!(f, "{e:#}"),
        }
    }
}

/// What a handler knows about the job it runs.
#[derive(Debug, Clone)]
pub struct JobCtx {
    job_id: String,
    queue: Arc<str>,
    attempt: u32,
    max_attempts: u32,
    worker: Arc<str>,
    queues: Queues,
}

impl JobCtx {
    /// This attempt's job id (a retry is stored as a new job, so it gets a new id).
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The full queue name, `<prefix>:<stage>`.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// 1 for the first attempt.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether a [`JobError::Retry`] from this attempt makes the job dead.
    pub fn is_last_attempt(&self) -> bool {
        self.attempt >= self.max_attempts
    }

    /// The worker running the job (`<stage>-<host>-<pid>-<random>`).
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// For enqueueing follow-up jobs.
    pub fn queues(&self) -> &Queues {
        &self.queues
    }
}

type Handler = Arc<dyn Fn(Value, JobCtx) -> BoxFuture<'static, Result<(), JobError>> + Send + Sync>;

struct Stage {
    name: &'static str,
    queue: Arc<str>,
    settings: StageSettings,
    handler: Handler,
}

/// Runs registered stages until shutdown. The embedded default registers every stage in one
/// process; a stage binary registers one.
///
/// ```no_run
/// # use workers::platform::*;
/// # #[derive(Clone, serde::Serialize, serde::Deserialize)] struct ScanDeposits { invoice_id: u64 }
/// # impl Job for ScanDeposits { const QUEUE: &'static str = "deposit-scan"; }
/// # async fn f(queues: Queues) -> anyhow::Result<()> {
/// Runtime::new(queues)
///     .stage(StageSettings::default(), |job: ScanDeposits, ctx: JobCtx| async move {
///         tracing::info!(invoice = job.invoice_id, attempt = ctx.attempt(), "scanning");
///         Ok(())
///     })
///     .run(std::future::pending())
///     .await
/// # }
/// ```
pub struct Runtime {
    queues: Queues,
    settings: RuntimeSettings,
    stages: Vec<Stage>,
}

impl Runtime {
    pub fn new(queues: Queues) -> Runtime {
        Runtime { queues, settings: RuntimeSettings::default(), stages: Vec::new() }
    }

    pub fn with_settings(mut self, settings: RuntimeSettings) -> Runtime {
        self.settings = settings;
        self
    }

    /// Registers the handler of `J`'s queue.
    ///
    /// # Panics
    /// When `J::QUEUE` is invalid or already registered, or `concurrency` / `max_attempts` is 0.
    pub fn stage<J, F, Fut>(mut self, settings: StageSettings, handler: F) -> Runtime
    where
        J: Job,
        F: Fn(J, JobCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), JobError>> + Send + 'static,
    {
        assert!(valid_queue_name(J::QUEUE), "invalid queue name {:?}", J::QUEUE);
        assert!(self.stages.iter().all(|s| s.name != J::QUEUE), "queue {:?} registered twice", J::QUEUE);
        assert!(settings.concurrency > 0 && settings.max_attempts > 0, "concurrency and max_attempts must be >= 1");
        let handler: Handler = Arc::new(move |job: Value, ctx: JobCtx| match serde_json::from_value::<J>(job) {
            Ok(job) => handler(job, ctx).boxed(),
            Err(e) => {
                let err = anyhow::anyhow!("job does not decode as {}: {e}", std::any::type_name::<J>());
                async move { Err(JobError::Permanent(err)) }.boxed()
            }
        });
        let queue = self.queues.queue_name::<J>().into();
        self.stages.push(Stage { name: J::QUEUE, queue, settings, handler });
        self
    }

    /// The stage names registered so far.
    pub fn stages(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.stages.iter().map(|s| s.name)
    }

    /// Runs until `stop` completes or the process gets SIGTERM or SIGINT, then stops taking
    /// jobs and lets in-flight ones finish for up to `shutdown_timeout`.
    pub async fn run(self, stop: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
        let Runtime { queues, settings, stages } = self;
        anyhow::ensure!(!stages.is_empty(), "no stage registered");
        metrics::install_recorder();
        let token = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let queue_names: Vec<String> = stages.iter().map(|s| s.queue.to_string()).collect();
        for stage in stages {
            queues.register_queue(&stage.queue).await?;
            tasks.spawn(supervise(Arc::new(stage), queues.clone(), settings.clone(), token.clone()));
        }
        tracing::info!(queues = ?queue_names, backend = queues.backend_name(), "job runtime started");
        tasks.spawn(janitor(queues, queue_names, settings.janitor_interval, token.clone()));

        tokio::select! {
            () = stop => tracing::info!("job runtime stopping"),
            () = shutdown_signal() => tracing::info!("job runtime stopping on signal"),
        }
        token.cancel();
        let drained = tokio::time::timeout(settings.shutdown_timeout, async {
            while let Some(res) = tasks.join_next().await {
                if let Err(e) = res {
                    tracing::error!(error = %e, "job runtime task failed");
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                timeout = ?settings.shutdown_timeout,
                "shutdown timeout: abandoning in-flight jobs (they run again once the heartbeat lapses)"
            );
            tasks.abort_all();
        }
        Ok(())
    }
}

/// Resolves on SIGTERM or SIGINT; the handlers are installed by the call (domain::shutdown).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    domain::shutdown::shutdown_signal()
}

/// `<stage>-<hostname>-<pid>-<random>`: a restarted worker never reuses a name (apalis refuses
/// a name seen alive within its heartbeat threshold).
fn worker_name(stage: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!("{stage}-{host}-{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// Keeps one worker of `stage` running until `token` is cancelled; a worker that dies (backend
/// unreachable) is replaced under a new name after a growing delay.
async fn supervise(stage: Arc<Stage>, queues: Queues, settings: RuntimeSettings, token: CancellationToken) {
    let mut failures = 0u32;
    loop {
        let name = worker_name(stage.name);
        let started = Instant::now();
        tracing::info!(worker = %name, queue = %stage.queue, "worker starting");
        let result = run_worker(&stage, &name, &queues, &settings, &token).await;
        if token.is_cancelled() {
            if let Err(e) = result {
                tracing::warn!(worker = %name, error = %e, "worker stopped with an error");
            }
            tracing::info!(worker = %name, "worker stopped");
            return;
        }
        match result {
            Ok(()) => tracing::warn!(worker = %name, "worker ended on its own; restarting"),
            Err(e) => tracing::error!(worker = %name, error = %e, "worker failed; restarting"),
        }
        failures = if started.elapsed() > Duration::from_secs(60) { 1 } else { failures.saturating_add(1) };
        let delay = Duration::from_millis(500).saturating_mul(1 << failures.min(6)).min(Duration::from_secs(30));
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

async fn run_worker(
    stage: &Arc<Stage>,
    name: &str,
    queues: &Queues,
    settings: &RuntimeSettings,
    token: &CancellationToken,
) -> anyhow::Result<()> {
    let service = StageService { stage: stage.clone(), queues: queues.clone(), worker: name.into() };
    let concurrency = stage.settings.concurrency;
    let token = token.clone();
    let stop = move |worker| stop_when_drained(worker, token.clone());
    match &queues.conn {
        Conn::Redis(conn) => {
            let config = redis_config(&stage.queue)
                .batch_size(concurrency)
                .heartbeat_interval(settings.heartbeat_interval)
                .missed_heartbeats(3);
            let storage =
                RedisStorage::<Value>::new(conn.clone()).with_config(config).poll_with_interval(settings.poll_interval);
            let worker = WorkerBuilder::new(name).backend(storage).concurrency(concurrency).build(service);
            worker.run_with_ctx(stop).await?;
        }
        Conn::Sqlite(pool) => {
            let config = apalis_sqlite::Config::default()
                .queue(&*stage.queue)
                .batch_size(concurrency)
                .heartbeat_interval(settings.heartbeat_interval)
                .missed_heartbeats(3);
            let storage = Draining::new(
                SqliteStorage::<Value>::new(pool).with_config(config).poll_with_interval(settings.poll_interval),
            );
            let worker = WorkerBuilder::new(name).backend(storage).concurrency(concurrency).build(service);
            worker.run_with_ctx(stop).await?;
        }
    }
    Ok(())
}

/// Stops `worker` once `token` is cancelled, in two steps: pause (no job is fetched any more, and
/// apalis still drives the backend, so the acknowledgements, claims and, on SQLite, the fetch it
/// has begun commit: see [`Draining`]), then stop once the jobs in flight are done. Stopping at
/// once stops driving the backend while jobs still run: on the SQLite queue a transaction left
/// half-way keeps the write lock, and a running job that enqueues a follow-up waits on it for
/// the whole busy timeout (30 s), then fails.
async fn stop_when_drained(worker: WorkerContext, token: CancellationToken) -> Result<(), WorkerError> {
    token.cancelled().await;
    if worker.pause().is_ok() {
        while worker.has_pending_tasks() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    worker.stop()
}

/// The apalis service of a stage: decodes the envelope, runs the handler, and turns its outcome
/// into done, a re-enqueued retry, or dead (apalis `Killed`, via [`AbortError`]).
#[derive(Clone)]
struct StageService {
    stage: Arc<Stage>,
    queues: Queues,
    worker: Arc<str>,
}

impl tower::Service<Task<Value>> for StageService {
    type Response = ();
    type Error = BoxDynError;
    type Future = BoxFuture<'static, Result<(), BoxDynError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, task: Task<Value>) -> Self::Future {
        let job_id = task.ctx().task_id().map(ToString::to_string).unwrap_or_default();
        let this = self.clone();
        async move { this.execute(job_id, task.args).await }.boxed()
    }
}

impl StageService {
    async fn execute(self, job_id: String, args: Value) -> Result<(), BoxDynError> {
        let stage = &self.stage;
        let queue = &*stage.queue;
        let envelope: Envelope<Value> = match serde_json::from_value(args) {
            Ok(e) => e,
            Err(e) => {
                metrics::job_failed(queue);
                tracing::error!(queue, job_id, error = %e, "job is not a platform envelope; dead");
                return Err(AbortError::new(format!("not a job envelope: {e}")).into());
            }
        };
        // The backend schedules in whole seconds: wait out the rest of the delay.
        let early = Duration::from_millis(envelope.ready_at_ms.saturating_sub(now_ms()));
        tokio::time::sleep(early.min(Duration::from_secs(1))).await;
        metrics::job_started(queue, Duration::from_millis(now_ms().saturating_sub(envelope.ready_at_ms)));

        let attempt = envelope.attempt.saturating_add(1);
        let max_attempts = stage.settings.max_attempts;
        let ctx = JobCtx {
            job_id: job_id.clone(),
            queue: stage.queue.clone(),
            attempt,
            max_attempts,
            worker: self.worker.clone(),
            queues: self.queues.clone(),
        };
        let outcome = AssertUnwindSafe((stage.handler)(envelope.job.clone(), ctx))
            .catch_unwind()
            .await
            .unwrap_or_else(|panic| Err(JobError::Retry(anyhow::anyhow!("handler panicked: {}", panic_text(&*panic)))));

        let error = match outcome {
            Ok(()) => {
                metrics::job_processed(queue);
                tracing::debug!(queue, job_id, attempt, "job done");
                return Ok(());
            }
            Err(JobError::Permanent(e)) => {
                metrics::job_failed(queue);
                tracing::warn!(queue, job_id, attempt, error = %format!("{e:#}"), "job failed permanently; dead");
                return Err(AbortError::new(format!("{e:#}")).into());
            }
            Err(JobError::Retry(e)) if attempt >= max_attempts => {
                metrics::job_failed(queue);
                tracing::warn!(queue, job_id, attempt, error = %format!("{e:#}"), "job failed its last attempt; dead");
                return Err(AbortError::new(format!("{e:#}")).into());
            }
            Err(JobError::Retry(e)) => e,
        };

        let delay = stage.settings.backoff(attempt);
        let retry = Envelope { job: envelope.job, attempt, ready_at_ms: now_ms().saturating_add(millis(delay)) };
        match self.queues.push_envelope(queue, &retry).await {
            Ok(next_id) => {
                metrics::job_retried(queue);
                tracing::info!(
                    queue, job_id, attempt, next_job_id = %next_id, ?delay, error = %format!("{error:#}"),
                    "job failed; retry scheduled"
                );
                Ok(())
            }
            Err(push_error) => {
                // Leave the job failed: the backend retries it on its own schedule.
                tracing::error!(
                    queue, job_id, attempt, error = %format!("{error:#}"), push_error = %format!("{push_error:#}"),
                    "job failed and its retry could not be scheduled"
                );
                Err(format!("{error:#} (retry not scheduled: {push_error:#})").into())
            }
        }
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic")
}

/// Purges completed jobs and refreshes the depth gauges, every `interval`.
async fn janitor(queues: Queues, names: Vec<String>, interval: Duration, token: CancellationToken) {
    let names: HashSet<String> = names.into_iter().collect();
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            _ = tick.tick() => {}
        }
        for queue in &names {
            match queues.purge_done(queue).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(queue, purged = n, "completed jobs purged"),
                Err(e) => tracing::warn!(queue, error = %format!("{e:#}"), "purging completed jobs failed"),
            }
        }
        match queues.depths().await {
            Ok(depths) => depths.iter().filter(|d| names.contains(&d.queue)).for_each(metrics::queue_depth),
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "reading queue depths failed"),
        }
    }
}
