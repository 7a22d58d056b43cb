//! The pipeline's stages as jobs, one module each beside the logic it runs: the job its queue
//! carries, the handler, and the periodic tasks its process runs (the scanner's ticker, the
//! tracker's sweeper, the pollers, the webhook dispatcher). Jobs carry ids only; handlers re-read
//! their rows (`crate::pipeline` and the other stages are idempotent). This module wires them:
//! which stage consumes which queue, and the context every handler gets.

pub mod converter;
pub mod deliverer;
pub mod executor;
pub mod mailer;
pub mod scanner;
pub mod tracker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use domain::config::Config;
use domain::rates::Rates;
use domain::webhooks::secrets::SecretBox;
use sea_orm::DatabaseConnection;
use tokio_util::sync::CancellationToken;

pub use converter::ConvertSettlement;
pub use deliverer::DeliverWebhook;
pub use executor::ExecutePayout;
pub use mailer::SendInvoiceEmail;
pub use scanner::ScanGate;
pub use tracker::{TrackDue, TrackPayment, stale_after};

use crate::chain::Chains;
use crate::chain::signer::Signers;
use crate::deliver::Deliverer;
use crate::executor::Executor;
use crate::platform::{Job, JobCtx, JobError, Queues, Runtime, StageSettings};
use crate::settlement::{Converter, venue::Venues};

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
    /// Payer e-mail over SMTP; set where the webhook deliverer runs and `[email]` is configured.
    pub mailer: Option<Arc<crate::mail::Mailer>>,
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
        let mailer = if stages.contains(&Stage::WebhookDeliverer) {
            let mailer = crate::mail::Mailer::from_config(&config)?;
            match &mailer {
                Some(_) => {
                    tracing::info!(host = %config.email.host, "payer e-mail on: payment requests go to payer_email")
                }
                None => tracing::info!("payer e-mail off: set [email] host to send payment requests to payer_email"),
            }
            mailer.map(Arc::new)
        } else {
            None
        };
        let chains = Chains::new(&db, &config.sandbox).with_live(&config);
        // Hot-wallet keys are loaded here, in the payout executor's process only.
        let executor = if stages.contains(&Stage::PayoutExecutor) {
            Some(Arc::new(Executor {
                db: db.clone(),
                chains: chains.clone(),
                signers: Signers::sandbox()
                    .with_evm(&config.evm)?
                    .with_bitcoin(&config.bitcoin, &config.addresses.live)?
                    .with_xrp(&config.xrp)?
                    .with_tron(&config.tron)?
                    .with_solana(&config.solana)?,
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
        Ok(StageCtx { chains, db, config, queues, webhooks, executor, converter, mailer })
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
    match stage {
        Stage::DepositScanner => on(rt, ctx, |ctx, job| async move { scanner::handle(&ctx, job).await }),
        Stage::ConfirmationTracker => {
            let rt = on(rt, ctx, |ctx, job| async move { tracker::handle(&ctx, job).await });
            on(rt, ctx, |ctx, job| async move { tracker::handle_due(&ctx, job).await })
        }
        Stage::SettlementConverter => on(rt, ctx, |ctx, job| async move { converter::handle(&ctx, job).await }),
        Stage::PayoutExecutor => on(rt, ctx, |ctx, job| async move { executor::handle(&ctx, job).await }),
        Stage::WebhookDeliverer => {
            let rt = on(rt, ctx, |ctx, job| async move { deliverer::handle(&ctx, job).await });
            on(rt, ctx, |ctx, job| async move { mailer::handle(&ctx, job).await })
        }
    }
}

/// Consumes `J`'s queue with `handle`, under the queue's configured settings.
fn on<J, F, Fut>(rt: Runtime, ctx: &StageCtx, handle: F) -> Runtime
where
    J: Job,
    F: Fn(StageCtx, J) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    let ctx = ctx.clone();
    rt.stage(settings(&ctx.config, J::QUEUE), move |job: J, _: JobCtx| handle.clone()(ctx.clone(), job))
}

/// Periodic tasks of a stage's process, until `stop`.
pub fn spawn_background(stage: Stage, ctx: &StageCtx, stop: CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    let ctx = ctx.clone();
    Some(match stage {
        Stage::DepositScanner => tokio::spawn(scanner::background(ctx, stop)),
        Stage::ConfirmationTracker => tokio::spawn(tracker::background(ctx, stop)),
        Stage::SettlementConverter => tokio::spawn(converter::background(ctx, stop)),
        Stage::PayoutExecutor => tokio::spawn(executor::background(ctx, stop)),
        Stage::WebhookDeliverer => tokio::spawn(deliverer::background(ctx, stop)),
    })
}

/// Runs `tick`, then waits `every`, until `stop` (which also cuts the wait short).
async fn repeat<F, Fut>(stop: &CancellationToken, every: Duration, mut tick: F)
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
