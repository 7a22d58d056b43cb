use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000009_settlement"
    }
}

#[derive(DeriveIden)]
enum SettlementConversions {
    Table,
    PaymentId,
    InvoiceId,
    MerchantId,
    Environment,
    SourceGateId,
    TargetGateId,
    SourceAmount,
    Rate,
    TargetGrossAmount,
    FeeAmount,
    NetAmount,
    State,
    FailureClass,
    Venue,
    VenueRef,
    QuotedAt,
    LockedUntil,
    SettledAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
    CreditedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        type C = SettlementConversions;
        manager
            .create_table(
                Table::create()
                    .table(C::Table)
                    .col(ColumnDef::new(C::PaymentId).uuid().not_null().primary_key())
                    .col(ColumnDef::new(C::InvoiceId).uuid().not_null())
                    .col(ColumnDef::new(C::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(C::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(C::SourceGateId).string_len(32).not_null())
                    .col(ColumnDef::new(C::TargetGateId).string_len(32).not_null())
                    .col(money(db, C::SourceAmount).not_null())
                    .col(money(db, C::Rate).null())
                    .col(money(db, C::TargetGrossAmount).null())
                    .col(money(db, C::FeeAmount).null())
                    .col(money(db, C::NetAmount).null())
                    .col(ColumnDef::new(C::State).string_len(24).not_null())
                    .col(ColumnDef::new(C::FailureClass).string_len(32).null())
                    .col(ColumnDef::new(C::Venue).string_len(32).not_null())
                    .col(ColumnDef::new(C::VenueRef).string_len(128).null())
                    .col(ts(C::QuotedAt).null())
                    .col(ts(C::LockedUntil).null())
                    .col(ts(C::SettledAt).null())
                    .col(ts(C::CreatedAt).not_null())
                    .col(ts(C::UpdatedAt).not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .name("fk_settlement_conversions_payment")
                            .from(C::Table, C::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        // The converter looks for payments not credited yet.
        manager
            .create_index(
                Index::create()
                    .name("idx_payments_uncredited")
                    .table(Payments::Table)
                    .col(Payments::CreditedAt)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_index(Index::drop().name("idx_payments_uncredited").table(Payments::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(SettlementConversions::Table).to_owned()).await?;
        Ok(())
    }
}
