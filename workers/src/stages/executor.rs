//! The payout executor as a job: `ExecutePayout` moves one payout along; a poller beside it
//! enqueues the payouts that are due or that nobody looked at lately.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{StageCtx, repeat};
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

pub(super) async fn handle(ctx: &StageCtx, job: ExecutePayout) -> Result<(), JobError> {
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
async fn poll(ctx: &StageCtx) -> anyhow::Result<()> {
    let stale = Duration::from_secs(ctx.config.payouts.stale_after_secs);
    let ids = executor::due(&ctx.db, stale, 1000).await?;
    if !ids.is_empty() {
        ctx.queues.push_many(ids.into_iter().map(|payout_id| ExecutePayout { payout_id })).await?;
    }
    Ok(())
}

/// The poller, every `poll_interval_ms`.
pub(super) async fn background(ctx: StageCtx, stop: CancellationToken) {
    let every = Duration::from_millis(ctx.config.payouts.poll_interval_ms);
    repeat(&stop, every, || async {
        if let Err(e) = poll(&ctx).await {
            tracing::warn!(error = %e, "payout poll failed");
        }
    })
    .await
}
