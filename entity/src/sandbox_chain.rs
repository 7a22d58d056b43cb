use sea_orm::entity::prelude::*;

/// One gate's sandbox chain: its tip, advanced lazily by whoever reads it, one block per
/// configured interval since `advanced_at`.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "sandbox_chains")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub gate_id: String,
    pub height: i64,
    pub advanced_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
