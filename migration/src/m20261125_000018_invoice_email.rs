//! Payer e-mail: `email_due_at` marks an invoice whose payment request is still to be e-mailed
//! to its `payer_email` (set at creation; the webhook deliverer's mailer takes due ones in
//! order, and clears it once sent or no longer wanted).

use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000018_invoice_email"
    }
}

#[derive(DeriveIden)]
enum Invoices {
    Table,
    EmailDueAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(Table::alter().table(Invoices::Table).add_column(ts(Invoices::EmailDueAt).null()).to_owned())
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_invoices_email_due")
                    .table(Invoices::Table)
                    .col(Invoices::EmailDueAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name("idx_invoices_email_due").table(Invoices::Table).to_owned()).await?;
        manager.alter_table(Table::alter().table(Invoices::Table).drop_column(Invoices::EmailDueAt).to_owned()).await
    }
}
