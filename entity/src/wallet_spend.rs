use sea_orm::entity::prelude::*;

/// A hot-wallet output (UTXO) spent by a signed payout transaction, written in the transaction
/// that stores the signed payout. Unique per wallet: no two payouts ever sign over one output.
/// An output counts as taken while its payout is not `failed` (a payout fails only when its
/// transaction can never be mined, so its outputs are the wallet's again).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "wallet_spends")]
pub struct Model {
    /// `<network>:<wallet address>`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    /// `<txid>:<vout>`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub outpoint: String,
    pub payout_id: Uuid,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
