//! The webhook deliverer as a job: `DeliverWebhook` runs one delivery's due attempt; beside it,
//! the dispatcher turns new outbox events into deliveries, the sweeper re-enqueues lost ones, and
//! the payer e-mail (`SendInvoiceEmail`: one invoice's payment request by `super::mail`; its sweep hands
//! due invoices to jobs).

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::webhooks;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use domain::webhooks::secrets::SecretBox;

use super::mail::{self, MailError, Mailer};
use super::{Deliverer, Outcome};
use crate::context::{Shared, repeat};
use crate::platform::{Job, JobError};

/// Run the due attempt of one webhook delivery.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliverWebhook {
    pub delivery_id: Uuid,
}

impl Job for DeliverWebhook {
    const QUEUE: &'static str = "webhook-deliver";
}

/// The webhook deliverer's context: the shared one, the webhook sender (which holds the
/// secrets' key) and, where `[email]` is configured, the payer e-mail sender.
#[derive(Clone)]
pub struct DelivererCtx {
    pub shared: Shared,
    pub deliverer: Arc<Deliverer>,
    pub mailer: Option<Arc<Mailer>>,
}

impl DelivererCtx {
    pub fn new(shared: &Shared) -> anyhow::Result<DelivererCtx> {
        let config = &shared.config;
        let sbox = SecretBox::from_config(config)?;
        let deliverer = Arc::new(Deliverer::new(shared.db.clone(), sbox, config.webhooks.clone())?);
        let mailer = Mailer::from_config(config)?;
        match &mailer {
            Some(_) => tracing::info!(host = %config.email.host, "payer e-mail on: payment requests go to payer_email"),
            None => tracing::info!("payer e-mail off: set [email] host to send payment requests to payer_email"),
        }
        Ok(DelivererCtx { shared: shared.clone(), deliverer, mailer: mailer.map(Arc::new) })
    }
}

pub(crate) async fn handle(ctx: &DelivererCtx, job: DeliverWebhook) -> Result<(), JobError> {
    match ctx.deliverer.attempt(job.delivery_id).await.map_err(JobError::retry)? {
        Outcome::RetryAfter(delay) | Outcome::NotDue(delay) => {
            // Lost pushes are found by the sweeper (`deliverer::stale`).
            ctx.shared.queues.push_after(job, delay).await?;
        }
        Outcome::Delivered | Outcome::Dead | Outcome::Skipped => {}
    }
    Ok(())
}

/// Moves new outbox events into deliveries and enqueues them, round after round while full
/// rounds come back, as long as the queue holds fewer than `max_queued` waiting deliveries
/// (back-pressure: past that, the events wait in the outbox, oldest first).
pub async fn dispatch(ctx: &Shared) -> anyhow::Result<()> {
    let (batch, max_queued) = (ctx.config.webhooks.dispatch_batch, ctx.config.webhooks.max_queued);
    loop {
        let waiting = ctx.queues.waiting(DeliverWebhook::QUEUE).await?;
        let room = batch.min(max_queued.saturating_sub(waiting));
        if room == 0 {
            return Ok(());
        }
        let round = webhooks::dispatch::dispatch_batch(&ctx.db, room).await?;
        if !round.deliveries.is_empty() {
            ctx.queues
                .push_many(round.deliveries.into_iter().map(|delivery_id| DeliverWebhook { delivery_id }))
                .await?;
        }
        if (round.events as u64) < room {
            return Ok(());
        }
    }
}

/// Re-enqueues deliveries whose job was lost.
async fn sweep(ctx: &Shared) -> anyhow::Result<()> {
    let stale_after = Duration::from_secs(ctx.config.webhooks.stale_after_secs);
    let ids = super::stale(&ctx.db, stale_after, 1000).await?;
    if !ids.is_empty() {
        tracing::info!(count = ids.len(), "re-enqueueing webhook deliveries whose job was lost");
        ctx.queues.push_many(ids.into_iter().map(|delivery_id| DeliverWebhook { delivery_id })).await?;
    }
    Ok(())
}

/// The dispatcher every `dispatch_interval_ms`, the sweeper every `sweep_interval_ms`.
pub(crate) async fn background(ctx: DelivererCtx, stop: CancellationToken) {
    tokio::join!(deliveries(&ctx, &stop), retention(&ctx, &stop), list_counts(&ctx, &stop));
}

