//! The payout executor as a job: `ExecutePayout` moves one payout along; a poller beside it
//! enqueues the payouts that are due or that nobody looked at lately.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::Executor;
use crate::chain::signer::Signers;
use crate::context::{Shared, repeat};
use crate::executor;
use crate::platform::{Job, JobError};

/// Move one payout along (approved → queued → processing → completed or failed).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutePayout {
    pub payout_id: Uuid,
}

impl Job for ExecutePayout {
    const QUEUE: &'static str = "payout-execute";
}

/// The payout executor's context: the shared one, the executor with its signers, and the
/// sweeper (with the deposit account's key) when a gate is swept.
#[derive(Clone)]
pub struct ExecutorCtx {
    pub shared: Shared,
    pub executor: Arc<Executor>,
    pub sweeper: Option<Arc<crate::sweeper::Sweeper>>,
}

impl ExecutorCtx {
    /// Loads the hot-wallet keys and the deposit account's: this is the only process that holds
    /// them.
    pub fn new(shared: &Shared) -> anyhow::Result<ExecutorCtx> {
        let config = &shared.config;
        let executor = Executor {
            db: shared.db.clone(),
            chains: shared.chains.clone(),
            signers: Signers::from_config(config)?,
            recheck: Duration::from_millis(config.payouts.recheck_ms),
        };
        let sweeper =
            crate::sweeper::Sweeper::from_config(&shared.db, &shared.chains, &executor.signers, config)?.map(Arc::new);
        Ok(ExecutorCtx { shared: shared.clone(), executor: Arc::new(executor), sweeper })
    }
}

pub(crate) async fn handle(ctx: &ExecutorCtx, job: ExecutePayout) -> Result<(), JobError> {
    match ctx.executor.execute(job.payout_id).await.map_err(JobError::retry)? {
        executor::Next::Done => {}
        executor::Next::After(delay) => {
            // A lost push is found by the poller (`executor::due`).
            ctx.shared.queues.push_after(job, delay).await?;
        }
    }
    Ok(())
}

/// Enqueues the payouts that are due or that nobody looked at lately.
async fn poll(ctx: &Shared) -> anyhow::Result<()> {
    let stale = Duration::from_secs(ctx.config.payouts.stale_after_secs);
    let ids = executor::due(&ctx.db, stale, 1000).await?;
    if !ids.is_empty() {
        ctx.queues.push_many(ids.into_iter().map(|payout_id| ExecutePayout { payout_id })).await?;
    }
    Ok(())
}

/// The poller, every `poll_interval_ms`.
/// The payout poller, the sweeper (when a gate is swept) and the live reconciliation's metric (`crate::treasury`) every
/// `treasury.report_interval_secs` (0: never): the process that pays out is the one that
/// answers for the hot wallets.
pub(crate) async fn background(ctx: ExecutorCtx, stop: CancellationToken) {
    let sweeper = ctx.sweeper.clone();
    let ctx = ctx.shared;
    let every = Duration::from_millis(ctx.config.payouts.poll_interval_ms);
    let payouts = repeat(&stop, every, || async {
        if let Err(e) = poll(&ctx).await {
            tracing::warn!(error = %e, "payout poll failed");
        }
    });
    let reconcile = async {
        let secs = ctx.config.treasury.report_interval_secs;
        if secs == 0 {
            return;
        }
        repeat(&stop, Duration::from_secs(secs), || async {
            if let Err(e) = crate::treasury::export_metrics(&ctx.db, &ctx.chains, &ctx.config).await {
                tracing::warn!(error = %e, "treasury reconciliation failed");
            }
        })
        .await
    };
    let sweeps = async {
        let Some(sweeper) = sweeper else { return };
        let every = Duration::from_millis(ctx.config.treasury.sweep_interval_ms.max(100));
        repeat(&stop, every, || async {
            if let Err(e) = sweeper.tick().await {
                tracing::warn!(error = %e, "sweep round failed");
            }
        })
        .await
    };
    tokio::join!(payouts, reconcile, sweeps);
}
