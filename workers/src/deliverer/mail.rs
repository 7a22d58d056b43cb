//! Payer e-mail: the payment request of an invoice with `payer_email` (amount, merchant name,
//! checkout link; plain text and HTML, texts from `domain::messages`), sent over SMTP with
//! lettre. An invoice is due while `email_due_at` is set; [`due`] hands due ones to jobs, and
//! [`send_invoice_email`] sends one and, in one transaction, sets `sent_at` and emits
//! `invoice.sent` (PRODUCT.md). A job that finds the invoice sent, or no longer awaiting
//! payment, sends nothing. At least once: a crash between the SMTP answer and the commit sends
//! the e-mail again.

use std::time::Duration;

use chrono::Utc;
use entity::{InvoiceStatus, invoice, merchant};
use lettre::message::{Mailbox, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use uuid::Uuid;

use domain::config::{Config, EmailTls};
use domain::events::{self, EventKind};
use domain::messages::fill;

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("e-mail configuration: {0}")]
    Config(String),
    #[error("SMTP: {0}")]
    Smtp(String),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}

/// What one job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Sent,
    /// Already sent, no e-mail address, or the invoice no longer awaits payment.
    NothingToDo,
}

/// The SMTP transport and the sender.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    base_url: url::Url,
}

impl Mailer {
    /// The mailer `[email]` configures; `None` when no SMTP host is set.
    pub fn from_config(config: &Config) -> Result<Option<Mailer>, MailError> {
        let cfg = &config.email;
        if !cfg.configured() {
            return Ok(None);
        }
        let from: Mailbox =
            cfg.from.parse().map_err(|e| MailError::Config(format!("email.from {:?}: {e}", cfg.from)))?;
        let tls_err = |e: lettre::transport::smtp::Error| MailError::Config(format!("email.host: {e}"));
        let mut builder = match cfg.tls {
            EmailTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&cfg.host),
            EmailTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&cfg.host).map_err(tls_err)?,
            EmailTls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&cfg.host).map_err(tls_err)?,
        }
        .port(cfg.port)
        .timeout(Some(Duration::from_millis(cfg.timeout_ms)));
        if let Some(user) = &cfg.username {
            let password = cfg.password.as_ref().map(|p| p.0.clone()).unwrap_or_default();
            builder = builder.credentials(Credentials::new(user.clone(), password));
        }
        Ok(Some(Mailer { transport: builder.build(), from, base_url: config.public_base_url.clone() }))
    }

    /// The payment request for `inv` from `merchant`, to `to`; replies go to the merchant's
    /// `payer_reply_to` when it has one.
    pub fn compose(
        &self,
        inv: &invoice::Model,
        merchant: &str,
        reply_to: Option<&str>,
        to: &str,
    ) -> Result<Message, MailError> {
        let to: Mailbox = to.parse().map_err(|e| MailError::Smtp(format!("payer_email {to:?}: {e}")))?;
        let (amount, currency) = match (&inv.amount_fiat, &inv.fiat_currency, &inv.amount_requested, &inv.currency) {
            (Some(a), Some(c), ..) => (a.0.normalize().to_string(), c.clone()),
            (_, _, Some(a), Some(c)) => (a.0.normalize().to_string(), c.clone()),
            _ => (String::new(), String::new()),
        };
        let url = domain::invoices::types::checkout_url(&self.base_url, inv.id.into());
        let args = [("merchant", merchant), ("amount", amount.as_str()), ("currency", currency.as_str())];
        let mut text = vec![fill("email_greeting", &[]), String::new(), fill("email_body", &args)];
        let mut html = vec![
            format!("<p>{}</p>", domain::messages::escape_html(&fill("email_greeting", &[]))),
            format!("<p>{}</p>", domain::messages::escape_html(&fill("email_body", &args))),
        ];
        if let Some(d) = inv.description.as_deref().filter(|d| !d.is_empty()) {
            text.push(fill("email_description", &[("description", d)]));
            html.push(format!(
                "<p>{}</p>",
                domain::messages::escape_html(&fill("email_description", &[("description", d)]))
            ));
        }
        text.extend([String::new(), fill("email_link", &[("url", &url)]), String::new(), fill("email_footer", &[])]);
        html.push(format!(
            "<p><a href=\"{}\">{}</a></p>",
            domain::messages::escape_html(&url),
            domain::messages::escape_html(&fill("email_button", &args))
        ));
        html.push(format!("<p><small>{}</small></p>", domain::messages::escape_html(&fill("email_footer", &[]))));
        let html = format!("<!doctype html><html><body>{}</body></html>", html.join("\n"));
        let mut builder = Message::builder().from(self.from.clone()).to(to);
        if let Some(r) = reply_to {
            let r: Mailbox = r.parse().map_err(|e| MailError::Smtp(format!("payer_reply_to {r:?}: {e}")))?;
            builder = builder.reply_to(r);
        }
        builder
            .subject(fill("email_subject", &args))
            .multipart(MultiPart::alternative_plain_html(text.join("\n"), html))
            .map_err(|e| MailError::Smtp(e.to_string()))
    }
}