/// How often the list counters' deltas are folded (`domain::list_counts`): a list's total is
/// exact either way; folding keeps the deltas a reader sums few.
const FOLD_EVERY: Duration = Duration::from_secs(1);

async fn list_counts(ctx: &DelivererCtx, stop: &CancellationToken) {
    repeat(stop, FOLD_EVERY, || async {
        if let Err(e) = domain::list_counts::fold(&ctx.shared.db, 100).await {
            tracing::warn!(error = %e, "folding the list counters failed");
        }
    })
    .await
}

/// Retention (`[retention]`): prunes what has served its purpose every `interval_secs`, in
/// short batches (`domain::retention`).
async fn retention(ctx: &DelivererCtx, stop: &CancellationToken) {
    let cfg = &ctx.shared.config.retention;
    repeat(stop, Duration::from_secs(cfg.interval_secs), || async {
        match domain::retention::prune(&ctx.shared.db, cfg, chrono::Utc::now()).await {
            Ok(p) if p != domain::retention::Pruned::default() => tracing::info!(
                attempt_bodies = p.attempt_bodies,
                sessions = p.sessions,
                invitations = p.invitations,
                "retention pruned"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention pruning failed"),
        }
    })
    .await
}

async fn deliveries(ctx: &DelivererCtx, stop: &CancellationToken) {
    let every = Duration::from_millis(ctx.shared.config.webhooks.dispatch_interval_ms);
    let sweep_every = Duration::from_millis(ctx.shared.config.webhooks.sweep_interval_ms);
    let last_sweep = std::sync::Mutex::new(Instant::now());
    let mail_every = Duration::from_millis(ctx.shared.config.email.sweep_interval_ms);
    let last_mail = std::sync::Mutex::new(None::<Instant>);
    repeat(stop, every, || async {
        if let Err(e) = dispatch(&ctx.shared).await {
            tracing::warn!(error = %e, "webhook dispatch failed");
        }
        let sweep_due = {
            let mut last = last_sweep.lock().expect("not poisoned");
            let due = last.elapsed() >= sweep_every;
            if due {
                *last = Instant::now();
            }
            due
        };
        if sweep_due && let Err(e) = sweep(&ctx.shared).await {
            tracing::warn!(error = %e, "webhook sweep failed");
        }
        let mail_due = {
            let mut last = last_mail.lock().expect("not poisoned");
            let due = last.is_none_or(|t| t.elapsed() >= mail_every);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if mail_due && let Err(e) = mail_sweep(ctx).await {
            tracing::warn!(error = %e, "payer e-mail sweep failed");
        }
    })
    .await
}

/// Send the payment request of one invoice to its `payer_email`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SendInvoiceEmail {
    pub invoice_id: Uuid,
}

impl Job for SendInvoiceEmail {
    const QUEUE: &'static str = "invoice-email";
}

/// An invoice taken by the sweep is offered again after this long if its e-mail is still due
/// (the job was lost, or failed every retry).
pub const STALE: Duration = Duration::from_secs(300);

pub(crate) async fn handle_email(ctx: &DelivererCtx, job: SendInvoiceEmail) -> Result<(), JobError> {
    let Some(mailer) = &ctx.mailer else {
        return Err(JobError::permanent(anyhow::anyhow!("this process has no [email] configured")));
    };
    match mail::send_invoice_email(&ctx.shared.db, mailer, job.invoice_id).await {
        Ok(_) => Ok(()),
        Err(e @ MailError::Config(_)) => Err(JobError::permanent(e)),
        Err(e) => Err(JobError::retry(e)),
    }
}

/// Hands every invoice whose e-mail is due to a job.
async fn mail_sweep(ctx: &DelivererCtx) -> anyhow::Result<()> {
    if ctx.mailer.is_none() {
        return Ok(());
    }
    let ids = mail::due(&ctx.shared.db, STALE, 500).await?;
    if !ids.is_empty() {
        ctx.shared.queues.push_many(ids.into_iter().map(|invoice_id| SendInvoiceEmail { invoice_id })).await?;
    }
    Ok(())
}
