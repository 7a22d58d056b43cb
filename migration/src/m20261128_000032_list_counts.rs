//! A list's total (`meta.pagination.total`, spec section 8) at the cost of a few rows, not of the
//! merchant's history: how many rows of each list each merchant holds in each environment, kept
//! by the database itself.
//!
//! Every insert, delete, and change of a counted column of a listed table appends a delta row
//! (`list_count_deltas`: +1 for the new key, -1 for the old one) from a trigger, in the writing
//! transaction (on PostgreSQL an insert statement appends one delta per key, its rows grouped), so no code path can forget it and no two writers wait on each other (appends
//! take no shared row lock; a counter row updated in place would serialize every writer of one
//! merchant and could deadlock transactions that change several rows). A fold
//! (`domain::list_counts::fold`) moves the deltas into `list_counts` in batches; a reader sums
//! both in one statement, so the total is exact whether or not the fold has run.
//!
//! A counter's key is the list, the merchant and environment, and the columns the list filters by
//! (`COUNTED`; a column a list does not have is `''`). Events are also counted per UTC day, so a
//! time window is summed by day with only its partial first and last day counted row by row; the
//! fold also keeps their all-days total (`day = ''`). A list asked with a filter the counters do
//! not hold (an invoice's `external_id`, a time window on invoices or on the ledger, an event's
//! `invoice_id`) counts its rows, through the index of that filter.
//!
//! The migration creates the triggers before it counts the rows already there, in one
//! transaction on PostgreSQL: creating a trigger waits for the table's open writers, and later
//! writers wait for the migration, so every row is either counted or fires the trigger.
//! A later SQLite migration that rebuilds one of these tables (copy, drop, rename) drops its
//! triggers and must create them again (`trigger_sql`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000032_list_counts"
    }
}

/// The counter columns besides merchant, environment and list, in key order.
pub const KEY_COLUMNS: [&str; 6] = ["status", "gate_id", "currency", "network", "kind", "day"];

/// One counted list: the table and, for each counter column, the table's column it holds (or
/// none: `''`). `day`: counted per UTC day of `created_at` as well.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    pub list: &'static str,
    pub table: &'static str,
    pub status: Option<&'static str>,
    pub gate_id: Option<&'static str>,
    pub currency: Option<&'static str>,
    pub network: Option<&'static str>,
    pub kind: Option<&'static str>,
    pub day: bool,
}

const NONE: Counted =
    Counted { list: "", table: "", status: None, gate_id: None, currency: None, network: None, kind: None, day: false };

/// The merchant-facing paged lists and the filters their counters answer.
pub const COUNTED: [Counted; 7] = [
    Counted {
        list: "invoices",
        table: "invoices",
        status: Some("status"),
        gate_id: Some("gate_id"),
        currency: Some("currency"),
        network: Some("network"),
        ..NONE
    },
    Counted { list: "payouts", table: "payouts", status: Some("status"), ..NONE },
    Counted { list: "refunds", table: "refunds", status: Some("status"), ..NONE },
    Counted {
        list: "static_addresses",
        table: "static_addresses",
        gate_id: Some("gate_id"),
        currency: Some("currency"),
        network: Some("network"),
        ..NONE
    },
    Counted { list: "events", table: "events", kind: Some("event_type"), day: true, ..NONE },
    Counted {
        list: "webhook_deliveries",
        table: "webhook_deliveries",
        status: Some("status"),
        kind: Some("event_type"),
        ..NONE
    },
    Counted { list: "ledger", table: "ledger_entries", gate_id: Some("gate_id"), kind: Some("entry_type"), ..NONE },
];

