//! The fiat value of each credit, recorded when it is made: `exchange_rates` (the latest rate of
//! each asset in each fiat, per environment, published by the processes that fetch rates) and,
//! on `payments`, the fiat currency, rate and value of the credit, stamped in the crediting
//! transaction.

use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000029_fiat_at_credit"
    }
}

#[derive(DeriveIden)]
enum ExchangeRates {
    Table,
    Environment,
    Currency,
    FiatCurrency,
    Rate,
    Source,
    UpdatedAt,
    ExpiresAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    CreditedFiatCurrency,
    CreditedFiatRate,
    CreditedFiatValue,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(ExchangeRates::Table)
                    .col(ColumnDef::new(ExchangeRates::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(ExchangeRates::Currency).string_len(16).not_null())
                    .col(ColumnDef::new(ExchangeRates::FiatCurrency).string_len(8).not_null())
                    .col(money(db, ExchangeRates::Rate).not_null())
                    .col(ColumnDef::new(ExchangeRates::Source).string_len(32).not_null())
                    .col(ts(ExchangeRates::UpdatedAt).not_null())
                    .col(ts(ExchangeRates::ExpiresAt).not_null())
                    .primary_key(
                        Index::create()
                            .col(ExchangeRates::Environment)
                            .col(ExchangeRates::Currency)
                            .col(ExchangeRates::FiatCurrency),
                    )
                    .to_owned(),
            )
            .await?;
        for col in [
            ColumnDef::new(Payments::CreditedFiatCurrency).string_len(8).null().to_owned(),
            money(db, Payments::CreditedFiatRate).null().to_owned(),
            money(db, Payments::CreditedFiatValue).null().to_owned(),
        ] {
            let mut col = col;
            manager.alter_table(Table::alter().table(Payments::Table).add_column(&mut col).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in [Payments::CreditedFiatValue, Payments::CreditedFiatRate, Payments::CreditedFiatCurrency] {
            manager.alter_table(Table::alter().table(Payments::Table).drop_column(col).to_owned()).await?;
        }
        manager.drop_table(Table::drop().table(ExchangeRates::Table).to_owned()).await
    }
}
