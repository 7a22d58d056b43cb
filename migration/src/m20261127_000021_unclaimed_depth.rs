//! Unclaimed deposits are followed on their chain until they are final, as payments are: a
//! reorganisation can remove one, so it is refundable only once it has the gate's confirmations
//! and is not missing. `status` (`confirming`, `confirmed`, `final`, `gone`), the depth the
//! tracker last saw (`confirmations`, at `checked_at`) and, while the chain does not show it,
//! where and how often it was found missing. Rows recorded before start as `confirming` with 0
//! confirmations: the tracker looks at them again before any is refundable.

use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000021_unclaimed_depth"
    }
}

#[derive(DeriveIden)]
enum UnclaimedDeposits {
    Table,
    Status,
    Confirmations,
    CheckedAt,
    MissingSinceHeight,
    MissingLastHeight,
    MissingChecks,
}

/// Each column in its own statement: SQLite adds one column per `ALTER TABLE`.
fn columns() -> Vec<ColumnDef> {
    use UnclaimedDeposits::*;
    vec![
        ColumnDef::new(Status).string_len(16).not_null().default("confirming").to_owned(),
        ColumnDef::new(Confirmations).integer().not_null().default(0).to_owned(),
        ts(CheckedAt).null().to_owned(),
        ColumnDef::new(MissingSinceHeight).big_integer().null().to_owned(),
        ColumnDef::new(MissingLastHeight).big_integer().null().to_owned(),
        ColumnDef::new(MissingChecks).integer().not_null().default(0).to_owned(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for mut col in columns() {
            manager.alter_table(Table::alter().table(UnclaimedDeposits::Table).add_column(&mut col).to_owned()).await?;
        }
        manager
            .create_index(
                Index::create()
                    .name("ix_unclaimed_deposits_status")
                    .table(UnclaimedDeposits::Table)
                    .col(UnclaimedDeposits::Status)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name("ix_unclaimed_deposits_status").table(UnclaimedDeposits::Table).to_owned())
            .await?;
        for col in [
            UnclaimedDeposits::Status,
            UnclaimedDeposits::Confirmations,
            UnclaimedDeposits::CheckedAt,
            UnclaimedDeposits::MissingSinceHeight,
            UnclaimedDeposits::MissingLastHeight,
            UnclaimedDeposits::MissingChecks,
        ] {
            manager.alter_table(Table::alter().table(UnclaimedDeposits::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
