//! Database connection for PostgreSQL or the embedded SQLite file.

use std::str::FromStr;
use std::time::Duration;

use migration::MigratorTrait;
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, SqlxSqliteConnector};

use crate::config::Config;

/// The partial indexes' predicates (`migration::open_rows`): a sweep that should use one repeats
/// its predicate verbatim in its WHERE clause.
pub use migration::open_rows;

pub async fn connect(cfg: &Config) -> anyhow::Result<DatabaseConnection> {
    if cfg.database_url.starts_with("sqlite:") {
        // WAL + busy timeout: readers never block the writer, writers wait instead of failing.
        let opts = SqliteConnectOptions::from_str(&cfg.database_url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(cfg.db.max_connections.min(8))
            .acquire_timeout(Duration::from_secs(cfg.db.acquire_timeout_secs))
            .connect_with(opts)
            .await?;
        Ok(SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
    } else {
        let mut opts = ConnectOptions::new(cfg.database_url.clone());
        opts.max_connections(cfg.db.max_connections)
            .min_connections(cfg.db.min_connections)
            .acquire_timeout(Duration::from_secs(cfg.db.acquire_timeout_secs))
            .sqlx_logging(false);
        Ok(Database::connect(opts).await?)
    }
}

/// A pool of at most `connections` to the PostgreSQL server of `cfg`, opened on first use, for a
/// component that runs on a Tokio runtime of its own (the invoice writer): a connection belongs
/// to the runtime it was opened on, whose I/O driver wakes whoever waits on it, so a component
/// that must not wait for a busy runtime's workers needs connections of its own.
pub async fn connect_own(cfg: &Config, connections: u32) -> Result<DatabaseConnection, sea_orm::DbErr> {
    let mut opts = ConnectOptions::new(cfg.database_url.clone());
    opts.max_connections(connections)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(cfg.db.acquire_timeout_secs))
        .connect_lazy(true)
        .sqlx_logging(false);
    Database::connect(opts).await
}

pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    migration::Migrator::up(db, None).await?;
    Ok(())
}

/// A handle that can open a write transaction: the pool, or a caller's transaction (then the
/// service's transaction is a savepoint inside it), so an operator action and its audit row
/// commit or roll back together (`crate::audit`).
pub trait WriteDb:
    sea_orm::ConnectionTrait + sea_orm::TransactionTrait<Transaction = sea_orm::DatabaseTransaction>
{
}

impl<T> WriteDb for T where
    T: sea_orm::ConnectionTrait + sea_orm::TransactionTrait<Transaction = sea_orm::DatabaseTransaction>
{
}

/// Begins a transaction that will write. On SQLite it is `BEGIN IMMEDIATE`: it takes the write
/// lock up front (waiting under the busy timeout) instead of reading first and failing with
/// `SQLITE_BUSY_SNAPSHOT` when another process committed in between. PostgreSQL ignores the
/// option.
pub async fn begin_write<C>(db: &C) -> Result<sea_orm::DatabaseTransaction, sea_orm::DbErr>
where
    C: sea_orm::TransactionTrait<Transaction = sea_orm::DatabaseTransaction>,
{
    db.begin_with_options(sea_orm::TransactionOptions {
        sqlite_transaction_mode: Some(sea_orm::SqliteTransactionMode::Immediate),
        ..Default::default()
    })
    .await
}

/// Which page of a newest-first list (spec section 8): `limit` rows after skipping `offset`, and
/// (add-only) within the cursors, each the id of a row of the same list: `after` keeps the rows
/// older than it, `before` the rows newer than it. Every combination has one meaning: the rows
/// between the cursors, newest first, walked from `after` (or, with only `before`, from
/// `before` towards newer rows), `offset` of them skipped in that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u64,
    /// Rows skipped: the database reads every row it skips, so a deep offset costs its depth.
    pub offset: u64,
    /// `starting_after`: an index seek, the same cost at any depth.
    pub after: Option<uuid::Uuid>,
    /// `ending_before`.
    pub before: Option<uuid::Uuid>,
}

impl From<(u64, u64)> for PageRequest {
    fn from((limit, offset): (u64, u64)) -> Self {
        PageRequest { limit, offset, after: None, before: None }
    }
}

/// A page with its cursors resolved to their rows' `(created, id)`.
#[derive(Debug, Clone)]
pub struct Position {
    pub offset: u64,
    pub after: Option<(sea_orm::Value, uuid::Uuid)>,
    pub before: Option<(sea_orm::Value, uuid::Uuid)>,
}

impl Position {
    pub fn offset(offset: u64) -> Self {
        Position { offset, after: None, before: None }
    }
}

/// One page and what the list envelope says of it.
#[derive(Debug, Clone)]
pub struct Listed<M> {
    pub rows: Vec<M>,
    /// Rows the list's filter matches in all (whatever the cursors).
    pub total: u64,
    /// Rows skipped, as asked.
    pub offset: u64,
    /// More rows lie beyond this page in the direction of travel: older ones (newer ones when
    /// only `ending_before` was given).
    pub has_more: bool,
}

