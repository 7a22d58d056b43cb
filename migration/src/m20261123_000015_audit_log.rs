//! The operator audit log: one row per `ops` action that changes money or access, written in
//! the same transaction as the change. Append-only on PostgreSQL (a trigger refuses UPDATE and
//! DELETE, like `ledger_entries`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000015_audit_log"
    }
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    At,
    Actor,
    Action,
    TargetType,
    TargetId,
    MerchantId,
    Environment,
    Before,
    After,
    Reason,
}

const APPEND_ONLY: &str = r#"
CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
"#;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditLog::Table)
                    .col(ColumnDef::new(AuditLog::Id).uuid().not_null().primary_key())
                    .col(ts(AuditLog::At).not_null())
                    .col(ColumnDef::new(AuditLog::Actor).string_len(128).not_null())
                    .col(ColumnDef::new(AuditLog::Action).string_len(64).not_null())
                    .col(ColumnDef::new(AuditLog::TargetType).string_len(32).not_null())
                    .col(ColumnDef::new(AuditLog::TargetId).string_len(256).not_null())
                    .col(ColumnDef::new(AuditLog::MerchantId).uuid().null())
                    .col(ColumnDef::new(AuditLog::Environment).string_len(8).null())
                    .col(ColumnDef::new(AuditLog::Before).json().null())
                    .col(ColumnDef::new(AuditLog::After).json().null())
                    .col(ColumnDef::new(AuditLog::Reason).text().null())
                    .to_owned(),
            )
            .await?;
        for (name, col) in [("idx_audit_log_at", AuditLog::At), ("idx_audit_log_merchant", AuditLog::MerchantId)] {
            manager.create_index(Index::create().name(name).table(AuditLog::Table).col(col).to_owned()).await?;
        }
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager.get_connection().execute_unprepared(APPEND_ONLY).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            manager
                .get_connection()
                .execute_unprepared(
                    "DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log; \
                     DROP FUNCTION IF EXISTS audit_log_append_only();",
                )
                .await?;
        }
        manager.drop_table(Table::drop().table(AuditLog::Table).to_owned()).await
    }
}
