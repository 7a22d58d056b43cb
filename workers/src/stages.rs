//! The wiring of the five stages: which stage consumes which queue, with which settings, and
//! the context its handlers get. Each stage's job, handler and periodic tasks (the scanner's
//! ticker, the tracker's sweeper, the pollers, the webhook dispatcher) are in the stage's own
//! folder (`<stage>/job.rs`). Jobs carry ids only; handlers re-read their rows.

use std::future::Future;

use domain::config::Config;
use tokio_util::sync::CancellationToken;

pub use crate::converter::job::ConvertSettlement;
pub use crate::deliverer::job::DeliverWebhook;
pub use crate::deliverer::job::SendInvoiceEmail;
pub use crate::executor::job::ExecutePayout;
pub use crate::scanner::job::ScanGate;
pub use crate::tracker::job::{TrackDue, TrackPayment, stale_after};

use crate::context::Shared;
use crate::platform::{Job, JobCtx, JobError, Runtime, StageSettings};

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

/// Jobs at once per process when `pipeline.stage_concurrency` does not say: webhook attempts
/// mostly wait on the network, the other stages on the database. A scanned block hands its
/// confirmations to the tracker as many batches at once (`TrackDue`, 200 payments each), each
/// waiting on round trips and, for its last statements, on the merchant's balance row: eight at
/// once credit a block's payments sooner than four (docs/benchmarks.md, "Plans for a table that
/// grows; eight batches at once").
fn default_concurrency(queue: &str) -> usize {
    match queue {
        DeliverWebhook::QUEUE => 256,
        TrackDue::QUEUE => 8,
        _ => 4,
    }
}

/// Jobs of `queue` at once per process: `pipeline.stage_concurrency`, else the default.
pub fn concurrency(cfg: &Config, queue: &str) -> usize {
    cfg.pipeline.stage_concurrency.get(queue).copied().unwrap_or_else(|| default_concurrency(queue)).max(1)
}

fn settings(cfg: &Config, queue: &str) -> StageSettings {
    let p = &cfg.pipeline;
    StageSettings {
        concurrency: concurrency(cfg, queue),
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
            let rt =
                on(rt, &shared.config, shared, |ctx: Shared, job| async move { scanner::job::handle(&ctx, job).await });
            (rt, tokio::spawn(scanner::job::background(shared.clone(), stop)))
        }
        Stage::ConfirmationTracker => {
            let rt =
                on(rt, &shared.config, shared, |ctx: Shared, job| async move { tracker::job::handle(&ctx, job).await });
            let rt =
                on(
                    rt,
                    &shared.config,
                    shared,
                    |ctx: Shared, job| async move { tracker::job::handle_due(&ctx, job).await },
                );
            (rt, tokio::spawn(tracker::job::background(shared.clone(), stop)))
        }
        Stage::SettlementConverter => {
            let ctx = converter::job::ConverterCtx::new(shared);
            let rt = on(rt, &shared.config, &ctx, |ctx, job| async move { converter::job::handle(&ctx, job).await });
            (rt, tokio::spawn(converter::job::background(ctx, stop)))
        }
        Stage::PayoutExecutor => {
            let ctx = executor::job::ExecutorCtx::new(shared)?;
            let rt = on(rt, &shared.config, &ctx, |ctx, job| async move { executor::job::handle(&ctx, job).await });
            (rt, tokio::spawn(executor::job::background(ctx, stop)))
        }
        Stage::WebhookDeliverer => {
            let ctx = deliverer::job::DelivererCtx::new(shared)?;
            let rt = on(rt, &shared.config, &ctx, |ctx, job| async move { deliverer::job::handle(&ctx, job).await });
            let rt =
                on(rt, &shared.config, &ctx, |ctx, job| async move { deliverer::job::handle_email(&ctx, job).await });
            (rt, tokio::spawn(deliverer::job::background(ctx, stop)))
        }
    })
}

/// Consumes `J`'s queue with `handle`, under the queue's configured settings.
fn on<C, J, F, Fut>(rt: Runtime, config: &Config, ctx: &C, handle: F) -> Runtime
where
    C: Clone + Send + Sync + 'static,
    J: Job,
    F: Fn(C, J) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), JobError>> + Send + 'static,
{
    let settings = settings(config, J::QUEUE);
    let ctx = ctx.clone();
    rt.stage(settings, move |job: J, _: JobCtx| handle.clone()(ctx.clone(), job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_is_the_configured_one_else_the_stage_default() {
        let mut cfg = Config::default();
        assert_eq!(concurrency(&cfg, TrackDue::QUEUE), 8);
        assert_eq!(concurrency(&cfg, DeliverWebhook::QUEUE), 256);
        assert_eq!(concurrency(&cfg, TrackPayment::QUEUE), 4);
        cfg.pipeline.stage_concurrency.insert(TrackDue::QUEUE.into(), 2);
        cfg.pipeline.stage_concurrency.insert(TrackPayment::QUEUE.into(), 0);
        assert_eq!(concurrency(&cfg, TrackDue::QUEUE), 2);
        assert_eq!(concurrency(&cfg, TrackPayment::QUEUE), 1, "at least one job at a time");
    }
}
