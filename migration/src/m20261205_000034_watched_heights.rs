//! Work proportional to what is open, for the scanner's look at the payments of the blocks it
//! just read: the payments still watched (`OPEN_PAYMENTS_WATCHED`, the tracker sweep's partial
//! index) by gate and block height. After each scan the scanner refreshes the depth of the gate's
//! confirming payments and hands the tracker those the new blocks brought to their required or
//! final depth; both read the gate's payments by height, and without this index PostgreSQL read
//! every payment the gate ever had (through the one-row-per-transfer index, 4,600 rows and 23 ms
//! per call for the test environment's bitcoin payments of the grown benchmark database, 128,000
//! for its live ones), once per block and gate. The queries repeat the predicate verbatim.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

use crate::m20261128_000030_open_rows::OPEN_PAYMENTS_WATCHED;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261205_000034_watched_heights"
    }
}

const INDEX: &str = "idx_payments_watched_heights";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {INDEX} ON payments (environment, gate_id, block_height) \
                 WHERE {OPEN_PAYMENTS_WATCHED}"
            ))
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.get_connection().execute_unprepared(&format!("DROP INDEX IF EXISTS {INDEX}")).await?;
        Ok(())
    }
}
