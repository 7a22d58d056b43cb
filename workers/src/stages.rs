//! The pipeline's stages as jobs: which queue each stage consumes, its handler, and the
//! periodic tasks a stage's process runs beside it (the scanner's ticker, the tracker's
//! sweeper). Jobs carry ids only; handlers re-read their rows (`api::pipeline` is idempotent).

use std::sync::Arc;
use std::time::Duration;

use api::config::Config;
use api::rates::Rates;
use api::webhooks::{self, secrets::SecretBox};
use entity::Environment;
use sea_orm::DatabaseConnection;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::chain::Chains;
use crate::chain::signer::Signers;
use crate::deliver::{self, Deliverer, Outcome};
use crate::executor::{self, Executor};
use crate::pipeline::{scanner, sweeper, tracker};
use crate::platform::{Job, JobCtx, JobError, Queues, Runtime, StageSettings};
use crate::settlement::{self, Converter, venue::Venues};

/// Scan one gate's new blocks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanGate {
    pub environment: Environment,
    pub gate_id: String,
}

impl Job for ScanGate {
    const QUEUE: &'static str = "deposit-scan";
}

/// Follow one payment's confirmations. `token` is set on the tracker's own rechecks (the
/// payment's job chain token); a job without one (a scan's hand-over, the sweeper) starts a new
/// chain that supersedes any older one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrackPayment {
    pub payment_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Uuid>,
}

impl Job for TrackPayment {
    const QUEUE: &'static str = "track-payment";
}

/// Quote or settle one payment's conversion into its invoice's settlement asset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvertSettlement {
    pub payment_id: Uuid,
}

impl Job for ConvertSettlement {
    const QUEUE: &'static str = "settlement-convert";
}

/// Move one payout along (approved → queued → processing → completed or failed).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutePayout {
    pub payout_id: Uuid,
}

impl Job for ExecutePayout {
    const QUEUE: &'static str = "payout-execute";
}

/// Run the due attempt of one webhook delivery.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliverWebhook {
    pub delivery_id: Uuid,
}

impl Job for DeliverWebhook {
    const QUEUE: &'static str = "webhook-deliver";
}

/// The five worker stages, one binary each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    DepositScanner,
    ConfirmationTracker,
    SettlementConverter,
    PayoutExecutor,
    WebhookDeliverer,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::DepositScanner,
        Stage::ConfirmationTracker,
        Stage::SettlementConverter,
        Stage::PayoutExecutor,
        Stage::WebhookDeliverer,
    ];

    /// The binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Stage::DepositScanner => "deposit-scanner",
            Stage::ConfirmationTracker => "confirmation-tracker",
            Stage::SettlementConverter => "settlement-converter",
            Stage::PayoutExecutor => "payout-executor",
            Stage::WebhookDeliverer => "webhook-deliverer",
        }
    }
}

/// What every handler needs.
#[derive(Clone)]
pub struct StageCtx {
    pub db: DatabaseConnection,
    pub chains: Chains,
    pub config: Arc<Config>,
    pub queues: Queues,
    /// The webhook sender; set in processes that run the webhook deliverer.
    pub webhooks: Option<Arc<Deliverer>>,
    /// The payout executor (its signers); set in processes that run it.
    pub executor: Option<Arc<Executor>>,
    /// The settlement converter (its venues) and the rates its sandbox venue prices from; set
    /// in processes that run it.
    pub converter: Option<(Arc<Converter>, Rates)>,
}

