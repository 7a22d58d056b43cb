//! Per-merchant rate limit overrides (`ops merchants settings --rate-limit-*`): nullable, so
//! every existing merchant keeps the configured limits.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000014_rate_limits"
    }
}

#[derive(DeriveIden)]
enum Merchants {
    Table,
    RateLimitReads,
    RateLimitWrites,
    RateLimitTestHelpers,
}

const COLUMNS: [Merchants; 3] =
    [Merchants::RateLimitReads, Merchants::RateLimitWrites, Merchants::RateLimitTestHelpers];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one column at a time.
        for col in COLUMNS {
            manager
                .alter_table(
                    Table::alter().table(Merchants::Table).add_column(ColumnDef::new(col).integer().null()).to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in COLUMNS {
            manager.alter_table(Table::alter().table(Merchants::Table).drop_column(col).to_owned()).await?;
        }
        Ok(())
    }
}
