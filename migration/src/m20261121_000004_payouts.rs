use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000004_payouts"
    }
}

#[derive(DeriveIden)]
enum Payouts {
    Table,
    Id,
    MerchantId,
    Environment,
    GateId,
    Currency,
    Network,
    Amount,
    AmountInBaseCurrency,
    RecipientAmount,
    MerchantDebitAmount,
    FeeAmount,
    PayoutFeeAllocation,
    NetworkFee,
    ConfiguredNetworkFeeAmount,
    NetworkFeeAllocation,
    Destination,
    DestinationTag,
    Status,
    TxHash,
    IdempotencyKey,
    Description,
    Metadata,
    FailureReason,
    ExecutableAt,
    ApprovedAt,
    CompletedAt,
    CancelledAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum MerchantEnvSettings {
    Table,
    MerchantId,
    Environment,
    PayoutAutoApprove,
    PayoutDelaySecs,
    PayoutFeeAllocation,
    NetworkFeeAllocation,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(Payouts::Table)
                    .col(ColumnDef::new(Payouts::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Payouts::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(Payouts::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Payouts::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(Payouts::Currency).string_len(20).not_null())
                    .col(ColumnDef::new(Payouts::Network).string_len(64).not_null())
                    .col(money(db, Payouts::Amount).not_null())
                    .col(money(db, Payouts::AmountInBaseCurrency).null())
                    .col(money(db, Payouts::RecipientAmount).not_null())
                    .col(money(db, Payouts::MerchantDebitAmount).not_null())
                    .col(money(db, Payouts::FeeAmount).not_null())
                    .col(ColumnDef::new(Payouts::PayoutFeeAllocation).string_len(16).not_null())
                    .col(money(db, Payouts::NetworkFee).not_null())
                    .col(money(db, Payouts::ConfiguredNetworkFeeAmount).not_null())
                    .col(ColumnDef::new(Payouts::NetworkFeeAllocation).string_len(16).not_null())
                    .col(ColumnDef::new(Payouts::Destination).string_len(256).not_null())
                    .col(ColumnDef::new(Payouts::DestinationTag).string_len(256).null())
                    .col(ColumnDef::new(Payouts::Status).string_len(20).not_null())
                    .col(ColumnDef::new(Payouts::TxHash).string_len(128).null())
                    .col(ColumnDef::new(Payouts::IdempotencyKey).string_len(255).null())
                    .col(ColumnDef::new(Payouts::Description).text().null())
                    .col(ColumnDef::new(Payouts::Metadata).json().null())
                    .col(ColumnDef::new(Payouts::FailureReason).text().null())
                    .col(ts(Payouts::ExecutableAt).null())
                    .col(ts(Payouts::ApprovedAt).null())
                    .col(ts(Payouts::CompletedAt).null())
                    .col(ts(Payouts::CancelledAt).null())
                    .col(ts(Payouts::CreatedAt).not_null())
                    .col(ts(Payouts::UpdatedAt).not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX uq_payouts_idempotency ON payouts (merchant_id, environment, idempotency_key) \
                 WHERE idempotency_key IS NOT NULL",
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payouts_merchant_list")
                    .table(Payouts::Table)
                    .col(Payouts::MerchantId)
                    .col(Payouts::Environment)
                    .col(Payouts::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("idx_payouts_status").table(Payouts::Table).col(Payouts::Status).to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(MerchantEnvSettings::Table)
                    .col(ColumnDef::new(MerchantEnvSettings::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(MerchantEnvSettings::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(MerchantEnvSettings::PayoutAutoApprove).boolean().not_null())
                    .col(ColumnDef::new(MerchantEnvSettings::PayoutDelaySecs).big_integer().not_null())
                    .col(ColumnDef::new(MerchantEnvSettings::PayoutFeeAllocation).string_len(16).not_null())
                    .col(ColumnDef::new(MerchantEnvSettings::NetworkFeeAllocation).string_len(16).not_null())
                    .col(ts(MerchantEnvSettings::UpdatedAt).not_null())
                    .primary_key(
                        Index::create().col(MerchantEnvSettings::MerchantId).col(MerchantEnvSettings::Environment),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [MerchantEnvSettings::Table.into_iden(), Payouts::Table.into_iden()] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        Ok(())
    }
}
