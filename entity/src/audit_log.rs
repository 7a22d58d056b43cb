use sea_orm::entity::prelude::*;

use crate::Environment;

/// One operator action that changed money or access (`ops`), written in the same transaction
/// as the change. Append-only.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub at: DateTimeUtc,
    /// The OS user running `ops`, or its `--actor`.
    pub actor: String,
    /// Stable name, e.g. `ledger.adjust`, `payout.approve`, `api_key.revoke`.
    pub action: String,
    /// What was changed: `balance`, `payout`, `api_key`, `merchant`, `webhook_endpoint`, …
    pub target_type: String,
    pub target_id: String,
    pub merchant_id: Option<Uuid>,
    pub environment: Option<Environment>,
    pub before: Option<Json>,
    pub after: Option<Json>,
    #[sea_orm(column_type = "Text", nullable)]
    pub reason: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
