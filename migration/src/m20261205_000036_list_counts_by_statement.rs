//! The list counters' deltas for changed and deleted rows, appended once per statement on
//! PostgreSQL, grouped by counter key, as inserts already were: a row trigger ran two `INSERT`s
//! per row whose key changed, so a batch that moves 2,000 invoices of one merchant from
//! `confirming` to `paid` appended 4,000 delta rows (and the fold then read and deleted them),
//! where two say the same (-2,000 and +2,000).
//!
//! An update's rows are netted per key: each row's key before counts -1, its key after +1, and a
//! key whose sum is 0 appends nothing, so a row whose counted columns did not change (most
//! updates: an amount, a time, an attempt) leaves no delta, as the row trigger's `WHEN` did.
//! PostgreSQL does not take a column list on a trigger with transition tables, so the statement
//! trigger runs for every update of the table; it reads the statement's rows in memory and
//! groups them, which costs less than one `INSERT` per row whose key changes.
//!
//! SQLite has no statement triggers; its row triggers (`list_counts::Counted::trigger_sql`)
//! stay.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

use crate::m20261128_000032_list_counts::{COUNTED, Counted, KEY_COLUMNS};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000036_list_counts_by_statement"
    }
}

/// The key columns of a delta row, in the order the statements below select them.
fn delta_columns() -> String {
    format!("merchant_id, environment, list, {}", KEY_COLUMNS.join(", "))
}

/// `SELECT <key of each row of source>, <n>` with the key's columns named as a delta's.
fn keyed_rows(c: &Counted, source: &str, n: i32) -> String {
    let names = ["merchant_id", "environment", "list"].into_iter().chain(KEY_COLUMNS);
    let exprs: Vec<String> = c
        .key_exprs(DatabaseBackend::Postgres, source)
        .into_iter()
        .zip(names)
        .map(|(e, name)| format!("{e} AS {name}"))
        .collect();
    format!("SELECT {}, {n} AS n FROM {source}", exprs.join(", "))
}

/// The statement triggers of one counted list (PostgreSQL).
pub(crate) fn statement_trigger_sql(c: &Counted) -> Vec<String> {
    let (list, table, cols) = (c.list, c.table, delta_columns());
    let grouped = |rows: String| {
        format!(
            "INSERT INTO list_count_deltas ({cols}, n)
    SELECT {cols}, SUM(n) FROM ({rows}) AS d
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 HAVING SUM(n) <> 0;"
        )
    };
    let changed = grouped(format!("{} UNION ALL {}", keyed_rows(c, "old_rows", -1), keyed_rows(c, "new_rows", 1)));
    let removed = grouped(keyed_rows(c, "old_rows", -1));
    let function = |name: &str, body: &str| {
        format!(
            "CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    {body}
    RETURN NULL;
END
$f$"
        )
    };
    vec![
        function(&format!("list_count_{list}_changed"), &changed),
        function(&format!("list_count_{list}_removed"), &removed),
        format!("DROP TRIGGER IF EXISTS list_count_{list}_keys ON {table}"),
        format!("DROP TRIGGER IF EXISTS list_count_{list}_rows ON {table}"),
        format!("DROP FUNCTION IF EXISTS list_count_{list}()"),
        format!(
            "CREATE TRIGGER list_count_{list}_changed AFTER UPDATE ON {table} \
             REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows \
             FOR EACH STATEMENT EXECUTE FUNCTION list_count_{list}_changed()"
        ),
        format!(
            "CREATE TRIGGER list_count_{list}_removed AFTER DELETE ON {table} \
             REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_count_{list}_removed()"
        ),
    ]
}

/// Back to the row triggers of `list_counts` (PostgreSQL).
fn row_trigger_sql(c: &Counted) -> Vec<String> {
    let (list, table) = (c.list, c.table);
    let mut out = vec![
        format!("DROP TRIGGER IF EXISTS list_count_{list}_changed ON {table}"),
        format!("DROP TRIGGER IF EXISTS list_count_{list}_removed ON {table}"),
        format!("DROP FUNCTION IF EXISTS list_count_{list}_changed()"),
        format!("DROP FUNCTION IF EXISTS list_count_{list}_removed()"),
    ];
    // `trigger_sql` recreates the insert trigger too (`CREATE OR REPLACE` its function, the
    // trigger dropped first).
    out.push(format!("DROP TRIGGER IF EXISTS list_count_{list}_added ON {table}"));
    out.extend(c.trigger_sql(DatabaseBackend::Postgres));
    out
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DatabaseBackend::Postgres {
            return Ok(());
        }
        // One transaction on PostgreSQL (the migrator's): no write falls between the old
        // triggers and the new ones.
        let db = manager.get_connection();
        for c in COUNTED {
            for sql in statement_trigger_sql(&c) {
                db.execute_unprepared(&sql).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DatabaseBackend::Postgres {
            return Ok(());
        }
        let db = manager.get_connection();
        for c in COUNTED {
            for sql in row_trigger_sql(&c) {
                db.execute_unprepared(&sql).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_nets_each_rows_old_key_against_its_new_one() {
        for c in COUNTED {
            let sql = statement_trigger_sql(&c).join("\n");
            assert!(sql.contains("REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"), "{}", c.list);
            assert!(sql.contains("HAVING SUM(n) <> 0"), "{}", c.list);
            for col in ["merchant_id", "environment"].into_iter().chain(c.status).chain(c.kind) {
                assert!(sql.contains(&format!("old_rows.{col}")), "{} ignores {col}", c.list);
                assert!(sql.contains(&format!("new_rows.{col}")), "{} ignores {col}", c.list);
            }
        }
    }
}
