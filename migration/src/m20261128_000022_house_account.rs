//! The operator's own books (the house account): the ledger takes the house's entry types
//! (`sweep_fee`, `gas_topup`, `conversion_inventory_in`, `conversion_inventory_out`,
//! `house_funding`, `payout_margin`, `payout_gas`). PostgreSQL's `ck_ledger_entries_type` is widened to them; SQLite has no such
//! constraint. The house's merchant row itself is created on first use by the domain
//! (`domain::treasury::ensure_house`), not here.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000022_house_account"
    }
}

const MERCHANT_TYPES: &str = "'invoice_credit','conversion_debit','conversion_credit','payout_reserve','payout_release',\
'payout_debit','payout_fee','network_fee','refund_fee','deposit_reversal','adjustment'";
const HOUSE_TYPES: &str = "'sweep_fee','gas_topup','conversion_inventory_in','conversion_inventory_out','house_funding','payout_margin','payout_gas'";

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
        replace_check(manager, &format!("{MERCHANT_TYPES},{HOUSE_TYPES}")).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        replace_check(manager, MERCHANT_TYPES).await
    }
}