impl StageCtx {
    /// The context of `stages`: builds the webhook sender (which needs the secrets' key) only
    /// where the deliverer runs.
    pub fn new(
        stages: &[Stage],
        db: DatabaseConnection,
        config: Arc<Config>,
        queues: Queues,
    ) -> anyhow::Result<StageCtx> {
        let webhooks = if stages.contains(&Stage::WebhookDeliverer) {
            let sbox = SecretBox::from_config(&config)?;
            Some(Arc::new(Deliverer::new(db.clone(), sbox, config.webhooks.clone())?))
        } else {
            None
        };
        let chains = Chains::new(&db, &config.sandbox).with_evm(&config.evm);
        // Hot-wallet keys are loaded here, in the payout executor's process only.
        let executor = if stages.contains(&Stage::PayoutExecutor) {
            Some(Arc::new(Executor {
                db: db.clone(),
                chains: chains.clone(),
                signers: Signers::sandbox().with_evm(&config.evm)?,
                recheck: Duration::from_millis(config.payouts.recheck_ms),
            }))
        } else {
            None
        };
        let converter = stages.contains(&Stage::SettlementConverter).then(|| {
            let rates = Rates::new(&config.rates);
            let converter = Converter {
                db: db.clone(),
                venues: Venues::from_config(&config, rates.clone()),
                quote_lock: chrono::Duration::seconds(
                    i64::try_from(config.settlement.quote_lock_secs).unwrap_or(i64::MAX),
                ),
            };
            (Arc::new(converter), rates)
        });
        Ok(StageCtx { chains, db, config, queues, webhooks, executor, converter })
    }
}

/// Jobs at once per process when `pipeline.stage_concurrency` does not say: webhook attempts
/// mostly wait on the network, the other stages on the database.
fn default_concurrency(queue: &str) -> usize {
    if queue == DeliverWebhook::QUEUE { 256 } else { 4 }
}

fn settings(cfg: &Config, queue: &str) -> StageSettings {
    let p = &cfg.pipeline;
    StageSettings {
        concurrency: p.stage_concurrency.get(queue).copied().unwrap_or_else(|| default_concurrency(queue)).max(1),
        max_attempts: p.max_attempts.max(1),
        ..StageSettings::default()
    }
}

/// Registers `stage`'s queue and handler.
pub fn register(rt: Runtime, stage: Stage, ctx: &StageCtx) -> Runtime {
    let cfg = ctx.config.clone();
    match stage {
        Stage::DepositScanner => {
            let ctx = ctx.clone();
            rt.stage(settings(&cfg, ScanGate::QUEUE), move |job: ScanGate, _: JobCtx| {
                let ctx = ctx.clone();
                async move { scan(&ctx, job).await }
            })
        }
        Stage::ConfirmationTracker => {
            let ctx = ctx.clone();
            rt.stage(settings(&cfg, TrackPayment::QUEUE), move |job: TrackPayment, _: JobCtx| {
                let ctx = ctx.clone();
                async move { track(&ctx, job).await }
            })
        }
        Stage::SettlementConverter => {
            let ctx = ctx.clone();
            rt.stage(settings(&cfg, ConvertSettlement::QUEUE), move |job: ConvertSettlement, _: JobCtx| {
                let ctx = ctx.clone();
                async move { convert(&ctx, job).await }
            })
        }
        Stage::PayoutExecutor => {
            let ctx = ctx.clone();
            rt.stage(settings(&cfg, ExecutePayout::QUEUE), move |job: ExecutePayout, _: JobCtx| {
                let ctx = ctx.clone();
                async move { execute_payout(&ctx, job).await }
            })
        }
        Stage::WebhookDeliverer => {
            let ctx = ctx.clone();
            rt.stage(settings(&cfg, DeliverWebhook::QUEUE), move |job: DeliverWebhook, _: JobCtx| {
                let ctx = ctx.clone();
                async move { deliver(&ctx, job).await }
            })
        }
    }
}

async fn execute_payout(ctx: &StageCtx, job: ExecutePayout) -> Result<(), JobError> {
    let Some(executor) = &ctx.executor else {
        return Err(JobError::permanent(anyhow::anyhow!("this process has no payout executor")));
    };
    match executor.execute(job.payout_id).await.map_err(JobError::retry)? {
        executor::Next::Done => {}
        executor::Next::After(delay) => {
            // A lost push is found by the poller (`executor::due`).
            ctx.queues.push_after(job, delay).await?;
        }
    }
    Ok(())
}

/// Enqueues the payouts that are due or that nobody looked at lately.
async fn poll_payouts(ctx: &StageCtx) -> anyhow::Result<()> {
    let stale = Duration::from_secs(ctx.config.payouts.stale_after_secs);
    let ids = executor::due(&ctx.db, stale, 1000).await?;
    if !ids.is_empty() {
        ctx.queues.push_many(ids.into_iter().map(|payout_id| ExecutePayout { payout_id })).await?;
    }
    Ok(())
}

