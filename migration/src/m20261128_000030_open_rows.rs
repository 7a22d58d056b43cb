//! Work proportional to what is open, not to history: partial indexes holding only the rows a
//! background sweep looks for. The invoice expiry sweeps read pending invoices by `expires_at`
//! and drafts by `draft_expires_at`; the webhook dispatcher reads undispatched events oldest
//! first; retention reads the webhook attempts still holding a response excerpt; the tracker's
//! sweeper reads the payments still watched. A year of paid, expired and dispatched rows is not in these indexes at all. The full
//! index on `events.dispatched_at`, which only the dispatcher read, is dropped: it held every
//! event ever written, and every dispatch rewrote an entry of it. The payer e-mail sweep's and
//! the settlement converter's indexes are narrowed to the rows they look for.
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
/// The gates whose confirmation is final (Solana, XRP: `workers::pipeline::final_at_confirmation`,
/// whose test checks this list against the gates).
pub const FINAL_AT_CONFIRMATION: [&str; 3] = ["solana", "solana_usdc", "xrp"];
/// Payments the confirmation tracker may still have to look at: unconfirmed, with a check asked
/// for, or confirmed short of their final depth (their required confirmations where those are
/// final, else twice them). A payment past its final depth, with no check asked for, is history.
pub const OPEN_PAYMENTS_WATCHED: &str = "(status = 'confirming' OR next_check_at IS NOT NULL \
    OR confirmations < required_confirmations \
    OR (confirmations < required_confirmations * 2 AND gate_id NOT IN ('solana', 'solana_usdc', 'xrp')))";

const INDEXES: [(&str, &str, &str, &str); 5] = [
    ("idx_invoices_pending_expiry", "invoices", "expires_at", OPEN_PENDING),
    ("idx_invoices_draft_expiry", "invoices", "draft_expires_at", OPEN_DRAFT),
    ("idx_events_undispatched", "events", "created_at", OPEN_UNDISPATCHED),
    ("idx_webhook_attempts_bodies", "webhook_attempts", "started_at", OPEN_ATTEMPT_BODIES),
    ("idx_payments_watched", "payments", "checked_at", OPEN_PAYMENTS_WATCHED),
];

/// Indexes that were full and are now partial: the full one (name, column), the partial one
/// (name, column, predicate), their table.
type Narrowed = ((&'static str, &'static str), (&'static str, &'static str, &'static str), &'static str);
const NARROWED: [Narrowed; 2] = [
    (
        ("idx_invoices_email_due", "email_due_at"),
        ("idx_invoices_email_open", "email_due_at", "email_due_at IS NOT NULL"),
        "invoices",
    ),
    (
        ("idx_payments_uncredited", "credited_at"),
        ("idx_payments_uncredited_open", "detected_at", "credited_at IS NULL"),
        "payments",
    ),
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
        // Two full indexes become partial: the payer e-mails still due (most invoices never have
        // one, and each new invoice wrote a NULL entry), and the payments not credited yet,
        // oldest detected first (the settlement converter's read).
        for ((old, _), (name, column, predicate), table) in NARROWED {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {old}")).await?;
            db.execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} ({column}) WHERE {predicate}"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, ..) in INDEXES {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        db.execute_unprepared("CREATE INDEX IF NOT EXISTS idx_events_dispatch ON events (dispatched_at)").await?;
        for ((old, column), (name, ..), table) in NARROWED {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
            db.execute_unprepared(&format!("CREATE INDEX IF NOT EXISTS {old} ON {table} ({column})")).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watched_predicate_names_the_final_gates() {
        let list = FINAL_AT_CONFIRMATION.map(|g| format!("'{g}'")).join(", ");
        assert!(OPEN_PAYMENTS_WATCHED.contains(&format!("NOT IN ({list})")), "{OPEN_PAYMENTS_WATCHED}");
    }
}
