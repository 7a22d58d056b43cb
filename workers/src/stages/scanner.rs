//! The deposit scanner as a job: one `ScanGate` per gate and tick reads its new blocks (and, where
//! the adapter reads one, its mempool) and hands the payments whose confirmations they completed
//! to the tracker.

use entity::Environment;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{StageCtx, repeat};
use crate::pipeline::scanner;
use crate::platform::{Job, JobError};
use crate::stages::tracker::TrackDue;

/// Payments handed to the tracker per job: confirmed in one transaction.
const DUE_PER_JOB: usize = 200;

/// Scan one gate's new blocks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanGate {
    pub environment: Environment,
    pub gate_id: String,
}

impl Job for ScanGate {
    const QUEUE: &'static str = "deposit-scan";
}

pub(super) async fn handle(ctx: &StageCtx, job: ScanGate) -> Result<(), JobError> {
    let Some(chain) = ctx.chains.get(job.environment, &job.gate_id) else {
        return Err(JobError::permanent(anyhow::anyhow!("no chain for {} {}", job.environment, job.gate_id)));
    };
    let batch = ctx.config.pipeline.scan_batch_blocks;
    // Catch up in bounded batches; each batch commits its payments with the cursor, the next
    // one read from the chain meanwhile.
    let mut scan = scanner::Scanner::new(&ctx.db, chain.as_ref(), job.environment, batch);
    for _ in 0..20 {
        let Some(report) = scan.next().await? else {
            break;
        };
        // The payments whose confirmations these blocks completed (new ones included when one
        // block suffices) go to the tracker now; the others wait for the block that completes
        // them. A lost push only delays: the sweeper finds payments nobody checked lately.
        let due = scanner::due_payments(&ctx.db, job.environment, chain.gate(), report.from, report.to).await?;
        for ids in due.chunks(DUE_PER_JOB) {
            ctx.queues.push(TrackDue { payment_ids: ids.to_vec() }).await?;
        }
    }
    // Deposits still in the mempool show as `confirming` with 0 confirmations; the block that
    // takes them hands them to the tracker as above.
    scanner::scan_pending(&ctx.db, chain.as_ref(), job.environment).await?;
    Ok(())
}

/// Every `scan_interval_ms`, a scan job for every watched gate.
pub(super) async fn background(ctx: StageCtx, stop: CancellationToken) {
    let every = std::time::Duration::from_millis(ctx.config.pipeline.scan_interval_ms.max(10));
    repeat(&stop, every, || async {
        for (environment, chain) in ctx.chains.all() {
            let job = ScanGate { environment, gate_id: chain.gate().id.into() };
            if let Err(e) = ctx.queues.push(job).await {
                tracing::warn!(error = %e, "could not enqueue a scan");
            }
        }
    })
    .await
}
