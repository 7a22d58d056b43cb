//! The confirmation tracker as a job: `TrackPayment` follows one payment's confirmations, and
//! the sweeper beside it re-enqueues payments whose job chain was lost.

use std::time::Duration;

use domain::config::Config;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::context::{Shared, repeat};
use crate::platform::{Job, JobError};
use crate::tracker::{self, sweeper};

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

/// The payments whose confirmations a scan completed, handed over at once: confirmed together,
/// then each followed by its own [`TrackPayment`] chain.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrackDue {
    pub payment_ids: Vec<Uuid>,
}

impl Job for TrackDue {
    const QUEUE: &'static str = "track-due";
}

pub(crate) async fn handle(ctx: &Shared, job: TrackPayment) -> Result<(), JobError> {
    let pipeline = &ctx.config.pipeline;
    let next = tracker::track_payment_chain(&ctx.db, &ctx.chains, pipeline, job.payment_id, job.token).await?;
    recheck(ctx, job.payment_id, next).await
}

pub(crate) async fn handle_due(ctx: &Shared, job: TrackDue) -> Result<(), JobError> {
    let (tracked, failed) = tracker::track_due(&ctx.db, &ctx.chains, &ctx.config.pipeline, &job.payment_ids).await;
    for (payment_id, next) in tracked {
        recheck(ctx, payment_id, next).await?;
    }
    failed.map_or(Ok(()), |e| Err(e.into()))
}

/// Schedules the payment's next look, if it needs one.
async fn recheck(ctx: &Shared, payment_id: Uuid, next: tracker::Next) -> Result<(), JobError> {
    match next {
        tracker::Next::Done | tracker::Next::Superseded | tracker::Next::AwaitsHandOver => Ok(()),
        tracker::Next::Recheck { after, token } => {
            // A lost push is found by the sweeper once `next_check_at` is overdue.
            ctx.queues.push_after(TrackPayment { payment_id, token: Some(token) }, after).await?;
            Ok(())
        }
    }
}

/// The sweeper, every `sweep_interval_ms`; then a look at the unclaimed deposits still
/// followed (`tracker::follow_unclaimed`).
pub(crate) async fn background(ctx: Shared, stop: CancellationToken) {
    let every = Duration::from_millis(ctx.config.pipeline.sweep_interval_ms.max(10));
    let stale_after = stale_after(&ctx.config);
    repeat(&stop, every, || async {
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
        if let Err(e) = tracker::follow_unclaimed(&ctx.db, &ctx.chains, &ctx.config.pipeline).await {
            tracing::warn!(error = %e, "following unclaimed deposits failed");
        }
    })
    .await
}

/// How far past its scheduled check (`next_check_at`; or, unscheduled, past its last check) a
/// payment must be before the sweeper considers its job chain lost and re-enqueues it: a margin
/// for queue latency and busy trackers, so live chains are not duplicated.
pub fn stale_after(cfg: &Config) -> Duration {
    Duration::from_millis(cfg.pipeline.track_interval_ms.saturating_mul(10).max(5_000))
}
