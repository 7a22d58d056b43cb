//! Finding an invoice by the merchant's own reference (`GET /v1/invoices?external_id=…`, the
//! dashboard's filter): an index on `(merchant_id, environment, external_id)` of the invoices that
//! have one, so the lookup and its count read the matching rows, not the merchant's whole list.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000031_invoice_external_id"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX IF NOT EXISTS idx_invoices_external_id ON invoices (merchant_id, environment, external_id) \
                 WHERE external_id IS NOT NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.get_connection().execute_unprepared("DROP INDEX IF EXISTS idx_invoices_external_id").await?;
        Ok(())
    }
}
