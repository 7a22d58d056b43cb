use sea_orm::entity::prelude::*;

use crate::Environment;

/// The next block height the deposit scanner reads for one gate and environment.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "scan_cursors")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub environment: Environment,
    #[sea_orm(primary_key, auto_increment = false)]
    pub gate_id: String,
    pub next_height: i64,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
