//! Schema migrations. The same migrations run on PostgreSQL and SQLite.

pub use sea_orm_migration::prelude::*;

mod m20261121_000001_foundation;
mod m20261121_000002_ledger;
mod m20261121_000003_static_addresses;
mod m20261121_000004_payouts;
mod m20261121_000005_refunds;
mod m20261121_000006_pipeline;
mod m20261121_000007_webhooks;
mod m20261121_000008_payout_execution;
mod m20261121_000009_settlement;
mod m20261121_000010_nonces;
mod m20261123_000011_deposit_safety;
mod m20261123_000012_payout_safety;
mod m20261123_000013_integrity;
mod m20261123_000014_rate_limits;
mod m20261123_000015_audit_log;
mod m20261125_000016_event_refs;
mod m20261125_000017_delivery_order;
mod m20261125_000018_invoice_email;
mod m20261125_000019_unclaimed_deposits;
mod m20261125_000020_wallet_spends;
mod m20261127_000021_unclaimed_depth;
mod m20261128_000022_house_account;
mod m20261128_000023_sweeps;
mod m20261128_000024_rent_reclaimed;
mod m20261128_000027_dashboard_users;
mod m20261128_000028_webhook_endpoints;
mod m20261128_000029_fiat_at_credit;
mod m20261128_000030_open_rows;
mod m20261128_000031_invoice_external_id;
mod m20261128_000032_list_counts;
mod m20261205_000033_open_deliveries;
mod m20261205_000034_watched_heights;
mod m20261205_000035_ledger_page_order;
mod m20261205_000036_list_counts_by_statement;

/// The partial indexes' predicates, for the queries that must repeat them verbatim.
pub mod open_rows {
    pub use crate::m20261128_000030_open_rows::{
        FINAL_AT_CONFIRMATION, OPEN_ATTEMPT_BODIES, OPEN_DRAFT, OPEN_PAYMENTS_WATCHED, OPEN_PENDING, OPEN_UNDISPATCHED,
    };
    pub use crate::m20261205_000033_open_deliveries::OPEN_DELIVERIES;
}

/// The lists whose totals the database counts (`list_counts`), and how.
pub mod list_counts {
    pub use crate::m20261128_000032_list_counts::{COUNTED, Counted, KEY_COLUMNS};
}

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_foundation::Migration),
            Box::new(m20261121_000002_ledger::Migration),
            Box::new(m20261121_000003_static_addresses::Migration),
            Box::new(m20261121_000004_payouts::Migration),
            Box::new(m20261121_000005_refunds::Migration),
            Box::new(m20261121_000006_pipeline::Migration),
            Box::new(m20261121_000007_webhooks::Migration),
            Box::new(m20261121_000008_payout_execution::Migration),
            Box::new(m20261121_000009_settlement::Migration),
            Box::new(m20261121_000010_nonces::Migration),
            Box::new(m20261123_000011_deposit_safety::Migration),
            Box::new(m20261123_000012_payout_safety::Migration),
            Box::new(m20261123_000013_integrity::Migration),
            Box::new(m20261123_000014_rate_limits::Migration),
            Box::new(m20261123_000015_audit_log::Migration),
            Box::new(m20261125_000016_event_refs::Migration),
            Box::new(m20261125_000017_delivery_order::Migration),
            Box::new(m20261125_000018_invoice_email::Migration),
            Box::new(m20261125_000019_unclaimed_deposits::Migration),
            Box::new(m20261125_000020_wallet_spends::Migration),
            Box::new(m20261127_000021_unclaimed_depth::Migration),
            Box::new(m20261128_000022_house_account::Migration),
            Box::new(m20261128_000023_sweeps::Migration),
            Box::new(m20261128_000024_rent_reclaimed::Migration),
            Box::new(m20261128_000027_dashboard_users::Migration),
            Box::new(m20261128_000028_webhook_endpoints::Migration),
            Box::new(m20261128_000029_fiat_at_credit::Migration),
            Box::new(m20261128_000030_open_rows::Migration),
            Box::new(m20261128_000031_invoice_external_id::Migration),
            Box::new(m20261128_000032_list_counts::Migration),
            Box::new(m20261205_000033_open_deliveries::Migration),
            Box::new(m20261205_000034_watched_heights::Migration),
            Box::new(m20261205_000035_ledger_page_order::Migration),
            Box::new(m20261205_000036_list_counts_by_statement::Migration),
        ]
    }
}

/// An exact money column: `NUMERIC` on PostgreSQL; on SQLite `TEXT`, because SQLite's numeric
/// affinity would turn the decimal string into a lossy double (see `entity::Amount`).
pub(crate) fn money<T: IntoIden>(backend: sea_orm::DatabaseBackend, name: T) -> ColumnDef {
    let mut col = ColumnDef::new(name);
    match backend {
        sea_orm::DatabaseBackend::Sqlite => col.custom(Alias::new("TEXT")),
        _ => col.decimal(),
    };
    col
}

/// A timestamp-with-time-zone column (`timestamptz` on PostgreSQL).
pub(crate) fn ts<T: IntoIden>(name: T) -> ColumnDef {
    let mut c = ColumnDef::new(name);
    c.timestamp_with_time_zone();
    c
}
