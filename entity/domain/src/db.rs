//! Database connection for PostgreSQL or the embedded SQLite file.

use std::str::FromStr;
use std::time::Duration;

use migration::MigratorTrait;
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sea_orm::{ConnectOptions, Database, DatabaseConnection, SqlxSqliteConnector};

use crate::config::Config;

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

/// One page of `q`, newest first (`created`, then `id`, both descending, so the order is total),
/// and how many rows `q` matches in all: every list endpoint pages this way.
pub async fn newest_first<E, C>(
    db: &C,
    q: sea_orm::Select<E>,
    (created, id): (E::Column, E::Column),
    limit: u64,
    offset: u64,
) -> Result<(Vec<E::Model>, u64), sea_orm::DbErr>
where
    E: sea_orm::EntityTrait,
    E::Model: Sync,
    C: sea_orm::ConnectionTrait,
{
    use sea_orm::{PaginatorTrait, QueryOrder, QuerySelect};
    let total = q.clone().count(db).await?;
    let rows = q.order_by_desc(created).order_by_desc(id).limit(limit).offset(offset).all(db).await?;
    Ok((rows, total))
}
