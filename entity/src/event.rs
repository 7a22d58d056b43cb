use sea_orm::entity::prelude::*;

use crate::Environment;

/// The event outbox (spec section 6). Each row is written in the transaction of the change that
/// caused it; `dedupe_key` makes a replayed stage unable to write the same event twice.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "events")]
pub struct Model {
    /// Also the `event_id` of `balance.credited`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    /// `invoice.paid`, `balance.credited`, …
    pub event_type: String,
    pub dedupe_key: String,
    /// The webhook body's `data`.
    pub payload: Json,
    pub created_at: DateTimeUtc,
    /// Set when the webhook deliverer has taken the event over.
    pub dispatched_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
