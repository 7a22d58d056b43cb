//! Unclaimed deposits: money that reached an address of ours but credits no invoice (an XRP
//! payment to the operator's account without a destination tag, or with a tag no invoice
//! holds; another asset or network sent to one of our deposit addresses). The scanner records
//! each once, so the operator sees it (`ops deposits unclaimed`) and refunds it by hand.

use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000019_unclaimed_deposits"
    }
}

#[derive(DeriveIden)]
enum UnclaimedDeposits {
    Table,
    Id,
    Environment,
    GateId,
    TxHash,
    OutputIndex,
    AddressKey,
    Amount,
    BlockHeight,
    Reason,
    SeenAt,
    ResolvedAt,
    Resolution,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(UnclaimedDeposits::Table)
                    .col(ColumnDef::new(UnclaimedDeposits::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(UnclaimedDeposits::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::TxHash).string_len(128).not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::OutputIndex).big_integer().not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::AddressKey).string_len(256).not_null())
                    .col(money(backend, UnclaimedDeposits::Amount).not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::BlockHeight).big_integer().not_null())
                    .col(ColumnDef::new(UnclaimedDeposits::Reason).string_len(24).not_null())
                    .col(ts(UnclaimedDeposits::SeenAt).not_null())
                    .col(ts(UnclaimedDeposits::ResolvedAt).null())
                    .col(ColumnDef::new(UnclaimedDeposits::Resolution).text().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_unclaimed_deposits_transfer")
                    .table(UnclaimedDeposits::Table)
                    .col(UnclaimedDeposits::Environment)
                    .col(UnclaimedDeposits::GateId)
                    .col(UnclaimedDeposits::TxHash)
                    .col(UnclaimedDeposits::OutputIndex)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(UnclaimedDeposits::Table).to_owned()).await
    }
}
