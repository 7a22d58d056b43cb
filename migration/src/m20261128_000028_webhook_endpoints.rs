//! Several webhook endpoints per merchant and environment, each with an id, a description, the
//! event types it receives (`enabled_events`, a JSON array of event type names; empty: every
//! event) and a `disabled` flag. The table keeps its name and its columns; its primary key
//! becomes `id`. Every existing endpoint is kept, given a new id and no event filter (all
//! events), so it receives what it received before. Its sealed secrets are copied as they are
//! (they stay bound to their merchant and environment).
//!
//! Deliveries name their endpoint (`endpoint_id`): one delivery per (event, endpoint), unique on
//! the pair instead of on the event. Existing deliveries get the id of their merchant's endpoint
//! in their environment; a delivery whose merchant had no endpoint then keeps `NULL`, which the
//! deliverer reads as "the merchant's endpoint in that environment" (the oldest one), as before.
//! SQLite cannot drop the old inline `UNIQUE (event_id)`, so there the deliveries table is
//! rebuilt with the same columns and indexes; PostgreSQL alters it in place (keeping its CHECK).
//! The whole migration runs in one transaction on both.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend, Statement};

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000028_webhook_endpoints"
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    Id,
    MerchantId,
    Environment,
    Url,
    Description,
    EnabledEvents,
    Disabled,
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
    EndpointId,
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
    OrderKey,
    WaitForEarlier,
}

const NEW_ENDPOINTS: &str = "webhook_endpoints_by_id";
const NEW_DELIVERIES: &str = "webhook_deliveries_by_endpoint";

/// Every column of the deliveries table before this migration, in one order.
const DELIVERY_COLUMNS: &str = "id, event_id, merchant_id, environment, event_type, body, status, attempt_count, \
    retry_step, next_attempt_at, lease_until, enqueued_at, last_status_code, last_error, event_created_at, \
    created_at, updated_at, delivered_at, dead_at, order_key, wait_for_earlier";

fn endpoints_table(name: &str) -> TableCreateStatement {
    Table::create()
        .table(Alias::new(name))
        .col(ColumnDef::new(WebhookEndpoints::Id).uuid().not_null().primary_key())
        .col(ColumnDef::new(WebhookEndpoints::MerchantId).uuid().not_null())
        .col(ColumnDef::new(WebhookEndpoints::Environment).string_len(8).not_null())
        .col(ColumnDef::new(WebhookEndpoints::Url).string_len(2048).not_null())
        .col(ColumnDef::new(WebhookEndpoints::Description).string_len(512).null())
        .col(ColumnDef::new(WebhookEndpoints::EnabledEvents).text().not_null())
        .col(ColumnDef::new(WebhookEndpoints::Disabled).boolean().not_null().default(false))
        .col(ColumnDef::new(WebhookEndpoints::SecretCiphertext).string_len(512).not_null())
        .col(ColumnDef::new(WebhookEndpoints::PreviousSecretCiphertext).string_len(512).null())
        .col(ts(WebhookEndpoints::PreviousSecretExpiresAt).null())
        .col(ts(WebhookEndpoints::CreatedAt).not_null())
        .col(ts(WebhookEndpoints::UpdatedAt).not_null())
        .to_owned()
}

/// The deliveries table as it is after this migration (SQLite rebuild).
fn deliveries_table(name: &str) -> TableCreateStatement {
    Table::create()
        .table(Alias::new(name))
        .col(ColumnDef::new(WebhookDeliveries::Id).uuid().not_null().primary_key())
        .col(ColumnDef::new(WebhookDeliveries::EventId).uuid().not_null())
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
        .col(ColumnDef::new(WebhookDeliveries::OrderKey).uuid().null())
        .col(ColumnDef::new(WebhookDeliveries::WaitForEarlier).boolean().not_null().default(false))
        .col(ColumnDef::new(WebhookDeliveries::EndpointId).uuid().null())
        .to_owned()
}

