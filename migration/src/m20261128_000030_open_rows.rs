//! Work proportional to what is open, not to history: partial indexes holding only the rows a
//! background sweep looks for. The invoice expiry sweeps read pending invoices by `expires_at`
//! and drafts by `draft_expires_at`; the webhook dispatcher reads undispatched events oldest
//! first; retention reads the webhook attempts still holding a response excerpt. A year of paid, expired and dispatched rows is not in these indexes at all. The full
//! index on `events.dispatched_at`, which only the dispatcher read, is dropped: it held every
//! event ever written, and every dispatch rewrote an entry of it.
//!
//! The predicates are literal SQL (`OPEN_*`), and the queries that use an index repeat its
//! predicate verbatim: PostgreSQL and SQLite use a partial index only where the query's WHERE
//! clause provably implies the index's, which a bound parameter (`status = $1`) does not.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000030_open_rows"
    }
}

/// Invoices still waiting for payment (the expiry sweep's rows).
pub const OPEN_PENDING: &str = "status = 'pending'";
/// Drafts not yet activated (the draft expiry sweep's rows).
pub const OPEN_DRAFT: &str = "status = 'draft'";
/// Events the dispatcher has not fanned out yet.
pub const OPEN_UNDISPATCHED: &str = "dispatched_at IS NULL";
/// Webhook attempts still holding the endpoint's answer (retention clears it after a while).
pub const OPEN_ATTEMPT_BODIES: &str = "response_body IS NOT NULL";

const INDEXES: [(&str, &str, &str, &str); 4] = [
    ("idx_invoices_pending_expiry", "invoices", "expires_at", OPEN_PENDING),
    ("idx_invoices_draft_expiry", "invoices", "draft_expires_at", OPEN_DRAFT),
    ("idx_events_undispatched", "events", "created_at", OPEN_UNDISPATCHED),
    ("idx_webhook_attempts_bodies", "webhook_attempts", "started_at", OPEN_ATTEMPT_BODIES),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, table, column, predicate) in INDEXES {
            db.execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} ({column}) WHERE {predicate}"
            ))
            .await?;
        }
        db.execute_unprepared("DROP INDEX IF EXISTS idx_events_dispatch").await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, ..) in INDEXES {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        db.execute_unprepared("CREATE INDEX IF NOT EXISTS idx_events_dispatch ON events (dispatched_at)").await?;
        Ok(())
    }
}