impl Counted {
    /// The table's columns a counter's key is made of (an update of any of them moves the row
    /// from one counter to another).
    fn sources(&self) -> Vec<&'static str> {
        let mut cols = vec!["merchant_id", "environment"];
        cols.extend([self.status, self.gate_id, self.currency, self.network, self.kind].into_iter().flatten());
        if self.day {
            cols.push("created_at");
        }
        cols
    }

    /// The key values of the row `r` (`NEW`, `OLD` or the table's name), in `KEY_COLUMNS` order.
    fn key_values(&self, backend: DatabaseBackend, r: &str) -> String {
        self.key_exprs(backend, r).join(", ")
    }

    /// The key values of `r` one by one, `merchant_id, environment, list` and then `KEY_COLUMNS`.
    pub(crate) fn key_exprs(&self, backend: DatabaseBackend, r: &str) -> Vec<String> {
        let col = |c: Option<&str>| match c {
            Some(c) => format!("COALESCE(CAST({r}.{c} AS TEXT), '')"),
            None => "''".to_owned(),
        };
        let day = match (self.day, backend) {
            (false, _) => "''".to_owned(),
            (true, DatabaseBackend::Postgres) => format!("to_char({r}.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"),
            // SQLite stores a UTC timestamp as text beginning with its date.
            (true, _) => format!("substr({r}.created_at, 1, 10)"),
        };
        vec![
            format!("{r}.merchant_id"),
            format!("{r}.environment"),
            format!("'{}'", self.list),
            col(self.status),
            col(self.gate_id),
            col(self.currency),
            col(self.network),
            col(self.kind),
            day,
        ]
    }

    fn delta(&self, backend: DatabaseBackend, r: &str, n: i32) -> String {
        format!(
            "INSERT INTO list_count_deltas (merchant_id, environment, list, {}, n) VALUES ({}, {n});",
            KEY_COLUMNS.join(", "),
            self.key_values(backend, r)
        )
    }

    /// The statements that create this list's triggers.
    pub fn trigger_sql(&self, backend: DatabaseBackend) -> Vec<String> {
        let (list, table) = (self.list, self.table);
        let sources = self.sources();
        match backend {
            DatabaseBackend::Postgres => {
                let changed = format!(
                    "({}) IS DISTINCT FROM ({})",
                    sources.iter().map(|c| format!("OLD.{c}")).collect::<Vec<_>>().join(", "),
                    sources.iter().map(|c| format!("NEW.{c}")).collect::<Vec<_>>().join(", ")
                );
                vec![
                    format!(
                        "CREATE OR REPLACE FUNCTION list_count_{list}() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        {}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {}
    END IF;
    RETURN NULL;
END
$f$",
                        self.delta(backend, "OLD", -1),
                        self.delta(backend, "NEW", 1)
                    ),
                    // Inserts are counted once per statement, grouped: a multi-row insert (the
                    // invoice writer's group commit, a batch of events) appends one delta per key.
                    format!(
                        "CREATE OR REPLACE FUNCTION list_count_{list}_added() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO list_count_deltas (merchant_id, environment, list, {}, n)
    {};
    RETURN NULL;
END
$f$",
                        KEY_COLUMNS.join(", "),
                        self.grouped_from(backend, "added")
                    ),
                    format!(
                        "CREATE TRIGGER list_count_{list}_added AFTER INSERT ON {table} \
                         REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION list_count_{list}_added()"
                    ),
                    format!(
                        "CREATE TRIGGER list_count_{list}_rows AFTER DELETE ON {table} \
                         FOR EACH ROW EXECUTE FUNCTION list_count_{list}()"
                    ),
                    format!(
                        "CREATE TRIGGER list_count_{list}_keys AFTER UPDATE OF {} ON {table} \
                         FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION list_count_{list}()",
                        sources.join(", ")
                    ),
                ]
            }
            _ => {
                let changed =
                    sources.iter().map(|c| format!("OLD.{c} IS NOT NEW.{c}")).collect::<Vec<_>>().join(" OR ");
                vec![
                    format!(
                        "CREATE TRIGGER list_count_{list}_insert AFTER INSERT ON {table} BEGIN {} END",
                        self.delta(backend, "NEW", 1)
                    ),
                    format!(
                        "CREATE TRIGGER list_count_{list}_delete AFTER DELETE ON {table} BEGIN {} END",
                        self.delta(backend, "OLD", -1)
                    ),
                    format!(
                        "CREATE TRIGGER list_count_{list}_keys AFTER UPDATE OF {} ON {table} WHEN {changed} BEGIN {} {} END",
                        sources.join(", "),
                        self.delta(backend, "OLD", -1),
                        self.delta(backend, "NEW", 1)
                    ),
                ]
            }
        }
    }

    fn drop_sql(&self, backend: DatabaseBackend) -> Vec<String> {
        let (list, table) = (self.list, self.table);
        match backend {
            DatabaseBackend::Postgres => vec![
                format!("DROP TRIGGER IF EXISTS list_count_{list}_added ON {table}"),
                format!("DROP FUNCTION IF EXISTS list_count_{list}_added()"),
                format!("DROP TRIGGER IF EXISTS list_count_{list}_rows ON {table}"),
                format!("DROP TRIGGER IF EXISTS list_count_{list}_keys ON {table}"),
                format!("DROP FUNCTION IF EXISTS list_count_{list}()"),
            ],
            _ => ["insert", "delete", "keys"]
                .iter()
                .map(|t| format!("DROP TRIGGER IF EXISTS list_count_{list}_{t}"))
                .collect(),
        }
    }

    /// Counts the rows already in the table into `list_counts` (per day and, for a list counted
    /// per day, all days as well). Run on a table whose rows no counter holds yet: after the
    /// triggers are created, or by a bulk load that turned them off (`ops bench-seed`).
    pub fn backfill_sql(&self, backend: DatabaseBackend) -> Vec<String> {
        let cols = format!("merchant_id, environment, list, {}", KEY_COLUMNS.join(", "));
        let mut out = vec![format!("INSERT INTO list_counts ({cols}, n) {}", self.grouped_sql(backend, self.day))];
        if self.day {
            out.push(format!("INSERT INTO list_counts ({cols}, n) {}", self.grouped_sql(backend, false)));
        }
        out
    }

    /// The table's rows counted by counter key (per day if `dated`), as
    /// `merchant_id, environment, list, status, gate_id, currency, network, kind, day, n`.
    pub fn grouped_sql(&self, backend: DatabaseBackend, dated: bool) -> String {
        Counted { day: dated, ..*self }.grouped_from(backend, self.table)
    }

    /// [`Counted::grouped_sql`] of the rows of `source` (the table, or a trigger's transition table).
    fn grouped_from(&self, backend: DatabaseBackend, source: &str) -> String {
        let names = ["merchant_id", "environment", "list"].into_iter().chain(KEY_COLUMNS);
        let exprs: Vec<String> =
            self.key_exprs(backend, source).into_iter().zip(names).map(|(e, n)| format!("{e} AS {n}")).collect();
        format!("SELECT {}, COUNT(*) AS n FROM {source} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9", exprs.join(", "))
    }
}

