//! Wallet spends: the hot-wallet outputs (UTXOs) a signed payout transaction spends, on UTXO
//! chains (Bitcoin). A row is written in the transaction that stores the signed payout, and the
//! outpoint is unique per wallet, so two executors can never sign two payouts over one output:
//! the second insert finds the row and its transaction is rolled back, nothing stored.

use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000020_wallet_spends"
    }
}

#[derive(DeriveIden)]
enum WalletSpends {
    Table,
    Scope,
    Outpoint,
    PayoutId,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WalletSpends::Table)
                    .col(ColumnDef::new(WalletSpends::Scope).string_len(160).not_null())
                    .col(ColumnDef::new(WalletSpends::Outpoint).string_len(80).not_null())
                    .col(ColumnDef::new(WalletSpends::PayoutId).uuid().not_null())
                    .col(ts(WalletSpends::CreatedAt).not_null())
                    .primary_key(Index::create().col(WalletSpends::Scope).col(WalletSpends::Outpoint))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_wallet_spends_payout")
                    .table(WalletSpends::Table)
                    .col(WalletSpends::PayoutId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(WalletSpends::Table).to_owned()).await
    }
}
