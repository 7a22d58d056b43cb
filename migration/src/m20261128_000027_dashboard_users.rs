//! The merchant dashboard's people: users (argon2id password hash, sealed TOTP secret, role),
//! one-time invitations (token stored as its SHA-256) and server-side sessions (token stored as
//! its SHA-256), in the database so that every API process serves every session. Per merchant
//! and environment, `merchant_approves`: payouts are approved in the dashboard, not by the
//! operator; and `auto_approve_limit`: below it (base currency) they start approved. Per
//! merchant, `payer_reply_to`: the `Reply-To` of payment-request e-mails.

use sea_orm_migration::prelude::*;

use crate::{money, ts};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000027_dashboard_users"
    }
}

#[derive(DeriveIden)]
enum DashboardUsers {
    Table,
    Id,
    MerchantId,
    Email,
    Role,
    PasswordHash,
    TotpSecretCiphertext,
    TotpLastStep,
    CreatedAt,
    UpdatedAt,
    DisabledAt,
}

#[derive(DeriveIden)]
enum DashboardInvitations {
    Table,
    Id,
    MerchantId,
    Email,
    Role,
    TokenHash,
    InvitedBy,
    CreatedAt,
    ExpiresAt,
    AcceptedAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum DashboardSessions {
    Table,
    Id,
    TokenHash,
    UserId,
    MerchantId,
    Environment,
    CsrfToken,
    CreatedAt,
    LastSeenAt,
    ExpiresAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum Merchants {
    Table,
    PayerReplyTo,
}

#[derive(DeriveIden)]
enum MerchantEnvSettings {
    Table,
    MerchantApproves,
    AutoApproveLimit,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(DashboardUsers::Table)
                    .col(ColumnDef::new(DashboardUsers::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(DashboardUsers::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(DashboardUsers::Email).string_len(254).not_null().unique_key())
                    .col(ColumnDef::new(DashboardUsers::Role).string_len(16).not_null())
                    .col(ColumnDef::new(DashboardUsers::PasswordHash).text().not_null())
                    .col(ColumnDef::new(DashboardUsers::TotpSecretCiphertext).text().not_null())
                    .col(ColumnDef::new(DashboardUsers::TotpLastStep).big_integer().not_null())
                    .col(ts(DashboardUsers::CreatedAt).not_null())
                    .col(ts(DashboardUsers::UpdatedAt).not_null())
                    .col(ts(DashboardUsers::DisabledAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_dashboard_users_merchant")
                    .table(DashboardUsers::Table)
                    .col(DashboardUsers::MerchantId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DashboardInvitations::Table)
                    .col(ColumnDef::new(DashboardInvitations::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(DashboardInvitations::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(DashboardInvitations::Email).string_len(254).not_null())
                    .col(ColumnDef::new(DashboardInvitations::Role).string_len(16).not_null())
                    .col(ColumnDef::new(DashboardInvitations::TokenHash).string_len(64).not_null().unique_key())
                    .col(ColumnDef::new(DashboardInvitations::InvitedBy).string_len(64).not_null())
                    .col(ts(DashboardInvitations::CreatedAt).not_null())
                    .col(ts(DashboardInvitations::ExpiresAt).not_null())
                    .col(ts(DashboardInvitations::AcceptedAt).null())
                    .col(ts(DashboardInvitations::RevokedAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_dashboard_invitations_merchant")
                    .table(DashboardInvitations::Table)
                    .col(DashboardInvitations::MerchantId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DashboardSessions::Table)
                    .col(ColumnDef::new(DashboardSessions::Id).uuid().not_null().primary_key())
                    .col(ColumnDef::new(DashboardSessions::TokenHash).string_len(64).not_null().unique_key())
                    .col(ColumnDef::new(DashboardSessions::UserId).uuid().not_null())
                    .col(ColumnDef::new(DashboardSessions::MerchantId).uuid().not_null())
                    .col(ColumnDef::new(DashboardSessions::Environment).string_len(8).not_null())
                    .col(ColumnDef::new(DashboardSessions::CsrfToken).string_len(64).not_null())
                    .col(ts(DashboardSessions::CreatedAt).not_null())
                    .col(ts(DashboardSessions::LastSeenAt).not_null())
                    .col(ts(DashboardSessions::ExpiresAt).not_null())
                    .col(ts(DashboardSessions::RevokedAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_dashboard_sessions_user")
                    .table(DashboardSessions::Table)
                    .col(DashboardSessions::UserId)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(MerchantEnvSettings::Table)
                    .add_column(
                        ColumnDef::new(MerchantEnvSettings::MerchantApproves).boolean().not_null().default(false),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_database_backend();
        manager
            .alter_table(
                Table::alter()
                    .table(MerchantEnvSettings::Table)
                    .add_column(money(db, MerchantEnvSettings::AutoApproveLimit).null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Merchants::Table)
                    .add_column(ColumnDef::new(Merchants::PayerReplyTo).string_len(254).null())
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.drop_table(Table::drop().table(DashboardSessions::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(DashboardInvitations::Table).to_owned()).await?;
        manager.drop_table(Table::drop().table(DashboardUsers::Table).to_owned()).await
    }
}
