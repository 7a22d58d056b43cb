//! The house account's `rent_reclaimed` entry type (a swept Solana token account's rent, back in
//! the hot wallet): PostgreSQL's `ck_ledger_entries_type` is widened to it; SQLite has no such
//! constraint.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000024_rent_reclaimed"
    }
}

const TYPES: &str = "'invoice_credit','conversion_debit','conversion_credit','payout_reserve','payout_release',\
'payout_debit','payout_fee','network_fee','refund_fee','deposit_reversal','adjustment',\
'sweep_fee','gas_topup','conversion_inventory_in','conversion_inventory_out','house_funding','payout_margin','payout_gas'";

async fn replace_check(manager: &SchemaManager<'_>, types: &str) -> Result<(), DbErr> {
    if manager.get_database_backend() != DatabaseBackend::Postgres {
        return Ok(());
    }
    let db = manager.get_connection();
    db.execute_unprepared("ALTER TABLE ledger_entries DROP CONSTRAINT IF EXISTS ck_ledger_entries_type").await?;
    db.execute_unprepared(&format!(
        "ALTER TABLE ledger_entries ADD CONSTRAINT ck_ledger_entries_type CHECK (entry_type IN ({types}))"
    ))
    .await?;
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        replace_check(manager, &format!("{TYPES},'rent_reclaimed'")).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        replace_check(manager, TYPES).await
    }
}