/// One page of `q`, newest first (`created`, then `id`, both descending, so the order is total),
/// with `total`, how many rows `q` matches in all (`crate::owned::total`: from the list
/// counters where they hold the filter): every list endpoint pages this way. A cursor compares
/// the row value `(created, id)`, which an index on `created` serves as a range seek.
pub async fn newest_first<E, C>(
    db: &C,
    q: sea_orm::Select<E>,
    (created, id): (E::Column, E::Column),
    limit: u64,
    at: Position,
    total: u64,
) -> Result<Listed<E::Model>, sea_orm::DbErr>
where
    E: sea_orm::EntityTrait,
    E::Model: Sync,
    C: sea_orm::ConnectionTrait,
{
    use sea_orm::sea_query::{Expr, ExprTrait};
    use sea_orm::{QueryFilter, QueryOrder};
    let key = || Expr::tuple([Expr::col(created), Expr::col(id)]);
    let row = |(v, i): (sea_orm::Value, uuid::Uuid)| Expr::tuple([Expr::val(v), Expr::val(i)]);
    let Position { offset, after, before } = at;
    let towards_newer = after.is_none() && before.is_some();
    let by_cursor = after.is_some() || before.is_some();
    let mut q = q;
    if let Some(a) = after {
        q = q.filter(key().lt(row(a)));
    }
    if let Some(b) = before {
        q = q.filter(key().gt(row(b)));
    }
    let q = if towards_newer {
        q.order_by_asc(created).order_by_asc(id)
    } else {
        q.order_by_desc(created).order_by_desc(id)
    };
    let (rows, has_more) = if !by_cursor {
        let rows = page_of(db, q, limit, offset).await?;
        (rows, offset.saturating_add(limit) < total)
    } else {
        let mut rows = page_of(db, q, limit.saturating_add(1), offset).await?;
        let more = rows.len() as u64 > limit;
        rows.truncate(limit as usize);
        (rows, more)
    };
    let mut rows = rows;
    if towards_newer {
        rows.reverse();
    }
    Ok(Listed { rows, total, offset, has_more })
}

/// `limit` rows of `q` after `offset`. A first page (no offset, the common case and every
/// cursor page's) has its `LIMIT` written into the statement's text as a number; a page at an
/// offset binds both, as the ORM does.
///
/// Why: PostgreSQL plans a prepared statement whose `LIMIT` is a parameter as if it returned a
/// tenth of the rows it matches, so on a large table its generic plan always costs more than one
/// made for the values and every call is planned afresh (measured on a grown database: a
/// merchant's first page was planned at each of 7 calls; with the number in the text the cached
/// plan is reused from the sixth). A deep `OFFSET` stays bound on purpose: planned generically
/// for an average merchant's list, it chose to sort the whole list of the one that holds half of
/// the invoices (6 requests/s where the bound offset served its pages in 190 ms).
async fn page_of<E, C>(db: &C, q: sea_orm::Select<E>, limit: u64, offset: u64) -> Result<Vec<E::Model>, sea_orm::DbErr>
where
    E: sea_orm::EntityTrait,
    C: sea_orm::ConnectionTrait,
{
    use sea_orm::QuerySelect;
    if offset > 0 {
        return q.limit(limit).offset(offset).all(db).await;
    }
    E::find().from_raw_sql(first_page(db.get_database_backend(), q, limit)).all(db).await
}

/// The statement of a first page of `q`: its `LIMIT` a number in the text, not a parameter.
fn first_page<E: sea_orm::EntityTrait>(
    backend: sea_orm::DatabaseBackend,
    q: sea_orm::Select<E>,
    limit: u64,
) -> sea_orm::Statement {
    use sea_orm::QueryTrait;
    use std::fmt::Write;
    let mut statement = q.build(backend);
    write!(statement.sql, " LIMIT {limit}").expect("writing to a String");
    statement
}

#[cfg(test)]
mod tests {
    use sea_orm::{DatabaseBackend, EntityTrait, QueryFilter, QueryOrder};

    use super::first_page;

    #[test]
    fn a_first_page_has_its_limit_in_the_text_and_binds_only_the_filters() {
        use entity::ledger_entry::{Column, Entity};
        let merchant = uuid::Uuid::nil();
        for backend in [DatabaseBackend::Postgres, DatabaseBackend::Sqlite] {
            let q = Entity::find()
                .filter(sea_orm::ColumnTrait::eq(&Column::MerchantId, merchant))
                .order_by_desc(Column::CreatedAt)
                .order_by_desc(Column::Id);
            let s = first_page(backend, q, 21);
            assert!(s.sql.ends_with(r#""id" DESC LIMIT 21"#), "{backend:?}: {}", s.sql);
            let values = s.values.expect("the merchant is bound").0;
            assert_eq!(values, [sea_orm::Value::from(merchant)], "{backend:?}: only the filter is bound");
        }
    }
}
