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
    /// The invoice the event is about (`data.invoice_id`), for `GET /v1/events?invoice_id=`.
    pub invoice_id: Option<Uuid>,
    /// The payout the event is about (`data.payout_id`).
    pub payout_id: Option<Uuid>,
}

impl Model {
    /// A new, undispatched event; its invoice and payout come from the payload's `invoice_id`
    /// and `payout_id`.
    pub fn new(
        merchant_id: Uuid,
        environment: Environment,
        event_type: &str,
        dedupe_key: String,
        payload: Json,
        created_at: DateTimeUtc,
    ) -> Model {
        let id_at = |field: &str| payload.get(field).and_then(|v| v.as_str()).and_then(|s| s.parse().ok());
        Model {
            id: Uuid::now_v7(),
            merchant_id,
            environment,
            event_type: event_type.to_owned(),
            dedupe_key,
            invoice_id: id_at("invoice_id"),
            payout_id: id_at("payout_id"),
            payload,
            created_at,
            dispatched_at: None,
        }
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
