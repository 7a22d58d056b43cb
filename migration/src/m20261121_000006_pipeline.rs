use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000006_pipeline"
    }
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    MerchantId,
    Environment,
    EventType,
    DedupeKey,
    Payload,
    CreatedAt,
    DispatchedAt,
}

#[derive(DeriveIden)]
enum SandboxChains {
    Table,
    GateId,
    Height,
    AdvancedAt,
}

#[derive(DeriveIden)]
enum SandboxTransfers {
    Table,
    Id,
    GateId,
    TxHash,
    OutputIndex,
    AddressKey,
    Amount,
    BlockHeight,
    ReversedAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ScanCursors {
    Table,
    Environment,
    GateId,
    NextHeight,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    ReversedAt,
    CheckedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        // The event outbox: written in the transaction of the change that caused the event.
        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .col(ColumnDef::new(Events::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Events::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(Events::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Events::EventType).string_len(40).not_null())
                    .col(ColumnDef::new(Events::DedupeKey).string_len(200).not_null().unique_key())
                    .col(ColumnDef::new(Events::Payload).json().not_null())
                    .col(ts(Events::CreatedAt).not_null())
                    .col(ts(Events::DispatchedAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_merchant")
                    .table(Events::Table)
                    .col(Events::MerchantId)
                    .col(Events::Environment)
                    .col(Events::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("idx_events_dispatch").table(Events::Table).col(Events::DispatchedAt).to_owned(),
            )
            .await?;

        // The sandbox chain of the test environment, shared by every process through the database.
        manager
            .create_table(
                Table::create()
                    .table(SandboxChains::Table)
                    .col(ColumnDef::new(SandboxChains::GateId).string_len(32).not_null().primary_key())
                    .col(ColumnDef::new(SandboxChains::Height).big_integer().not_null())
                    .col(ts(SandboxChains::AdvancedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SandboxTransfers::Table)
                    .col(ColumnDef::new(SandboxTransfers::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(SandboxTransfers::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(SandboxTransfers::TxHash).string_len(128).not_null())
                    .col(ColumnDef::new(SandboxTransfers::OutputIndex).big_integer().not_null())
                    .col(ColumnDef::new(SandboxTransfers::AddressKey).string_len(400).not_null())
                    .col(money(db, SandboxTransfers::Amount).not_null())
                    .col(ColumnDef::new(SandboxTransfers::BlockHeight).big_integer().not_null())
                    .col(ts(SandboxTransfers::ReversedAt).null())
                    .col(ts(SandboxTransfers::CreatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_sandbox_transfers_tx")
                    .table(SandboxTransfers::Table)
                    .col(SandboxTransfers::GateId)
                    .col(SandboxTransfers::TxHash)
                    .col(SandboxTransfers::OutputIndex)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_sandbox_transfers_block")
                    .table(SandboxTransfers::Table)
                    .col(SandboxTransfers::GateId)
                    .col(SandboxTransfers::BlockHeight)
                    .to_owned(),
            )
            .await?;

        // Where each gate's scanner resumes.
        manager
            .create_table(
                Table::create()
                    .table(ScanCursors::Table)
                    .col(ColumnDef::new(ScanCursors::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(ScanCursors::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(ScanCursors::NextHeight).big_integer().not_null())
                    .col(ts(ScanCursors::UpdatedAt).not_null())
                    .primary_key(Index::create().col(ScanCursors::Environment).col(ScanCursors::GateId))
                    .to_owned(),
            )
            .await?;

        for col in [ts(Payments::ReversedAt).null().to_owned(), ts(Payments::CheckedAt).null().to_owned()] {
            manager.alter_table(Table::alter().table(Payments::Table).add_column(col).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            Events::Table.into_iden(),
            SandboxChains::Table.into_iden(),
            SandboxTransfers::Table.into_iden(),
            ScanCursors::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        for c in [Payments::ReversedAt.into_iden(), Payments::CheckedAt.into_iden()] {
            manager.alter_table(Table::alter().table(Payments::Table).drop_column(c).to_owned()).await?;
        }
        Ok(())
    }
}
