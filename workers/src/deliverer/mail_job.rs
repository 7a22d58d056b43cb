//! Payer e-mail as a job, run by the webhook deliverer's process (both tell the outside world
//! what happened to an invoice): `SendInvoiceEmail` sends one invoice's payment request
//! (`crate::deliverer::mail`); the sweep, on the deliverer's ticker, hands due invoices to jobs.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::job::DelivererCtx;
use crate::deliverer::mail::{self, MailError};
use crate::platform::{Job, JobError};

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

pub(crate) async fn handle(ctx: &DelivererCtx, job: SendInvoiceEmail) -> Result<(), JobError> {
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
pub(super) async fn sweep(ctx: &DelivererCtx) -> anyhow::Result<()> {
    if ctx.mailer.is_none() {
        return Ok(());
    }
    let ids = mail::due(&ctx.shared.db, STALE, 500).await?;
    if !ids.is_empty() {
        ctx.shared.queues.push_many(ids.into_iter().map(|invoice_id| SendInvoiceEmail { invoice_id })).await?;
    }
    Ok(())
}
