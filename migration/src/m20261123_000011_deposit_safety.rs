//! Live deposit safety: a payment remembers since which tip height, and on how many
//! checks, its transaction has been missing from the chain (it is reversed only once that lasted
//! a whole span of blocks), and when its tracker job chain scheduled its next check (and that
//! chain's token), so the sweeper re-enqueues only payments whose chain is overdue; and how
//! many times a reversed payment was revived (its events of each round are distinct).

use sea_orm_migration::prelude::*;

use crate::ts;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261123_000011_deposit_safety"
    }
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    MissingSinceHeight,
    MissingLastHeight,
    MissingChecks,
    NextCheckAt,
    TrackToken,
    Revivals,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one column at a time.
        for col in [
            ColumnDef::new(Payments::MissingSinceHeight).big_integer().null().to_owned(),
            ColumnDef::new(Payments::MissingLastHeight).big_integer().null().to_owned(),
            ColumnDef::new(Payments::MissingChecks).integer().not_null().default(0).to_owned(),
            ts(Payments::NextCheckAt).null().to_owned(),
            ColumnDef::new(Payments::TrackToken).uuid().null().to_owned(),
            ColumnDef::new(Payments::Revivals).integer().not_null().default(0).to_owned(),
        ] {
            manager.alter_table(Table::alter().table(Payments::Table).add_column(col).to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for c in [
            Payments::MissingSinceHeight.into_iden(),
            Payments::MissingLastHeight.into_iden(),
            Payments::MissingChecks.into_iden(),
            Payments::NextCheckAt.into_iden(),
            Payments::TrackToken.into_iden(),
            Payments::Revivals.into_iden(),
        ] {
            manager.alter_table(Table::alter().table(Payments::Table).drop_column(c).to_owned()).await?;
        }
        Ok(())
    }
}
