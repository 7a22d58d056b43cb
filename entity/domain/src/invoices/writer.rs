//! Group commit for invoice inserts.
//!
//! Creating an invoice is one INSERT, and under load PostgreSQL spends most of its time on
//! per-statement and per-commit work rather than on the row. Requests hand their row to this
//! writer; it takes whatever has queued up while the previous batch was being written (no
//! artificial delay: an idle writer sends a lone row at once) and stores it with one statement
//! (`domain::bulk`: on PostgreSQL one `INSERT … SELECT … FROM UNNEST` of one array per column,
//! whose text does not change with the batch's size; on SQLite a multi-row `INSERT`), skipping
//! on the idempotency key's partial unique index and returning the ids inserted. Each caller
//! learns whether its own row went in (`false` = its idempotency key already exists). If a batch
//! fails, its rows are retried one by one so one bad row cannot fail the others.
//!
//! One batch is written at a time: a row that arrives meanwhile joins the next one. Measured
//! with `ops bench` (docs/benchmarks.md), two or four batches in flight at once were slower
//! (fewer rows per statement, more statements and commits for the same invoices), not faster.
//!
//! On PostgreSQL the writer runs on a thread of its own, with a single-threaded runtime and a
//! connection of its own: every invoice created waits for it, and as a task among the request
//! handlers it waited for a busy runtime's workers at each step of each batch (about 2.1 ms a
//! batch where PostgreSQL spent 0.8). On SQLite (the embedded default, one writer at a time in
//! any case) it is a task on the caller's runtime over the shared pool.

use std::collections::HashSet;

use entity::invoice;
use sea_orm::{DatabaseConnection, DbBackend, DbErr};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::config::Config;

/// Rows per statement at most.
const MAX_BATCH: usize = 64;

struct Pending {
    model: invoice::Model,
    reply: oneshot::Sender<Result<bool, DbErr>>,
}

#[derive(Clone)]
pub struct InvoiceWriter {
    tx: mpsc::Sender<Pending>,
}

impl InvoiceWriter {
    /// Starts the writer: on PostgreSQL on a thread of its own with its own connection to the
    /// server of `config` (opened on the first batch), else as a task on the current runtime
    /// writing through `db`. It stops once every handle is dropped.
    pub fn spawn(db: DatabaseConnection, config: &Config) -> InvoiceWriter {
        let (tx, rx) = mpsc::channel(16 * MAX_BATCH);
        match db.get_database_backend() {
            DbBackend::Postgres => on_own_thread(config.clone(), rx),
            _ => {
                tokio::spawn(run(db, rx));
            }
        }
        InvoiceWriter { tx }
    }

    /// Inserts `model`; `Ok(false)` when a row with its idempotency key already exists.
    pub async fn insert(&self, model: invoice::Model) -> Result<bool, DbErr> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Pending { model, reply }).await.map_err(|_| DbErr::Custom("invoice writer stopped".into()))?;
        rx.await.map_err(|_| DbErr::Custom("invoice writer dropped the request".into()))?
    }
}

/// Runs the writer on a thread named `invoice-writer` with a single-threaded runtime and one
/// connection of its own to the server of `config`. Should any of them fail to start, the
/// handles' inserts fail ("invoice writer stopped") and the error is logged.
fn on_own_thread(config: Config, rx: mpsc::Receiver<Pending>) {
    let writer = move || -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let runtime = runtime.map_err(|e| format!("runtime: {e}"))?;
        runtime.block_on(async move {
            let own = crate::db::connect_own(&config, 1).await.map_err(|e| format!("pool: {e}"))?;
            run(own, rx).await;
            Ok(())
        })
    };
    let started = std::thread::Builder::new().name("invoice-writer".into()).spawn(move || {
        if let Err(e) = writer() {
            tracing::error!(error = %e, "the invoice writer could not start");
        }
    });
    if let Err(e) = started {
        tracing::error!(error = %e, "the invoice writer's thread did not start");
    }
}

async fn run(db: DatabaseConnection, mut rx: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // Rows that arrived while the previous batch was being written make the next one.
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        write(&db, std::mem::take(&mut batch)).await;
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
    use invoice::Column::{Environment, Id, IdempotencyKey, MerchantId};
    // The partial unique index on (merchant_id, environment, idempotency_key) where a key is set.
    let ids: Vec<Uuid> = crate::bulk::insert_returning_partial::<invoice::Entity, _, _>(
        db,
        rows.cloned().collect(),
        &[MerchantId, Environment, IdempotencyKey],
        IdempotencyKey,
        Id,
    )
    .await?;
    Ok(ids.into_iter().collect())
}