/// The ids of invoices whose e-mail is due at `now`, oldest first: a read of the partial index of
/// due e-mails (`email_due_at IS NOT NULL`), whatever the number of invoices.
pub fn due_query(now: chrono::DateTime<Utc>, limit: u64) -> sea_orm::Select<invoice::Entity> {
    invoice::Entity::find()
        .select_only()
        .column(invoice::Column::Id)
        .filter(invoice::Column::EmailDueAt.lte(now))
        .order_by_asc(invoice::Column::EmailDueAt)
        .limit(limit)
}

/// Invoices whose e-mail is due (at most `limit`, oldest first); each is marked due again after
/// `stale` (when its job was lost, or failed every retry), then handed to a job.
pub async fn due(db: &DatabaseConnection, stale: Duration, limit: u64) -> Result<Vec<Uuid>, sea_orm::DbErr> {
    let now = Utc::now();
    let ids: Vec<Uuid> = due_query(now, limit).into_tuple().all(db).await?;
    if !ids.is_empty() {
        let again = now + chrono::Duration::from_std(stale).unwrap_or(chrono::Duration::minutes(5));
        invoice::Entity::update_many()
            .col_expr(invoice::Column::EmailDueAt, Expr::value(again))
            .filter(invoice::Column::Id.is_in(ids.clone()))
            .filter(invoice::Column::EmailDueAt.is_not_null())
            .exec(db)
            .await?;
    }
    Ok(ids)
}

/// Sends the invoice's payment request if it is still wanted; then `sent_at` and
/// `invoice.sent`, in one transaction.
pub async fn send_invoice_email(db: &DatabaseConnection, mailer: &Mailer, id: Uuid) -> Result<Sent, MailError> {
    let Some(inv) = invoice::Entity::find_by_id(id).one(db).await? else { return Ok(Sent::NothingToDo) };
    let awaiting = matches!(inv.status, InvoiceStatus::Draft | InvoiceStatus::Pending);
    let (Some(to), None, true) = (inv.payer_email.as_deref(), inv.sent_at, awaiting) else {
        invoice::Entity::update_many()
            .col_expr(invoice::Column::EmailDueAt, Expr::value(Option::<chrono::DateTime<Utc>>::None))
            .filter(invoice::Column::Id.eq(id))
            .exec(db)
            .await?;
        return Ok(Sent::NothingToDo);
    };
    let merchant = merchant::Entity::find_by_id(inv.merchant_id).one(db).await?;
    let (name, reply_to) = merchant.map(|m| (m.name, m.payer_reply_to)).unwrap_or_default();
    let message = mailer.compose(&inv, &name, reply_to.as_deref(), to)?;
    mailer.transport.send(message).await.map_err(|e| MailError::Smtp(e.to_string()))?;

    let now = Utc::now();
    let txn = domain::db::begin_write(db).await?;
    let marked = invoice::Entity::update_many()
        .col_expr(invoice::Column::SentAt, Expr::value(now))
        .col_expr(invoice::Column::EmailDueAt, Expr::value(Option::<chrono::DateTime<Utc>>::None))
        .col_expr(invoice::Column::UpdatedAt, Expr::value(now))
        .filter(invoice::Column::Id.eq(id))
        .filter(invoice::Column::SentAt.is_null())
        .exec_with_returning(&txn)
        .await?;
    if let Some(after) = marked.first() {
        events::emit_invoice(&txn, EventKind::InvoiceSent, after, None).await?;
    }
    txn.commit().await?;
    Ok(Sent::Sent)
}
