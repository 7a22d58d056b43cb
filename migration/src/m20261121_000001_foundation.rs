use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000001_foundation"
    }
}

#[derive(DeriveIden)]
enum Merchants {
    Table,
    Id,
    Name,
    BaseCurrency,
    InvoiceLifetimeSecs,
    UnderpaymentTolerancePercent,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    MerchantId,
    Environment,
    KeyHash,
    KeyPrefix,
    Permissions,
    Label,
    CreatedAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum Invoices {
    Table,
    Id,
    MerchantId,
    Environment,
    GateId,
    Currency,
    Network,
    AmountRequested,
    AmountPaid,
    AmountUsd,
    AmountFiat,
    FiatCurrency,
    AmountInBaseCurrency,
    BaseCurrency,
    ExchangeRate,
    Status,
    DepositAddress,
    DepositAddressTag,
    AddressKey,
    DerivationIndex,
    Description,
    ExternalId,
    IdempotencyKey,
    RequestHash,
    Metadata,
    RedirectUrl,
    Source,
    StaticAddressId,
    ExpiresAt,
    PaidAt,
    CreatedAt,
    UpdatedAt,
    IsDeferred,
    DraftExpiresAt,
    ActivatedAt,
    ActivationCount,
    IsLockedFiat,
    TargetSettlementAsset,
    SettlementTargetCurrency,
    SettlementTargetNetwork,
    PayerEmail,
    SentAt,
    CancelledAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
    InvoiceId,
    Environment,
    GateId,
    TxHash,
    OutputIndex,
    Amount,
    Confirmations,
    RequiredConfirmations,
    Status,
    BlockHeight,
    DetectedAt,
    ConfirmedAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DerivationCounters {
    Table,
    Environment,
    Family,
    NextIndex,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();

        manager
            .create_table(
                Table::create()
                    .table(Merchants::Table)
                    .col(ColumnDef::new(Merchants::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Merchants::Name).string().not_null())
                    .col(ColumnDef::new(Merchants::BaseCurrency).string_len(8).not_null())
                    .col(ColumnDef::new(Merchants::InvoiceLifetimeSecs).big_integer().not_null())
                    .col(money(db, Merchants::UnderpaymentTolerancePercent).not_null())
                    .col(ts(Merchants::CreatedAt).not_null())
                    .col(ts(Merchants::UpdatedAt).not_null())
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .col(ColumnDef::new(ApiKeys::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(ApiKeys::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(ApiKeys::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(ApiKeys::KeyHash).string_len(64).not_null().unique_key())
                    .col(ColumnDef::new(ApiKeys::KeyPrefix).string_len(32).not_null())
                    .col(ColumnDef::new(ApiKeys::Permissions).json().not_null())
                    .col(ColumnDef::new(ApiKeys::Label).string().null())
                    .col(ts(ApiKeys::CreatedAt).not_null())
                    .col(ts(ApiKeys::RevokedAt).null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::MerchantId)
                            .to(Merchants::Table, Merchants::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("idx_api_keys_merchant").table(ApiKeys::Table).col(ApiKeys::MerchantId).to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Invoices::Table)
                    .col(ColumnDef::new(Invoices::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Invoices::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(Invoices::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Invoices::GateId).string_len(32).null())
                    .col(ColumnDef::new(Invoices::Currency).string_len(20).null())
                    .col(ColumnDef::new(Invoices::Network).string_len(64).null())
                    .col(money(db, Invoices::AmountRequested).null())
                    .col(money(db, Invoices::AmountPaid).not_null())
                    .col(money(db, Invoices::AmountUsd).null())
                    .col(money(db, Invoices::AmountFiat).null())
                    .col(ColumnDef::new(Invoices::FiatCurrency).string_len(8).null())
                    .col(money(db, Invoices::AmountInBaseCurrency).null())
                    .col(ColumnDef::new(Invoices::BaseCurrency).string_len(8).null())
                    .col(money(db, Invoices::ExchangeRate).null())
                    .col(ColumnDef::new(Invoices::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Invoices::DepositAddress).string_len(128).null())
                    .col(ColumnDef::new(Invoices::DepositAddressTag).string_len(32).null())
                    .col(ColumnDef::new(Invoices::AddressKey).string_len(200).null())
                    .col(ColumnDef::new(Invoices::DerivationIndex).big_integer().null())
                    .col(ColumnDef::new(Invoices::Description).text().null())
                    .col(ColumnDef::new(Invoices::ExternalId).string_len(255).null())
                    .col(ColumnDef::new(Invoices::IdempotencyKey).string_len(255).null())
                    .col(ColumnDef::new(Invoices::RequestHash).string_len(64).null())
                    .col(ColumnDef::new(Invoices::Metadata).json().null())
                    .col(ColumnDef::new(Invoices::RedirectUrl).text().null())
                    .col(ColumnDef::new(Invoices::Source).string_len(32).not_null())
                    .col(ColumnDef::new(Invoices::StaticAddressId).uuid().null())
                    .col(ts(Invoices::ExpiresAt).null())
                    .col(ts(Invoices::PaidAt).null())
                    .col(ts(Invoices::CreatedAt).not_null())
                    .col(ts(Invoices::UpdatedAt).not_null())
                    .col(ColumnDef::new(Invoices::IsDeferred).boolean().not_null())
                    .col(ts(Invoices::DraftExpiresAt).null())
                    .col(ts(Invoices::ActivatedAt).null())
                    .col(ColumnDef::new(Invoices::ActivationCount).integer().not_null())
                    .col(ColumnDef::new(Invoices::IsLockedFiat).boolean().not_null())
                    .col(ColumnDef::new(Invoices::TargetSettlementAsset).string_len(32).not_null())
                    .col(ColumnDef::new(Invoices::SettlementTargetCurrency).string_len(20).null())
                    .col(ColumnDef::new(Invoices::SettlementTargetNetwork).string_len(64).null())
                    .col(ColumnDef::new(Invoices::PayerEmail).string_len(320).null())
                    .col(ts(Invoices::SentAt).null())
                    .col(ts(Invoices::CancelledAt).null())
                    // No foreign key to merchants: every insert would take FOR KEY SHARE on the
                    // merchant's row, and concurrent invoice creation for one merchant then
                    // contends on it (MultiXacts). Merchants are never deleted and merchant_id
                    // always comes from an authenticated API key.
                    .to_owned(),
            )
            .await?;
        // Idempotency: one invoice per (merchant, environment, key). Partial, so invoices
        // without a key cost no index entry; inserts name the same predicate in ON CONFLICT.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX uq_invoices_idempotency ON invoices (merchant_id, environment, idempotency_key) \
                 WHERE idempotency_key IS NOT NULL",
            )
            .await?;
        // A deposit address belongs to exactly one invoice per environment.
        manager
            .create_index(
                Index::create()
                    .name("uq_invoices_address_key")
                    .table(Invoices::Table)
                    .col(Invoices::Environment)
                    .col(Invoices::AddressKey)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_invoices_merchant_list")
                    .table(Invoices::Table)
                    .col(Invoices::MerchantId)
                    .col(Invoices::Environment)
                    .col(Invoices::CreatedAt)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(Payments::Table)
                    .col(ColumnDef::new(Payments::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(Payments::InvoiceId).uuid().not_null())
                    .col(ColumnDef::new(Payments::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(Payments::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(Payments::TxHash).string_len(128).not_null())
                    .col(ColumnDef::new(Payments::OutputIndex).big_integer().not_null())
                    .col(money(db, Payments::Amount).not_null())
                    .col(ColumnDef::new(Payments::Confirmations).integer().not_null())
                    .col(ColumnDef::new(Payments::RequiredConfirmations).integer().not_null())
                    .col(ColumnDef::new(Payments::Status).string_len(16).not_null())
                    .col(ColumnDef::new(Payments::BlockHeight).big_integer().null())
                    .col(ts(Payments::DetectedAt).not_null())
                    .col(ts(Payments::ConfirmedAt).null())
                    .col(ts(Payments::CreatedAt).not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(Payments::Table, Payments::InvoiceId)
                            .to(Invoices::Table, Invoices::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_payments_transfer")
                    .table(Payments::Table)
                    .col(Payments::Environment)
                    .col(Payments::GateId)
                    .col(Payments::TxHash)
                    .col(Payments::OutputIndex)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create().name("idx_payments_invoice").table(Payments::Table).col(Payments::InvoiceId).to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(DerivationCounters::Table)
                    .col(ColumnDef::new(DerivationCounters::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(DerivationCounters::Family).string_len(16).not_null())
                    .col(ColumnDef::new(DerivationCounters::NextIndex).big_integer().not_null())
                    .primary_key(Index::create().col(DerivationCounters::Environment).col(DerivationCounters::Family))
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            DerivationCounters::Table.into_iden(),
            Payments::Table.into_iden(),
            Invoices::Table.into_iden(),
            ApiKeys::Table.into_iden(),
            Merchants::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        Ok(())
    }
}
