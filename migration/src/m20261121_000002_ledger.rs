use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000002_ledger"
    }
}

#[derive(DeriveIden)]
enum Balances {
    Table,
    Id,
    MerchantId,
    Environment,
    GateId,
    Available,
    Pending,
    Reserved,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum LedgerEntries {
    Table,
    Id,
    MerchantId,
    Environment,
    GateId,
    Bucket,
    EntryType,
    Amount,
    BalanceAfter,
    ReferenceType,
    ReferenceId,
    Description,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(Balances::Table)
                    .col(ColumnDef::new(Balances::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Balances::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(Balances::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Balances::GateId).string_len(32).not_null())
                    .col(money(db, Balances::Available).not_null())
                    .col(money(db, Balances::Pending).not_null())
                    .col(money(db, Balances::Reserved).not_null())
                    .col(ts(Balances::CreatedAt).not_null())
                    .col(ts(Balances::UpdatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_balances_owner_gate")
                    .table(Balances::Table)
                    .col(Balances::MerchantId)
                    .col(Balances::Environment)
                    .col(Balances::GateId)
                    .unique()
                    .to_owned(),
            )
            .await?;

        // Immutable: rows are only ever inserted, in the transaction of their cause.
        manager
            .create_table(
                Table::create()
                    .table(LedgerEntries::Table)
                    .col(ColumnDef::new(LedgerEntries::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(LedgerEntries::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(LedgerEntries::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(LedgerEntries::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(LedgerEntries::Bucket).string_len(16).not_null())
                    .col(ColumnDef::new(LedgerEntries::EntryType).string_len(32).not_null())
                    .col(money(db, LedgerEntries::Amount).not_null())
                    .col(money(db, LedgerEntries::BalanceAfter).not_null())
                    .col(ColumnDef::new(LedgerEntries::ReferenceType).string_len(32).null())
                    .col(ColumnDef::new(LedgerEntries::ReferenceId).uuid().null())
                    .col(ColumnDef::new(LedgerEntries::Description).text().null())
                    .col(ts(LedgerEntries::CreatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_ledger_owner_gate_time")
                    .table(LedgerEntries::Table)
                    .col(LedgerEntries::MerchantId)
                    .col(LedgerEntries::Environment)
                    .col(LedgerEntries::GateId)
                    .col(LedgerEntries::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_ledger_reference")
                    .table(LedgerEntries::Table)
                    .col(LedgerEntries::ReferenceType)
                    .col(LedgerEntries::ReferenceId)
                    .to_owned(),
            )
            .await?;

        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [LedgerEntries::Table.into_iden(), Balances::Table.into_iden()] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        Ok(())
    }
}
