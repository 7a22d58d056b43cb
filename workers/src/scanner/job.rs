//! The deposit scanner as a job: one `ScanGate` per gate and tick reads its new blocks (and, where
//! the adapter reads one, its mempool) and hands the payments whose confirmations they completed
//! to the tracker.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use entity::Environment;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::chain::Chain;
use crate::context::Shared;
use crate::platform::{Job, JobError};
use crate::scanner;
use crate::tracker::job::TrackDue;

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

pub(crate) async fn handle(ctx: &Shared, job: ScanGate) -> Result<(), JobError> {
    let Some(chain) = ctx.chains.get(job.environment, &job.gate_id) else {
        return Err(JobError::permanent(anyhow::anyhow!("no chain for {} {}", job.environment, job.gate_id)));
    };
    let batch = ctx.config.pipeline.scan_batch_blocks;
    // Catch up in bounded batches; each batch commits its payments with the cursor, the next
    // one read from the chain meanwhile.
    let mut scan = scanner::Scanner::new(&ctx.db, chain.as_ref(), job.environment, batch);
    for _ in 0..20 {
        let Some((from, to)) = scan.peek().await? else {
            break;
        };
        // The payments recorded before whose confirmations these blocks complete go to the
        // tracker first, so their credits do not wait for this batch's new deposits; then the
        // new ones that one block suffices for. The others wait for the block that completes
        // them. A lost push only delays: the sweeper finds payments nobody checked lately.
        let early = scanner::due_payments(&ctx.db, job.environment, chain.gate(), from, to).await?;
        hand_over(ctx, &early).await?;
        let Some(report) = scan.next().await? else {
            break;
        };
        let early: HashSet<Uuid> = early.into_iter().collect();
        let new = scanner::due_payments(&ctx.db, job.environment, chain.gate(), report.from, report.to).await?;
        hand_over(ctx, &new.into_iter().filter(|id| !early.contains(id)).collect::<Vec<_>>()).await?;
    }
    // Deposits still in the mempool show as `confirming` with 0 confirmations; the block that
    // takes them hands them to the tracker as above.
    scanner::scan_pending(&ctx.db, chain.as_ref(), job.environment).await?;
    Ok(())
}

/// Hands `due` payments to the tracker, [`DUE_PER_JOB`] a job.
async fn hand_over(ctx: &Shared, due: &[Uuid]) -> Result<(), JobError> {
    for ids in due.chunks(DUE_PER_JOB) {
        ctx.queues.push(TrackDue { payment_ids: ids.to_vec() }).await?;
    }
    Ok(())
}

/// A scan job for every watched gate every `scan_interval_ms`, and right after each block where
/// the chain knows when its blocks come (the sandbox's timed blocks): a block is scanned as soon
/// as it exists, not up to an interval later.
pub(crate) async fn background(ctx: Shared, stop: CancellationToken) {
    let every = Duration::from_millis(ctx.config.pipeline.scan_interval_ms.max(10));
    let chains = ctx.chains.all();
    let mut due: Vec<Instant> = vec![Instant::now(); chains.len()];
    while !stop.is_cancelled() {
        for ((environment, chain), at) in chains.iter().zip(due.iter_mut()) {
            if *at > Instant::now() {
                continue;
            }
            let job = ScanGate { environment: *environment, gate_id: chain.gate().id.into() };
            if let Err(e) = ctx.queues.push(job).await {
                tracing::warn!(error = %e, "could not enqueue a scan");
            }
            *at = next_scan(chain.as_ref(), every).await;
        }
        let first = due.iter().min().copied().unwrap_or_else(|| Instant::now() + every);
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(first.max(Instant::now() + MIN_GAP).into()) => {}
        }
    }
}

/// Least time between two scan jobs of one gate.
const MIN_GAP: Duration = Duration::from_millis(10);
/// How long after a block's due time its scan is pushed (the scan itself reads it later still).
const AFTER_BLOCK: Duration = Duration::from_millis(2);

/// When to push the next scan of `chain`: after `every`, or just after its next block if that is
/// sooner.
async fn next_scan(chain: &dyn Chain, every: Duration) -> Instant {
    let polled = Instant::now() + every;
    let Some(block_at) = chain.next_block_at().await else { return polled };
    let until = (block_at - Utc::now()).to_std().unwrap_or_default();
    polled.min(Instant::now() + until + AFTER_BLOCK)
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use crate::chain::{ChainError, Transfer, TxStatus};

    /// A chain that says only when its next block is due.
    struct Timed(Option<DateTime<Utc>>);

    #[async_trait::async_trait]
    impl Chain for Timed {
        fn gate(&self) -> &'static domain::gates::Gate {
            domain::gates::find("bitcoin").expect("a gate")
        }
        async fn tip(&self) -> Result<u64, ChainError> {
            Ok(1)
        }
        async fn transfers(&self, _: u64, _: u64) -> Result<Vec<Transfer>, ChainError> {
            Ok(Vec::new())
        }
        async fn status(&self, _: &str, _: i64, _: Option<u64>) -> Result<TxStatus, ChainError> {
            Ok(TxStatus::Gone)
        }
        async fn next_block_at(&self) -> Option<DateTime<Utc>> {
            self.0
        }
    }

    #[tokio::test]
    async fn a_gate_is_scanned_right_after_its_next_block_or_at_the_poll_interval() {
        let every = Duration::from_secs(1);
        let slack = Duration::from_millis(50);
        // A live chain: the poll interval.
        let start = Instant::now();
        let at = next_scan(&Timed(None), every).await;
        assert!(at >= start + every && at <= Instant::now() + every);
        // A block due in 100 ms: just after it.
        let start = Instant::now();
        let at = next_scan(&Timed(Some(Utc::now() + chrono::Duration::milliseconds(100))), every).await;
        assert!(
            at >= start + Duration::from_millis(90) && at <= start + Duration::from_millis(100) + AFTER_BLOCK + slack
        );
        // One due in 5 s: the poll comes first.
        let start = Instant::now();
        let at = next_scan(&Timed(Some(Utc::now() + chrono::Duration::seconds(5))), every).await;
        assert!(at >= start + every && at <= Instant::now() + every);
        // One already due: now.
        let start = Instant::now();
        let at = next_scan(&Timed(Some(Utc::now() - chrono::Duration::seconds(1))), every).await;
        assert!(at >= start && at <= Instant::now() + AFTER_BLOCK);
    }
}
