//! Group commit for invoice inserts.
//!
//! Creating an invoice is one INSERT, and under load PostgreSQL spends most of its time on
//! per-statement and per-commit work rather than on the row. Requests hand their row to this
//! writer; it takes whatever has queued up while the previous batch was being written (no
//! artificial delay: an idle writer sends a lone row at once) and stores it with one multi-row
//! `INSERT … ON CONFLICT DO NOTHING RETURNING id`. Each caller learns whether its own row went
//! in (`false` = its idempotency key already exists). If a batch fails, its rows are retried one
//! by one so one bad row cannot fail the others.

use std::collections::HashSet;
use std::sync::Arc;

use entity::invoice;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{DatabaseConnection, DbErr, EntityTrait};
use tokio::sync::{Semaphore, mpsc, oneshot};
use uuid::Uuid;

/// Rows per statement: 45 columns x 64 rows stays far below every bind-parameter limit.
const MAX_BATCH: usize = 64;
/// Batches written concurrently.
const MAX_IN_FLIGHT: usize = 4;

struct Pending {
    model: invoice::Model,
    reply: oneshot::Sender<Result<bool, DbErr>>,
}

#[derive(Clone)]
pub struct InvoiceWriter {
    tx: mpsc::Sender<Pending>,
}

fn on_conflict() -> OnConflict {
    // The partial unique index on (merchant_id, environment, idempotency_key).
    OnConflict::columns([invoice::Column::MerchantId, invoice::Column::Environment, invoice::Column::IdempotencyKey])
        .target_and_where(Expr::col(invoice::Column::IdempotencyKey).is_not_null())
        .do_nothing()
        .to_owned()
}

impl InvoiceWriter {
    /// Starts the writer task on the current runtime.
    pub fn spawn(db: DatabaseConnection) -> InvoiceWriter {
        let (tx, rx) = mpsc::channel(4 * MAX_BATCH * MAX_IN_FLIGHT);
        tokio::spawn(run(db, rx));
        InvoiceWriter { tx }
    }

    /// Inserts `model`; `Ok(false)` when a row with its idempotency key already exists.
    pub async fn insert(&self, model: invoice::Model) -> Result<bool, DbErr> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Pending { model, reply }).await.map_err(|_| DbErr::Custom("invoice writer stopped".into()))?;
        rx.await.map_err(|_| DbErr::Custom("invoice writer dropped the request".into()))?
    }
}

async fn run(db: DatabaseConnection, mut rx: mpsc::Receiver<Pending>) {
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // Wait for a free slot first: rows arriving meanwhile join this batch.
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let db = db.clone();
        tokio::spawn(async move {
            write(&db, batch).await;
            drop(permit);
        });
    }
}

async fn write(db: &DatabaseConnection, batch: Vec<Pending>) {
    match insert_rows(db, batch.iter().map(|p| &p.model)).await {
        Ok(inserted) => {
            for p in batch {
                let _ = p.reply.send(Ok(inserted.contains(&p.model.id)));
            }
        }
        Err(e) if batch.len() == 1 => {
            for p in batch {
                let _ = p.reply.send(Err(e.clone()));
            }
        }
        Err(e) => {
            tracing::warn!(rows = batch.len(), error = %e, "invoice batch failed; writing its rows one by one");
            for p in batch {
                let r = insert_rows(db, std::iter::once(&p.model)).await.map(|ids| ids.contains(&p.model.id));
                let _ = p.reply.send(r);
            }
        }
    }
}

async fn insert_rows<'a>(
    db: &DatabaseConnection,
    rows: impl Iterator<Item = &'a invoice::Model>,
) -> Result<HashSet<Uuid>, DbErr> {
    let models = rows.map(|m| invoice::ActiveModel::from(m.clone()));
    match invoice::Entity::insert_many(models).on_conflict(on_conflict()).exec_with_returning_keys(db).await {
        Ok(ids) => Ok(ids.into_iter().collect()),
        Err(DbErr::RecordNotInserted) => Ok(HashSet::new()),
        Err(e) => Err(e),
    }
}