#[derive(DeriveIden)]
enum ListCounts {
    Table,
    MerchantId,
    Environment,
    List,
    N,
}

#[derive(DeriveIden)]
enum ListCountDeltas {
    Table,
    Id,
    MerchantId,
    Environment,
    List,
    N,
}

fn key(name: &str) -> ColumnDef {
    ColumnDef::new(Alias::new(name)).string_len(64).not_null().default("").to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let mut counts = Table::create();
        counts
            .table(ListCounts::Table)
            .if_not_exists()
            .col(ColumnDef::new(ListCounts::MerchantId).uuid().not_null())
            .col(ColumnDef::new(ListCounts::Environment).string_len(8).not_null())
            .col(ColumnDef::new(ListCounts::List).string_len(32).not_null());
        for c in KEY_COLUMNS {
            counts.col(key(c));
        }
        counts.col(ColumnDef::new(ListCounts::N).big_integer().not_null());
        let mut pk = Index::create();
        pk.col(ListCounts::MerchantId).col(ListCounts::Environment).col(ListCounts::List);
        for c in KEY_COLUMNS {
            pk.col(Alias::new(c));
        }
        counts.primary_key(&mut pk);
        manager.create_table(counts.to_owned()).await?;

        let mut deltas = Table::create();
        deltas
            .table(ListCountDeltas::Table)
            .if_not_exists()
            .col(ColumnDef::new(ListCountDeltas::Id).big_integer().not_null().auto_increment().primary_key())
            .col(ColumnDef::new(ListCountDeltas::MerchantId).uuid().not_null())
            .col(ColumnDef::new(ListCountDeltas::Environment).string_len(8).not_null())
            .col(ColumnDef::new(ListCountDeltas::List).string_len(32).not_null());
        for c in KEY_COLUMNS {
            deltas.col(key(c));
        }
        deltas.col(ColumnDef::new(ListCountDeltas::N).integer().not_null());
        manager.create_table(deltas.to_owned()).await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_list_count_deltas_list")
                    .table(ListCountDeltas::Table)
                    .col(ListCountDeltas::MerchantId)
                    .col(ListCountDeltas::Environment)
                    .col(ListCountDeltas::List)
                    .to_owned(),
            )
            .await?;
        // The events list filtered by type: its page, and the partial days of a window's count.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX IF NOT EXISTS idx_events_merchant_type ON events (merchant_id, environment, event_type, created_at)",
            )
            .await?;

        let db = manager.get_connection();
        for c in COUNTED {
            for sql in c.trigger_sql(backend) {
                db.execute_unprepared(&sql).await?;
            }
        }
        for c in COUNTED {
            for sql in c.backfill_sql(backend) {
                db.execute_unprepared(&sql).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let db = manager.get_connection();
        for c in COUNTED {
            for sql in c.drop_sql(backend) {
                db.execute_unprepared(&sql).await?;
            }
        }
        db.execute_unprepared("DROP INDEX IF EXISTS idx_events_merchant_type").await?;
        manager.drop_table(Table::drop().table(ListCountDeltas::Table).if_exists().to_owned()).await?;
        manager.drop_table(Table::drop().table(ListCounts::Table).if_exists().to_owned()).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counted_list_has_a_distinct_name_and_counts_what_it_filters() {
        let mut names: Vec<&str> = COUNTED.iter().map(|c| c.list).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COUNTED.len());
        for c in COUNTED {
            let sql = c.trigger_sql(DatabaseBackend::Postgres).join("\n");
            for col in c.sources() {
                assert!(sql.contains(&format!("OLD.{col}")), "{} trigger ignores {col}", c.list);
            }
        }
    }
}
