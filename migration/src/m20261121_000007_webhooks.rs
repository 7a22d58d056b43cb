use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000007_webhooks"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    MerchantId,
    Environment,
    Url,
    SecretCiphertext,
    PreviousSecretCiphertext,
    PreviousSecretExpiresAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    Id,
    EventId,
    MerchantId,
    Environment,
    EventType,
    Body,
    Status,
    AttemptCount,
    RetryStep,
    NextAttemptAt,
    LeaseUntil,
    EnqueuedAt,
    LastStatusCode,
    LastError,
    EventCreatedAt,
    CreatedAt,
    UpdatedAt,
    DeliveredAt,
    DeadAt,
}

#[derive(DeriveIden)]
enum WebhookAttempts {
    Table,
    Id,
    DeliveryId,
    AttemptNo,
    Url,
    StartedAt,
    LatencyMs,
    StatusCode,
    Error,
    ResponseBody,
    Succeeded,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One endpoint per merchant and environment; the secret (and the previous one during a
        // rotation) encrypted with the operator's webhook key.
        manager
            .create_table(
                Table::create()
                    .table(WebhookEndpoints::Table)
                    .col(ColumnDef::new(WebhookEndpoints::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(WebhookEndpoints::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(WebhookEndpoints::Url).string_len(2048).not_null())
                    .col(ColumnDef::new(WebhookEndpoints::SecretCiphertext).string_len(512).not_null())
                    .col(ColumnDef::new(WebhookEndpoints::PreviousSecretCiphertext).string_len(512).null())
                    .col(ts(WebhookEndpoints::PreviousSecretExpiresAt).null())
                    .col(ts(WebhookEndpoints::CreatedAt).not_null())
                    .col(ts(WebhookEndpoints::UpdatedAt).not_null())
                    .primary_key(Index::create().col(WebhookEndpoints::MerchantId).col(WebhookEndpoints::Environment))
                    .to_owned(),
            )
            .await?;
        // One delivery per outbox event that had an endpoint when it was dispatched.
        manager
            .create_table(
                Table::create()
                    .table(WebhookDeliveries::Table)
                    .col(ColumnDef::new(WebhookDeliveries::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(WebhookDeliveries::EventId).uuid().not_null().unique_key())
                    .col(ColumnDef::new(WebhookDeliveries::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(WebhookDeliveries::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(WebhookDeliveries::EventType).string_len(40).not_null())
                    .col(ColumnDef::new(WebhookDeliveries::Body).text().not_null())
                    .col(ColumnDef::new(WebhookDeliveries::Status).string_len(16).not_null())
                    .col(ColumnDef::new(WebhookDeliveries::AttemptCount).integer().not_null())
                    .col(ColumnDef::new(WebhookDeliveries::RetryStep).integer().not_null())
                    .col(ts(WebhookDeliveries::NextAttemptAt).not_null())
                    .col(ts(WebhookDeliveries::LeaseUntil).null())
                    .col(ts(WebhookDeliveries::EnqueuedAt).null())
                    .col(ColumnDef::new(WebhookDeliveries::LastStatusCode).integer().null())
                    .col(ColumnDef::new(WebhookDeliveries::LastError).string_len(1024).null())
                    .col(ts(WebhookDeliveries::EventCreatedAt).not_null())
                    .col(ts(WebhookDeliveries::CreatedAt).not_null())
                    .col(ts(WebhookDeliveries::UpdatedAt).not_null())
                    .col(ts(WebhookDeliveries::DeliveredAt).null())
                    .col(ts(WebhookDeliveries::DeadAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_deliveries_due")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::Status)
                    .col(WebhookDeliveries::NextAttemptAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_deliveries_merchant")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::MerchantId)
                    .col(WebhookDeliveries::Environment)
                    .col(WebhookDeliveries::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_deliveries_created")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WebhookAttempts::Table)
                    .col(ColumnDef::new(WebhookAttempts::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(WebhookAttempts::DeliveryId).uuid().not_null())
                    .col(ColumnDef::new(WebhookAttempts::AttemptNo).integer().not_null())
                    .col(ColumnDef::new(WebhookAttempts::Url).string_len(2048).not_null())
                    .col(ts(WebhookAttempts::StartedAt).not_null())
                    .col(ColumnDef::new(WebhookAttempts::LatencyMs).big_integer().not_null())
                    .col(ColumnDef::new(WebhookAttempts::StatusCode).integer().null())
                    .col(ColumnDef::new(WebhookAttempts::Error).string_len(1024).null())
                    .col(ColumnDef::new(WebhookAttempts::ResponseBody).string_len(4096).null())
                    .col(ColumnDef::new(WebhookAttempts::Succeeded).boolean().not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_webhook_attempts_delivery")
                    .table(WebhookAttempts::Table)
                    .col(WebhookAttempts::DeliveryId)
                    .col(WebhookAttempts::AttemptNo)
                    .unique()
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            WebhookAttempts::Table.into_iden(),
            WebhookDeliveries::Table.into_iden(),
            WebhookEndpoints::Table.into_iden(),
        ] {
            manager.drop_table(Table::drop().table(t).to_owned()).await?;
        }
        Ok(())
    }
}
