use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000008_payout_execution"
    }
}

#[derive(DeriveIden)]
enum Payouts {
    Table,
    SignedTx,
    QueuedAt,
    BroadcastAt,
    CheckedAt,
}

#[derive(DeriveIden)]
enum SandboxBroadcasts {
    Table,
    TxHash,
    GateId,
    Destination,
    DestinationTag,
    Amount,
    Fee,
    Reference,
    BlockHeight,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        // The signed transaction is stored (with its hash in `tx_hash`) before it is broadcast,
        // so a restarted executor re-sends the same transaction instead of making a new one.
        for col in [
            ColumnDef::new(Payouts::SignedTx).text().null().to_owned(),
            ts(Payouts::QueuedAt).null().to_owned(),
            ts(Payouts::BroadcastAt).null().to_owned(),
            ts(Payouts::CheckedAt).null().to_owned(),
        ] {
            manager.alter_table(Table::alter().table(Payouts::Table).add_column(col).to_owned()).await?;
        }
        // Transactions sent on the test environment's sandbox chains.
        manager
            .create_table(
                Table::create()
                    .table(SandboxBroadcasts::Table)
                    .col(ColumnDef::new(SandboxBroadcasts::TxHash).string_len(128).not_null().primary_key())
                    .col(ColumnDef::new(SandboxBroadcasts::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(SandboxBroadcasts::Destination).string_len(200).not_null())
                    .col(ColumnDef::new(SandboxBroadcasts::DestinationTag).string_len(64).null())
                    .col(money(db, SandboxBroadcasts::Amount).not_null())
                    .col(money(db, SandboxBroadcasts::Fee).not_null())
                    .col(ColumnDef::new(SandboxBroadcasts::Reference).string_len(64).not_null())
                    .col(ColumnDef::new(SandboxBroadcasts::BlockHeight).big_integer().not_null())
                    .col(ts(SandboxBroadcasts::CreatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_sandbox_broadcasts_reference")
                    .table(SandboxBroadcasts::Table)
                    .col(SandboxBroadcasts::Reference)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(SandboxBroadcasts::Table).to_owned()).await?;
        for c in [
            Payouts::SignedTx.into_iden(),
            Payouts::QueuedAt.into_iden(),
            Payouts::BroadcastAt.into_iden(),
            Payouts::CheckedAt.into_iden(),
        ] {
            manager.alter_table(Table::alter().table(Payouts::Table).drop_column(c).to_owned()).await?;
        }
        Ok(())
    }
}
