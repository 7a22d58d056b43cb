use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000012_payout_safety"
    }
}

/// An operator's request to replace a stuck payout transaction (`ops payouts replace`), and the
/// replacement the executor signed for it (same nonce, zero value to the hot wallet itself).
#[derive(DeriveIden)]
enum PayoutReplacements {
    Table,
    PayoutId,
    RequestedAt,
    Reason,
    TxHash,
    SignedTx,
    BroadcastAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(PayoutReplacements::Table)
                    .col(ColumnDef::new(PayoutReplacements::PayoutId).uuid().not_null().primary_key())
                    .col(ts(PayoutReplacements::RequestedAt).not_null())
                    .col(ColumnDef::new(PayoutReplacements::Reason).text().not_null())
                    .col(ColumnDef::new(PayoutReplacements::TxHash).string_len(128).null())
                    .col(ColumnDef::new(PayoutReplacements::SignedTx).text().null())
                    .col(ts(PayoutReplacements::BroadcastAt).null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(PayoutReplacements::Table).to_owned()).await
    }
}
