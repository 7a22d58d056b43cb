//! The settlement converter as a job: `ConvertSettlement` quotes or settles one payment's
//! conversion; a poller beside it enqueues the payments the database says are due.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use domain::rates::Rates;

use super::Converter;
use super::venue::Venues;
use crate::context::{Shared, repeat};
use crate::platform::{Job, JobError};

/// Quote or settle one payment's conversion into its invoice's settlement asset.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvertSettlement {
    pub payment_id: Uuid,
}

impl Job for ConvertSettlement {
    const QUEUE: &'static str = "settlement-convert";
}

/// The settlement converter's context: the shared one, the converter (its venues) and the
/// rates its sandbox venue prices from.
#[derive(Clone)]
pub struct ConverterCtx {
    pub shared: Shared,
    pub converter: Arc<Converter>,
    pub rates: Rates,
}

impl ConverterCtx {
    pub fn new(shared: &Shared) -> ConverterCtx {
        let config = &shared.config;
        let rates = Rates::new(&config.rates);
        let converter = Converter {
            db: shared.db.clone(),
            venues: Venues::from_config(config, rates.clone(), &shared.db),
            quote_lock: chrono::Duration::seconds(i64::try_from(config.settlement.quote_lock_secs).unwrap_or(i64::MAX)),
        };
        ConverterCtx { shared: shared.clone(), converter: Arc::new(converter), rates }
    }
}

pub(crate) async fn handle(ctx: &ConverterCtx, job: ConvertSettlement) -> Result<(), JobError> {
    ctx.converter.step(job.payment_id).await.map_err(JobError::retry)?;
    Ok(())
}

/// Enqueues the payments the converter has work for (to quote, or confirmed and waiting for
/// their credit), each at most once per `resend` while it stays due: the database is the
/// to-do list, the queue only spreads it over the converters.
async fn poll(ctx: &Shared, sent: &mut HashMap<Uuid, Instant>, resend: Duration) -> anyhow::Result<()> {
    let ids = super::due(&ctx.db, 1000).await?;
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
pub(crate) async fn background(ctx: ConverterCtx, stop: CancellationToken) {
    ctx.rates.start(&ctx.shared.db).await;
    let ctx = ctx.shared;
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