async fn convert(ctx: &StageCtx, job: ConvertSettlement) -> Result<(), JobError> {
    let Some((converter, _)) = &ctx.converter else {
        return Err(JobError::permanent(anyhow::anyhow!("this process has no settlement converter")));
    };
    converter.step(job.payment_id).await.map_err(JobError::retry)?;
    Ok(())
}

/// Enqueues the payments the converter has work for (to quote, or confirmed and waiting for
/// their credit), each at most once per `resend` while it stays due: the database is the
/// to-do list, the queue only spreads it over the converters.
async fn poll_conversions(
    ctx: &StageCtx,
    sent: &mut std::collections::HashMap<Uuid, std::time::Instant>,
    resend: Duration,
) -> anyhow::Result<()> {
    let ids = settlement::due(&ctx.db, 1000).await?;
    let now = std::time::Instant::now();
    sent.retain(|_, at| now.duration_since(*at) < resend);
    let fresh: Vec<Uuid> = ids.into_iter().filter(|id| !sent.contains_key(id)).collect();
    if !fresh.is_empty() {
        ctx.queues.push_many(fresh.iter().map(|&payment_id| ConvertSettlement { payment_id })).await?;
        sent.extend(fresh.into_iter().map(|id| (id, now)));
    }
    Ok(())
}

async fn deliver(ctx: &StageCtx, job: DeliverWebhook) -> Result<(), JobError> {
    let Some(deliverer) = &ctx.webhooks else {
        return Err(JobError::permanent(anyhow::anyhow!("this process has no webhook deliverer")));
    };
    match deliverer.attempt(job.delivery_id).await.map_err(JobError::retry)? {
        Outcome::RetryAfter(delay) | Outcome::NotDue(delay) => {
            // Lost pushes are found by the sweeper (`deliver::stale`).
            ctx.queues.push_after(job, delay).await?;
        }
        Outcome::Delivered | Outcome::Dead | Outcome::Skipped => {}
    }
    Ok(())
}

/// Moves new outbox events into deliveries and enqueues them, round after round while full
/// rounds come back.
async fn dispatch(ctx: &StageCtx) -> anyhow::Result<()> {
    let batch = ctx.config.webhooks.dispatch_batch;
    loop {
        let round = webhooks::dispatch::dispatch_batch(&ctx.db, batch).await?;
        if !round.deliveries.is_empty() {
            ctx.queues
                .push_many(round.deliveries.into_iter().map(|delivery_id| DeliverWebhook { delivery_id }))
                .await?;
        }
        if (round.events as u64) < batch {
            return Ok(());
        }
    }
}

/// Re-enqueues deliveries whose job was lost.
async fn sweep_webhooks(ctx: &StageCtx) -> anyhow::Result<()> {
    let stale_after = Duration::from_secs(ctx.config.webhooks.stale_after_secs);
    let ids = deliver::stale(&ctx.db, stale_after, 1000).await?;
    if !ids.is_empty() {
        tracing::info!(count = ids.len(), "re-enqueueing webhook deliveries whose job was lost");
        ctx.queues.push_many(ids.into_iter().map(|delivery_id| DeliverWebhook { delivery_id })).await?;
    }
    Ok(())
}

async fn scan(ctx: &StageCtx, job: ScanGate) -> Result<(), JobError> {
    let Some(chain) = ctx.chains.get(job.environment, &job.gate_id) else {
        return Err(JobError::permanent(anyhow::anyhow!("no chain for {} {}", job.environment, job.gate_id)));
    };
    let batch = ctx.config.pipeline.scan_batch_blocks;
    // Catch up in bounded batches; each batch commits its payments with the cursor.
    for _ in 0..20 {
        let Some(report) = scanner::scan_gate(&ctx.db, chain.as_ref(), job.environment, batch).await? else {
            break;
        };
        // The payments whose confirmations these blocks completed (new ones included when one
        // block suffices) go to the tracker now; the others wait for the block that completes
        // them. A lost push only delays: the sweeper finds payments nobody checked lately.
        let due = scanner::due_payments(&ctx.db, job.environment, chain.gate(), report.from, report.to).await?;
        for payment_id in due {
            ctx.queues.push(TrackPayment { payment_id, token: None }).await?;
        }
    }
    Ok(())
}

