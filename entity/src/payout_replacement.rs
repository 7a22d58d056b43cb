use sea_orm::entity::prelude::*;

/// An operator's request to replace a payout's stuck transaction (`ops payouts replace`): the
/// executor signs a zero-value transaction to the hot wallet itself with the same nonce and a
/// higher fee, stores it here (guarded, once) and broadcasts it. Once the replacement is mined
/// deep enough the payout fails and its funds are released.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "payout_replacements")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub payout_id: Uuid,
    pub requested_at: DateTimeUtc,
    /// The failure reason the payout gets once the replacement is mined.
    #[sea_orm(column_type = "Text")]
    pub reason: String,
    pub tx_hash: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub signed_tx: Option<String>,
    pub broadcast_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
