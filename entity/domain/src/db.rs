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

/// Which page of a newest-first list (spec section 8): `limit` rows from `offset`, or (add-only)
/// the rows right after or right before one row of the same list, by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub limit: u64,
    pub at: PageAt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageAt {
    /// Skip this many rows (`offset`): the database reads every row it skips, so a deep offset
    /// costs its depth.
    Offset(u64),
    /// The rows older than this one (`starting_after`): an index seek, the same cost at any
    /// depth.
    After(uuid::Uuid),
    /// The rows newer than this one (`ending_before`), shown newest first as every page is.
    Before(uuid::Uuid),
}

impl From<(u64, u64)> for PageRequest {
    fn from((limit, offset): (u64, u64)) -> Self {
        PageRequest { limit, at: PageAt::Offset(offset) }
    }
}

/// Where a page starts once a cursor is resolved to its row's `(created, id)`.
#[derive(Debug, Clone)]
pub enum Position {
    Offset(u64),
    After(sea_orm::Value, uuid::Uuid),
    Before(sea_orm::Value, uuid::Uuid),
}

/// One page and what the list envelope says of it.
#[derive(Debug, Clone)]
pub struct Listed<M> {
    pub rows: Vec<M>,
    /// Rows the list's filter matches in all.
    pub total: u64,
    /// Rows skipped (`offset`); 0 for a page found by cursor, whose depth is not counted.
    pub offset: u64,
    /// More rows lie beyond this page in the direction of travel: older ones after an offset or
    /// `starting_after` page, newer ones after an `ending_before` page.
    pub has_more: bool,
}

/// One page of `q`, newest first (`created`, then `id`, both descending, so the order is total),
/// and how many rows `q` matches in all: every list endpoint pages this way. A cursor position
/// compares the row value `(created, id)`, which an index on `created` serves as a range seek.
pub async fn newest_first<E, C>(
    db: &C,
    q: sea_orm::Select<E>,
    (created, id): (E::Column, E::Column),
    limit: u64,
    at: Position,
) -> Result<Listed<E::Model>, sea_orm::DbErr>
where
    E: sea_orm::EntityTrait,
    E::Model: Sync,
    C: sea_orm::ConnectionTrait,
{
    use sea_orm::sea_query::{Expr, ExprTrait};
    use sea_orm::{PaginatorTrait, QueryFilter, QueryOrder, QuerySelect};
    let total = q.clone().count(db).await?;
    let key = || Expr::tuple([Expr::col(created), Expr::col(id)]);
    let at_row = |v: sea_orm::Value, i: uuid::Uuid| Expr::tuple([Expr::val(v), Expr::val(i)]);
    let (rows, offset, has_more) = match at {
        Position::Offset(offset) => {
            let rows = q.order_by_desc(created).order_by_desc(id).limit(limit).offset(offset).all(db).await?;
            (rows, offset, offset.saturating_add(limit) < total)
        }
        Position::After(c, i) => {
            let mut rows = q
                .filter(key().lt(at_row(c, i)))
                .order_by_desc(created)
                .order_by_desc(id)
                .limit(limit + 1)
                .all(db)
                .await?;
            let more = rows.len() as u64 > limit;
            rows.truncate(limit as usize);
            (rows, 0, more)
        }
        Position::Before(c, i) => {
            let mut rows = q
                .filter(key().gt(at_row(c, i)))
                .order_by_asc(created)
                .order_by_asc(id)
                .limit(limit + 1)
                .all(db)
                .await?;
            let more = rows.len() as u64 > limit;
            rows.truncate(limit as usize);
            rows.reverse();
            (rows, 0, more)
        }
    };
    Ok(Listed { rows, total, offset, has_more })
}