async fn track(ctx: &StageCtx, job: TrackPayment) -> Result<(), JobError> {
    let pipeline = &ctx.config.pipeline;
    match tracker::track_payment_chain(&ctx.db, &ctx.chains, pipeline, job.payment_id, job.token).await? {
        tracker::Next::Done | tracker::Next::Superseded => Ok(()),
        tracker::Next::Recheck { after, token } => {
            // A lost push is found by the sweeper once `next_check_at` is overdue.
            ctx.queues.push_after(TrackPayment { payment_id: job.payment_id, token: Some(token) }, after).await?;
            Ok(())
        }
    }
}

/// Periodic tasks of a stage's process, until `stop`.
pub fn spawn_background(stage: Stage, ctx: &StageCtx, stop: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let ctx = ctx.clone();
    match stage {
        Stage::DepositScanner => Some(tokio::spawn(async move {
            let every = Duration::from_millis(ctx.config.pipeline.scan_interval_ms.max(10));
            while !stop.is_cancelled() {
                for (environment, chain) in ctx.chains.all() {
                    let job = ScanGate { environment, gate_id: chain.gate().id.into() };
                    if let Err(e) = ctx.queues.push(job).await {
                        tracing::warn!(error = %e, "could not enqueue a scan");
                    }
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })),
        Stage::ConfirmationTracker => Some(tokio::spawn(async move {
            let every = Duration::from_millis(ctx.config.pipeline.sweep_interval_ms.max(10));
            let stale_after = stale_after(&ctx.config);
            while !stop.is_cancelled() {
                match sweeper::sweep(&ctx.db, stale_after).await {
                    Ok(report) => {
                        for payment_id in report.stale_payments {
                            if let Err(e) = ctx.queues.push(TrackPayment { payment_id, token: None }).await {
                                tracing::warn!(error = %e, "could not re-enqueue a payment");
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "sweep failed"),
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })),
        Stage::WebhookDeliverer => Some(tokio::spawn(async move {
            let every = Duration::from_millis(ctx.config.webhooks.dispatch_interval_ms);
            let sweep_every = Duration::from_millis(ctx.config.webhooks.sweep_interval_ms);
            let mut last_sweep = std::time::Instant::now();
            while !stop.is_cancelled() {
                if let Err(e) = dispatch(&ctx).await {
                    tracing::warn!(error = %e, "webhook dispatch failed");
                }
                if last_sweep.elapsed() >= sweep_every {
                    last_sweep = std::time::Instant::now();
                    if let Err(e) = sweep_webhooks(&ctx).await {
                        tracing::warn!(error = %e, "webhook sweep failed");
                    }
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })),
        Stage::PayoutExecutor => Some(tokio::spawn(async move {
            let every = Duration::from_millis(ctx.config.payouts.poll_interval_ms);
            while !stop.is_cancelled() {
                if let Err(e) = poll_payouts(&ctx).await {
                    tracing::warn!(error = %e, "payout poll failed");
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })),
        Stage::SettlementConverter => Some(tokio::spawn(async move {
            if let Some((_, rates)) = &ctx.converter {
                rates.start().await;
            }
            let every = Duration::from_millis(ctx.config.settlement.poll_interval_ms);
            // A job not done within this is pushed again (lost with a flushed queue, or its
            // converter died).
            let resend = every.saturating_mul(20).max(Duration::from_secs(5));
            let mut sent = std::collections::HashMap::new();
            while !stop.is_cancelled() {
                if let Err(e) = poll_conversions(&ctx, &mut sent, resend).await {
                    tracing::warn!(error = %e, "conversion poll failed");
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })),
    }
}

/// How far past its scheduled check (`next_check_at`; or, unscheduled, past its last check) a
/// payment must be before the sweeper considers its job chain lost and re-enqueues it: a margin
/// for queue latency and busy trackers, so live chains are not duplicated.
pub fn stale_after(cfg: &Config) -> Duration {
    Duration::from_millis(cfg.pipeline.track_interval_ms.saturating_mul(10).max(5_000))
}
