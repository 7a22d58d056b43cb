use sea_orm::entity::prelude::*;

use crate::{Amount, Bucket, EntryType, Environment};

/// An immutable ledger entry: a signed change of one bucket of one balance.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "ledger_entries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub gate_id: String,
    pub bucket: Bucket,
    pub entry_type: EntryType,
    pub amount: Amount,
    /// The bucket's value after this entry.
    pub balance_after: Amount,
    pub reference_type: Option<String>,
    pub reference_id: Option<Uuid>,
    pub description: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
