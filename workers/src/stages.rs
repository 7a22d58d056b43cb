//! The wiring of the five stages: which stage consumes which queue, with which settings, and
//! the context its handlers get. Each stage's job, handler and periodic tasks (the scanner's
//! ticker, the tracker's sweeper, the pollers, the webhook dispatcher) are in the stage's own
//! folder (`<stage>/job.rs`). Jobs carry ids only; handlers re-read their rows.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use domain::config::Config;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;

pub use crate::converter::job::ConvertSettlement;
pub use crate::deliverer::job::DeliverWebhook;
pub use crate::deliverer::mail_job::SendInvoiceEmail;
pub use crate::executor::job::ExecutePayout;
pub use crate::scanner::job::ScanGate;
pub use crate::tracker::job::{TrackDue, TrackPayment, stale_after};

use crate::chain::Chains;
use crate::platform::{Job, JobCtx, JobError, Queues, Runtime, StageSettings};

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

/// What every stage's context holds: the database, the configuration, the queues and the chain
/// adapters (watch-only; signers are the payout executor's own). The scanner and the tracker
/// need nothing more; the other stages add their own services in their own contexts
/// ([`ConverterCtx`](crate::converter::job::ConverterCtx),
/// [`ExecutorCtx`](crate::executor::job::ExecutorCtx),
/// [`DelivererCtx`](crate::deliverer::job::DelivererCtx)), built only where they run.
#[derive(Clone)]
pub struct Shared {
    pub db: DatabaseConnection,
    pub config: Arc<Config>,
    pub queues: Queues,
    pub chains: Chains,
}

impl Shared {
    pub fn new(db: DatabaseConnection, config: Arc<Config>, queues: Queues) -> Shared {
        let chains = Chains::new(&db, &config.sandbox).with_live(&config);
        Shared { db, config, queues, chains }
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

/// Builds `stage`'s context, registers its queues' handlers on `rt` and spawns its periodic
/// tasks (until `stop`). Keys and services a stage needs are loaded here, in that stage's
/// process only: hot-wallet keys where the payout executor runs, the webhook secrets' key where
/// the deliverer runs.
pub fn start(
    rt: Runtime,
    stage: Stage,
    shared: &Shared,
    stop: CancellationToken,
) -> anyhow::Result<(Runtime, tokio::task::JoinHandle<()>)> {
    use crate::{converter, deliverer, executor, scanner, tracker};
    Ok(match stage {
        Stage::DepositScanner => {
            let rt = on(rt, shared, |ctx: Shared, job| async move { scanner::job::handle(&ctx, job).await });
            (rt, tokio::spawn(scanner::job::background(shared.clone(), stop)))
        }
        Stage::ConfirmationTracker => {
            let rt = on(rt, shared, |ctx: Shared, job| async move { tracker::job::handle(&ctx, job).await });
            let rt = on(rt, shared, |ctx: Shared, job| async move { tracker::job::handle_due(&ctx, job).await });
            (rt, tokio::spawn(tracker::job::background(shared.clone(), stop)))
        }
        Stage::SettlementConverter => {
            let ctx = converter::job::ConverterCtx::new(shared);
            let rt = on(rt, &ctx, |ctx, job| async move { converter::job::handle(&ctx, job).await });
            (rt, tokio::spawn(converter::job::background(ctx, stop)))
        }
        Stage::PayoutExecutor => {
            let ctx = executor::job::ExecutorCtx::new(shared)?;
            let rt = on(rt, &ctx, |ctx, job| async move { executor::job::handle(&ctx, job).await });
            (rt, tokio::spawn(executor::job::background(ctx, stop)))
        }
        Stage::WebhookDeliverer => {
            let ctx = deliverer::job::DelivererCtx::new(shared)?;
            let rt = on(rt, &ctx, |ctx, job| async move { deliverer::job::handle(&ctx, job).await });
            let rt = on(rt, &ctx, |ctx, job| async move { deliverer::mail_job::handle(&ctx, job).await });
            (rt, tokio::spawn(deliverer::job::background(ctx, stop)))
        }
    })
}

/// A stage context: what its handlers get, cloned per job.
pub(crate) trait StageContext: Clone + Send + Sync + 'static {
    fn config(&self) -> &Config;
}

impl StageContext for Shared {
    fn config(&self) -> &Config {
        &self.config
    }
}

/// Consumes `J`'s queue with `handle`, under the queue's configured settings.
fn on<C, J, F, Fut>(rt: Runtime, ctx: &C, handle: F) -> Runtime
where
    C: StageContext,
    J: Job,
    F: Fn(C, J) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    let settings = settings(ctx.config(), J::QUEUE);
    let ctx = ctx.clone();
    rt.stage(settings, move |job: J, _: JobCtx| handle.clone()(ctx.clone(), job))
}

/// Runs `tick`, then waits `every`, until `stop` (which also cuts the wait short).
pub(crate) async fn repeat<F, Fut>(stop: &CancellationToken, every: Duration, mut tick: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    while !stop.is_cancelled() {
        tick().await;
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
}
