use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000010_nonces"
    }
}

#[derive(DeriveIden)]
enum NonceAccounts {
    Table,
    Scope,
    NextNonce,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(NonceAccounts::Table)
                    .col(ColumnDef::new(NonceAccounts::Scope).string_len(128).not_null().primary_key())
                    .col(ColumnDef::new(NonceAccounts::NextNonce).big_integer().not_null())
                    .col(ts(NonceAccounts::UpdatedAt).not_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(NonceAccounts::Table).to_owned()).await
    }
}
