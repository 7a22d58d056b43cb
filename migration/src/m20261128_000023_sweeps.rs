//! Sweeps: the operator's own funds moved from deposit addresses to its hot wallet or cold
//! address. Each transaction (a token address's gas top-up, the sweep itself) is stored signed
//! before it is sent. At most one open sweep per (gate, address): a partial unique index, on
//! both databases. `parent_id`: the token sweep whose gas top-up's leftover a native sweep
//! returns to the hot wallet.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000023_sweeps"
    }
}

#[derive(DeriveIden)]
enum Sweeps {
    Table,
    Id,
    Environment,
    GateId,
    Address,
    DerivationIndex,
    Destination,
    PlannedAmount,
    Amount,
    Status,
    TopupAmount,
    TopupTxHash,
    TopupSignedTx,
    TxHash,
    SignedTx,
    Fee,
    FailureReason,
    ParentId,
    CreatedAt,
    UpdatedAt,
    ConfirmedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(Sweeps::Table)
                    .col(ColumnDef::new(Sweeps::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Sweeps::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Sweeps::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(Sweeps::Address).string_len(128).not_null())
                    .col(ColumnDef::new(Sweeps::DerivationIndex).big_integer().not_null())
                    .col(ColumnDef::new(Sweeps::Destination).string_len(128).not_null())
                    .col(money(db, Sweeps::PlannedAmount).not_null())
                    .col(money(db, Sweeps::Amount).null())
                    .col(ColumnDef::new(Sweeps::Status).string_len(16).not_null())
                    .col(money(db, Sweeps::TopupAmount).null())
                    .col(ColumnDef::new(Sweeps::TopupTxHash).string_len(128).null())
                    .col(ColumnDef::new(Sweeps::TopupSignedTx).text().null())
                    .col(ColumnDef::new(Sweeps::TxHash).string_len(128).null())
                    .col(ColumnDef::new(Sweeps::SignedTx).text().null())
                    .col(money(db, Sweeps::Fee).null())
                    .col(ColumnDef::new(Sweeps::FailureReason).text().null())
                    .col(ColumnDef::new(Sweeps::ParentId).uuid().null())
                    .col(ts(Sweeps::CreatedAt).not_null())
                    .col(ts(Sweeps::UpdatedAt).not_null())
                    .col(ts(Sweeps::ConfirmedAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(Index::create().name("ix_sweeps_status").table(Sweeps::Table).col(Sweeps::Status).to_owned())
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX ux_sweeps_open ON sweeps (gate_id, address) \
                 WHERE status IN ('planned','topping_up','sending')",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(Sweeps::Table).to_owned()).await
    }
}
