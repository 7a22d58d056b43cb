//! Static (reusable) deposit addresses, spec 2.7 and 4.12.

use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261121_000003_static_addresses"
    }
}

#[derive(DeriveIden)]
enum StaticAddresses {
    Table,
    Id,
    MerchantId,
    Environment,
    GateId,
    Currency,
    Network,
    Address,
    AddressTag,
    AddressKey,
    DerivationIndex,
    Label,
    TotalReceived,
    InvoiceCount,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_database_backend();
        manager
            .create_table(
                Table::create()
                    .table(StaticAddresses::Table)
                    .col(ColumnDef::new(StaticAddresses::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(StaticAddresses::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(StaticAddresses::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(StaticAddresses::GateId).string_len(32).not_null())
                    .col(ColumnDef::new(StaticAddresses::Currency).string_len(20).not_null())
                    .col(ColumnDef::new(StaticAddresses::Network).string_len(64).not_null())
                    .col(ColumnDef::new(StaticAddresses::Address).string_len(128).not_null())
                    .col(ColumnDef::new(StaticAddresses::AddressTag).string_len(32).null())
                    .col(ColumnDef::new(StaticAddresses::AddressKey).string_len(200).not_null())
                    .col(ColumnDef::new(StaticAddresses::DerivationIndex).big_integer().not_null())
                    .col(ColumnDef::new(StaticAddresses::Label).string_len(255).null())
                    .col(money(db, StaticAddresses::TotalReceived).not_null())
                    .col(ColumnDef::new(StaticAddresses::InvoiceCount).integer().not_null())
                    .col(ts(StaticAddresses::CreatedAt).not_null())
                    .col(ts(StaticAddresses::UpdatedAt).not_null())
                    // No foreign key to merchants, for the same reason as `invoices`
                    // (docs/architecture.md): it would make every insert lock the merchant row.
                    .to_owned(),
            )
            .await?;
        // The scanner's lookup key; one owner per address and environment. Invoice addresses
        // come from the same derivation counters, so the two tables never share a key either.
        manager
            .create_index(
                Index::create()
                    .name("uq_static_addresses_address_key")
                    .table(StaticAddresses::Table)
                    .col(StaticAddresses::Environment)
                    .col(StaticAddresses::AddressKey)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_static_addresses_merchant_list")
                    .table(StaticAddresses::Table)
                    .col(StaticAddresses::MerchantId)
                    .col(StaticAddresses::Environment)
                    .col(StaticAddresses::CreatedAt)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(StaticAddresses::Table).to_owned()).await
    }
}
