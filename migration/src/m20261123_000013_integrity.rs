//! PostgreSQL enforces what the code assumes: CHECK constraints on amounts, balance buckets and
//! status values, and an append-only ledger (a trigger refuses UPDATE and DELETE on
//! `ledger_entries`). SQLite (the embedded default, one writer) relies on the code alone: its
//! money columns are TEXT, so numeric checks would compare strings.
//!
//! The value lists are written out here, not taken from the entity enums: a migration is a
//! snapshot, and a new status needs a new migration that widens its constraint.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DatabaseBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000013_integrity"
    }
}

/// (table, constraint, condition). Nullable columns pass when NULL (SQL CHECK semantics).
const CHECKS: &[(&str, &str, &str)] = &[
    (
        "invoices",
        "ck_invoices_status",
        "status IN ('draft','pending','confirming','paid','overpaid','underpaid','expired','invalid','cancelled')",
    ),
    ("invoices", "ck_invoices_environment", "environment IN ('test','live')"),
    ("invoices", "ck_invoices_amount_requested", "amount_requested > 0"),
    ("invoices", "ck_invoices_amount_paid", "amount_paid >= 0"),
    ("payments", "ck_payments_status", "status IN ('confirming','confirmed','reversed')"),
    ("payments", "ck_payments_environment", "environment IN ('test','live')"),
    ("payments", "ck_payments_amount", "amount > 0"),
    ("payments", "ck_payments_credited_amount", "credited_amount > 0"),
    ("payments", "ck_payments_confirmations", "confirmations >= 0 AND required_confirmations >= 0"),
    // `available` may go below zero: a deposit reversed after it was credited and spent leaves
    // a debt that must show (`ledger::post_allowing_debt`, docs/api-decisions.md).
    ("balances", "ck_balances_pending", "pending >= 0"),
    ("balances", "ck_balances_reserved", "reserved >= 0"),
    ("balances", "ck_balances_environment", "environment IN ('test','live')"),
    ("ledger_entries", "ck_ledger_entries_bucket", "bucket IN ('available','pending','reserved')"),
    (
        "ledger_entries",
        "ck_ledger_entries_type",
        "entry_type IN ('invoice_credit','conversion_debit','conversion_credit','payout_reserve','payout_release','payout_debit','payout_fee','network_fee','refund_fee','deposit_reversal','adjustment')",
    ),
    ("ledger_entries", "ck_ledger_entries_amount", "amount <> 0"),
    (
        "payouts",
        "ck_payouts_status",
        "status IN ('pending_approval','approved','queued','processing','completed','failed','cancelled')",
    ),
    ("payouts", "ck_payouts_amount", "amount > 0 AND merchant_debit_amount > 0 AND recipient_amount >= 0"),
    ("payouts", "ck_payouts_fees", "fee_amount >= 0 AND network_fee >= 0 AND configured_network_fee_amount >= 0"),
    (
        "payouts",
        "ck_payouts_allocation",
        "payout_fee_allocation IN ('customer','merchant') AND network_fee_allocation IN ('customer','merchant')",
    ),
    ("refunds", "ck_refunds_status", "status IN ('pending','processing','completed','failed','cancelled')"),
    ("refunds", "ck_refunds_amount", "amount > 0 AND merchant_debit_amount > 0 AND recipient_amount >= 0"),
    ("refunds", "ck_refunds_fees", "refund_fee >= 0 AND configured_network_fee_amount >= 0"),
    ("invoice_credits", "ck_invoice_credits_amounts", "credited >= 0 AND refunded >= 0"),
    ("static_addresses", "ck_static_addresses_total", "total_received >= 0 AND invoice_count >= 0"),
    ("webhook_deliveries", "ck_webhook_deliveries_status", "status IN ('pending','retrying','succeeded','dead')"),
    (
        "settlement_conversions",
        "ck_settlement_conversions_state",
        "state IN ('quoted','quote_failed','executed','execution_failed','expired','abandoned')",
    ),
    ("settlement_conversions", "ck_settlement_conversions_source", "source_amount > 0"),
];

const APPEND_ONLY: &str = r#"
CREATE OR REPLACE FUNCTION ledger_entries_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();
"#;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DatabaseBackend::Postgres {
            return Ok(());
        }
        let db = manager.get_connection();
        for (table, name, condition) in CHECKS {
            db.execute_unprepared(&format!("ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({condition})")).await?;
        }
        db.execute_unprepared(APPEND_ONLY).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DatabaseBackend::Postgres {
            return Ok(());
        }
        let db = manager.get_connection();
        db.execute_unprepared(
            "DROP TRIGGER IF EXISTS ledger_entries_append_only ON ledger_entries; \
             DROP FUNCTION IF EXISTS ledger_entries_append_only();",
        )
        .await?;
        for (table, name, _) in CHECKS.iter().rev() {
            db.execute_unprepared(&format!("ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}")).await?;
        }
        Ok(())
    }
}
