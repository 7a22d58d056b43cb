use sea_orm::entity::prelude::*;

/// Next unused derivation index per environment and address family. API processes reserve
/// blocks of indices from it (see `domain::addresses`).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "derivation_counters")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub environment: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub family: String,
    pub next_index: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
