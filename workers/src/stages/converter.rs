//! The settlement converter as a job: `ConvertSettlement` quotes or settles one payment's
//! conversion; a poller beside it enqueues the payments the database says are due.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{StageCtx, repeat};
use crate::platform::{Job, JobError};
use crate::settlement;

/// Quote or settle one payment's conversion into its invoice's settlement asset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvertSettlement {
    pub payment_id: Uuid,
}

impl Job for ConvertSettlement {
    const QUEUE: &'static str = "settlement-convert";
}

pub(super) async fn handle(ctx: &StageCtx, job: ConvertSettlement) -> Result<(), JobError> {
    let Some((converter, _)) = &ctx.converter else {
        return Err(JobError::permanent(anyhow::anyhow!("this process has no settlement converter")));
    };
    converter.step(job.payment_id).await.map_err(JobError::retry)?;
    Ok(())
}

/// Enqueues the payments the converter has work for (to quote, or confirmed and waiting for
/// their credit), each at most once per `resend` while it stays due: the database is the
/// to-do list, the queue only spreads it over the converters.
async fn poll(ctx: &StageCtx, sent: &mut HashMap<Uuid, Instant>, resend: Duration) -> anyhow::Result<()> {
    let ids = settlement::due(&ctx.db, 1000).await?;
    let now = Instant::now();
    sent.retain(|_, at| now.duration_since(*at) < resend);
    let fresh: Vec<Uuid> = ids.into_iter().filter(|id| !sent.contains_key(id)).collect();
    if !fresh.is_empty() {
        ctx.queues.push_many(fresh.iter().map(|&payment_id| ConvertSettlement { payment_id })).await?;
        sent.extend(fresh.into_iter().map(|id| (id, now)));
    }
    Ok(())
}

/// The rates refresher, and the poller every `poll_interval_ms`.
pub(super) async fn background(ctx: StageCtx, stop: CancellationToken) {
    if let Some((_, rates)) = &ctx.converter {
        rates.start().await;
    }
    let every = Duration::from_millis(ctx.config.settlement.poll_interval_ms);
    // A job not done within this is pushed again (lost with a flushed queue, or its converter
    // died).
    let resend = every.saturating_mul(20).max(Duration::from_secs(5));
    let sent = tokio::sync::Mutex::new(HashMap::new());
    repeat(&stop, every, || async {
        if let Err(e) = poll(&ctx, &mut *sent.lock().await, resend).await {
            tracing::warn!(error = %e, "conversion poll failed");
        }
    })
    .await
}
