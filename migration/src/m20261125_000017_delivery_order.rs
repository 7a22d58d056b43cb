//! Per-invoice delivery order: each delivery names what its event is about (`order_key`: the
//! invoice, else the payout), and the deliverer sends a delivery only when no earlier delivery
//! with the same key is still open. Only a delivery made while an earlier one with its key was
//! open (`wait_for_earlier`) makes that check, so deliveries with nothing before them cost
//! nothing more. Deliveries made before this have no key (not held back).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000017_delivery_order"
    }
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    OrderKey,
    EventCreatedAt,
    WaitForEarlier,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .add_column(ColumnDef::new(WebhookDeliveries::OrderKey).uuid().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .add_column(ColumnDef::new(WebhookDeliveries::WaitForEarlier).boolean().not_null().default(false))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_webhook_deliveries_order")
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::OrderKey)
                    .col(WebhookDeliveries::EventCreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name("idx_webhook_deliveries_order").table(WebhookDeliveries::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter().table(WebhookDeliveries::Table).drop_column(WebhookDeliveries::OrderKey).to_owned(),
            )
            .await
    }
}
