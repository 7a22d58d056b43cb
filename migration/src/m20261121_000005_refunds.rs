use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000005_refunds"
    }
}

#[derive(DeriveIden)]
enum Refunds {
    Table,
    Id,
    MerchantId,
    Environment,
    InvoiceId,
    PayoutId,
    GateId,
    Currency,
    Network,
    Amount,
    RecipientAmount,
    MerchantDebitAmount,
    RefundFee,
    RefundFeeAllocation,
    ConfiguredNetworkFeeAmount,
    NetworkFeeAllocation,
    Destination,
    DestinationTag,
    Status,
    IdempotencyKey,
    RequestHash,
    Description,
    Metadata,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum InvoiceCredits {
    Table,
    InvoiceId,
    GateId,
    MerchantId,
    Environment,
    Credited,
    Refunded,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    CreditedGateId,
    CreditedAmount,
    CreditedAt,
}

#[derive(DeriveIden)]
enum MerchantEnvSettings {
    Table,
    RefundFeeAllocation,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(Refunds::Table)
                    .col(ColumnDef::new(Refunds::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Refunds::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(Refunds::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Refunds::InvoiceId).uuid().not_null())
                    .col(ColumnDef::new(Refunds::PayoutId).uuid().not_null())
                    .col(ColumnDef::new(Refunds::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(Refunds::Currency).string_len(20).not_null())
                    .col(ColumnDef::new(Refunds::Network).string_len(64).not_null())
                    .col(money(db, Refunds::Amount).not_null())
                    .col(money(db, Refunds::RecipientAmount).not_null())
                    .col(money(db, Refunds::MerchantDebitAmount).not_null())
                    .col(money(db, Refunds::RefundFee).not_null())
                    .col(ColumnDef::new(Refunds::RefundFeeAllocation).string_len(16).not_null())
                    .col(money(db, Refunds::ConfiguredNetworkFeeAmount).not_null())
                    .col(ColumnDef::new(Refunds::NetworkFeeAllocation).string_len(16).not_null())
                    .col(ColumnDef::new(Refunds::Destination).string_len(256).not_null())
                    .col(ColumnDef::new(Refunds::DestinationTag).string_len(256).null())
                    .col(ColumnDef::new(Refunds::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Refunds::IdempotencyKey).string_len(255).not_null())
                    .col(ColumnDef::new(Refunds::RequestHash).string_len(64).not_null())
                    .col(ColumnDef::new(Refunds::Description).text().null())
                    .col(ColumnDef::new(Refunds::Metadata).json().null())
                    .col(ts(Refunds::CreatedAt).not_null())
                    .col(ts(Refunds::UpdatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        for (name, cols, unique) in [
            ("uq_refunds_idempotency", vec![Refunds::MerchantId, Refunds::Environment, Refunds::IdempotencyKey], true),
            ("uq_refunds_payout", vec![Refunds::PayoutId], true),
            ("idx_refunds_merchant_list", vec![Refunds::MerchantId, Refunds::Environment, Refunds::CreatedAt], false),
            ("idx_refunds_invoice", vec![Refunds::InvoiceId], false),
        ] {
            let mut idx = Index::create();
            idx.name(name).table(Refunds::Table);
            for c in cols {
                idx.col(c);
            }
            if unique {
                idx.unique();
            }
            manager.create_index(idx.to_owned()).await?;
        }

        // What each invoice credited per asset, and how much of it has been refunded.
        manager
            .create_table(
                Table::create()
                    .table(InvoiceCredits::Table)
                    .col(ColumnDef::new(InvoiceCredits::InvoiceId).uuid().not_null())
                    .col(ColumnDef::new(InvoiceCredits::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(InvoiceCredits::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(InvoiceCredits::Environment).string_len(8).not_null())
                    .col(money(db, InvoiceCredits::Credited).not_null())
                    .col(money(db, InvoiceCredits::Refunded).not_null())
                    .col(ts(InvoiceCredits::UpdatedAt).not_null())
                    .primary_key(Index::create().col(InvoiceCredits::InvoiceId).col(InvoiceCredits::GateId))
                    .to_owned(),
            )
            .await?;

        // SQLite adds one column per ALTER TABLE.
        for col in [
            ColumnDef::new(Payments::CreditedGateId).string_len(32).null().to_owned(),
            money(db, Payments::CreditedAmount).null().to_owned(),
            ts(Payments::CreditedAt).null().to_owned(),
        ] {
            manager.alter_table(Table::alter().table(Payments::Table).add_column(col).to_owned()).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(MerchantEnvSettings::Table)
                    .add_column(
                        ColumnDef::new(MerchantEnvSettings::RefundFeeAllocation)
                            .string_len(16)
                            .not_null()
                            .default("customer"),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [Refunds::Table.into_iden(), InvoiceCredits::Table.into_iden()] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        for c in [
            Payments::CreditedGateId.into_iden(),
            Payments::CreditedAmount.into_iden(),
            Payments::CreditedAt.into_iden(),
        ] {
            manager.alter_table(Table::alter().table(Payments::Table).drop_column(c).to_owned()).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(MerchantEnvSettings::Table)
                    .drop_column(MerchantEnvSettings::RefundFeeAllocation)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