/// The deliveries indexes of migrations 7 and 17 (recreated after the SQLite rebuild).
fn delivery_indexes() -> Vec<IndexCreateStatement> {
    vec![
        Index::create()
            .name("idx_webhook_deliveries_due")
            .table(WebhookDeliveries::Table)
            .col(WebhookDeliveries::Status)
            .col(WebhookDeliveries::NextAttemptAt)
            .to_owned(),
        Index::create()
            .name("idx_webhook_deliveries_merchant")
            .table(WebhookDeliveries::Table)
            .col(WebhookDeliveries::MerchantId)
            .col(WebhookDeliveries::Environment)
            .col(WebhookDeliveries::CreatedAt)
            .to_owned(),
        Index::create()
            .name("idx_webhook_deliveries_created")
            .table(WebhookDeliveries::Table)
            .col(WebhookDeliveries::CreatedAt)
            .to_owned(),
        Index::create()
            .name("idx_webhook_deliveries_order")
            .table(WebhookDeliveries::Table)
            .col(WebhookDeliveries::OrderKey)
            .col(WebhookDeliveries::EventCreatedAt)
            .to_owned(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// In one transaction on SQLite too: the tables are dropped and renamed, and every
    /// statement must see the ones before it (one connection, all or nothing).
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let backend = manager.get_database_backend();

        // Endpoints: a new table keyed by id, every existing row copied with a new id.
        manager.create_table(endpoints_table(NEW_ENDPOINTS)).await?;
        let rows = db
            .query_all_raw(Statement::from_string(
                backend,
                "SELECT merchant_id, environment FROM webhook_endpoints".to_owned(),
            ))
            .await?;
        for row in rows {
            let merchant: uuid::Uuid = row.try_get("", "merchant_id")?;
            let env: String = row.try_get("", "environment")?;
            let id = uuid::Uuid::now_v7();
            let copy = Query::insert()
                .into_table(Alias::new(NEW_ENDPOINTS))
                .columns([
                    WebhookEndpoints::Id,
                    WebhookEndpoints::MerchantId,
                    WebhookEndpoints::Environment,
                    WebhookEndpoints::Url,
                    WebhookEndpoints::Description,
                    WebhookEndpoints::EnabledEvents,
                    WebhookEndpoints::Disabled,
                    WebhookEndpoints::SecretCiphertext,
                    WebhookEndpoints::PreviousSecretCiphertext,
                    WebhookEndpoints::PreviousSecretExpiresAt,
                    WebhookEndpoints::CreatedAt,
                    WebhookEndpoints::UpdatedAt,
                ])
                .select_from(
                    Query::select()
                        .expr(Expr::val(id))
                        .column(WebhookEndpoints::MerchantId)
                        .column(WebhookEndpoints::Environment)
                        .column(WebhookEndpoints::Url)
                        .expr(Expr::val(Option::<String>::None))
                        .expr(Expr::val("[]"))
                        .expr(Expr::val(false))
                        .column(WebhookEndpoints::SecretCiphertext)
                        .column(WebhookEndpoints::PreviousSecretCiphertext)
                        .column(WebhookEndpoints::PreviousSecretExpiresAt)
                        .column(WebhookEndpoints::CreatedAt)
                        .column(WebhookEndpoints::UpdatedAt)
                        .from(WebhookEndpoints::Table)
                        .and_where(Expr::col(WebhookEndpoints::MerchantId).eq(merchant))
                        .and_where(Expr::col(WebhookEndpoints::Environment).eq(env))
                        .to_owned(),
                )
                .map_err(|e| DbErr::Migration(e.to_string()))?
                .to_owned();
            manager.exec_stmt(copy).await?;
        }
        manager.drop_table(Table::drop().table(WebhookEndpoints::Table).to_owned()).await?;
        manager
            .rename_table(Table::rename().table(Alias::new(NEW_ENDPOINTS), WebhookEndpoints::Table).to_owned())
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_endpoints_merchant")
                    .table(WebhookEndpoints::Table)
                    .col(WebhookEndpoints::MerchantId)
                    .col(WebhookEndpoints::Environment)
                    .to_owned(),
            )
            .await?;

        // Deliveries: `endpoint_id`, unique per (event, endpoint).
        match backend {
            DatabaseBackend::Sqlite => {
                manager.create_table(deliveries_table(NEW_DELIVERIES)).await?;
                db.execute_unprepared(&format!(
                    "INSERT INTO {NEW_DELIVERIES} ({DELIVERY_COLUMNS}, endpoint_id) \
                     SELECT {DELIVERY_COLUMNS}, NULL FROM webhook_deliveries"
                ))
                .await?;
                manager.drop_table(Table::drop().table(WebhookDeliveries::Table).to_owned()).await?;
                manager
                    .rename_table(
                        Table::rename().table(Alias::new(NEW_DELIVERIES), WebhookDeliveries::Table).to_owned(),
                    )
                    .await?;
                for index in delivery_indexes() {
                    let name = index.get_index_spec().get_name().unwrap_or_default().to_owned();
                    db.execute_unprepared(&format!("DROP INDEX IF EXISTS {name}")).await?;
                    manager.create_index(index).await?;
                }
            }
            _ => {
                manager
                    .alter_table(
                        Table::alter()
                            .table(WebhookDeliveries::Table)
                            .add_column(ColumnDef::new(WebhookDeliveries::EndpointId).uuid().null())
                            .to_owned(),
                    )
                    .await?;
                db.execute_unprepared(
                    "ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_event_id_key",
                )
                .await?;
            }
        }
        db.execute_unprepared(
            "UPDATE webhook_deliveries SET endpoint_id = (SELECT e.id FROM webhook_endpoints e \
             WHERE e.merchant_id = webhook_deliveries.merchant_id AND e.environment = webhook_deliveries.environment)",
        )
        .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_webhook_deliveries_event_endpoint")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::EventId)
                    .col(WebhookDeliveries::EndpointId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_deliveries_endpoint")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::EndpointId)
                    .col(WebhookDeliveries::Status)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, _manager: &SchemaManager) -> Result<(), DbErr> {
        // Going back would have to merge several endpoints of one merchant into one and several
        // deliveries of one event into one: not done automatically.
        Err(DbErr::Migration("m20261128_000028_webhook_endpoints cannot be reverted".into()))
    }
}
