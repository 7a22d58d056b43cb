//! Work proportional to what is open, for webhook deliveries: the deliverer's reads of open
//! deliveries go through one partial index that holds only the pending and retrying ones,
//! `idx_webhook_deliveries_open (order_key, merchant_id, environment, event_created_at)`, so a
//! year of delivered and dead rows costs neither those reads nor the writes.
//!
//! - "Is an earlier delivery about the same invoice or payout still open?" (the claim's ordering
//!   guard, the refused claim's look for what it waits behind, the dispatcher's marking of the
//!   deliveries that must wait) reads it by key; the key's equalities come first, since SQLite,
//!   without statistics, prefers the index with the most of them and else took the merchant's
//!   index and its whole history.
//! - The stale sweep (open deliveries due for a while that no job holds) reads it whole: what is
//!   open, not the history.
//!
//! It replaces two full indexes: `(status, next_attempt_at)`, which only the stale sweep read and
//! which every delivery's move to `succeeded` gave a new entry, and `(order_key,
//! event_created_at)`. With statistics from a database where nearly every delivery is closed,
//! PostgreSQL read the look by key through the full status index, every open delivery of every
//! merchant per call (3,400 buffers, 4.4 ms, on a grown database with a few thousand deliveries
//! in flight). One partial index, not two: with two, both estimated nearly empty, the planner
//! answered the dispatcher's look by key by reading all of the other one (8 ms at 30,000 open).
//!
//! The queries repeat [`OPEN_DELIVERIES`] verbatim (see the `open_rows` migration: a partial
//! index is used only where the query's WHERE clause provably implies its predicate, which a
//! bound `status IN ($1, $2)` does not).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000033_open_deliveries"
    }
}

/// Deliveries still to be attempted (`DeliveryStatus::is_open`).
pub const OPEN_DELIVERIES: &str = "status IN ('pending', 'retrying')";

/// The full indexes replaced: (name, columns).
const FULL: [(&str, &str); 2] = [
    ("idx_webhook_deliveries_due", "status, next_attempt_at"),
    ("idx_webhook_deliveries_order", "order_key, event_created_at"),
];
/// Their partial replacement.
const OPEN_INDEX: &str = "idx_webhook_deliveries_open";
const OPEN_COLUMNS: &str = "order_key, merchant_id, environment, event_created_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(&format!(
            "CREATE INDEX IF NOT EXISTS {OPEN_INDEX} ON webhook_deliveries ({OPEN_COLUMNS}) WHERE {OPEN_DELIVERIES}"
        ))
        .await?;
        for (name, _) in FULL {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for (name, columns) in FULL {
            db.execute_unprepared(&format!("CREATE INDEX IF NOT EXISTS {name} ON webhook_deliveries ({columns})"))
                .await?;
        }
        db.execute_unprepared(&format!("DROP INDEX IF EXISTS {OPEN_INDEX}")).await?;
        Ok(())
    }
}
