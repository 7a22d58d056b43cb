use sea_orm::entity::prelude::*;

use crate::{DeliveryStatus, Environment};

/// One outbox event on its way to one of the merchant's endpoints. `body` is the exact JSON that every
/// attempt sends; the signature is made fresh per attempt.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    /// Sent as the delivery id header; the same for every attempt and replay.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    /// Unique with `endpoint_id`: one delivery of an event per endpoint.
    pub event_id: Uuid,
    /// The endpoint it goes to. `None` only on deliveries made before endpoints had ids whose
    /// merchant had no endpoint then: those go to the merchant's (oldest) endpoint in their
    /// environment.
    pub endpoint_id: Option<Uuid>,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub event_type: String,
    #[sea_orm(column_type = "Text")]
    pub body: String,
    pub status: DeliveryStatus,
    /// Attempts started so far (the next attempt's number is this plus one).
    pub attempt_count: i32,
    /// Position in the retry schedule; a replay starts it over.
    pub retry_step: i32,
    pub next_attempt_at: DateTimeUtc,
    /// Held by the deliverer running an attempt; another may take over once it lapses.
    pub lease_until: Option<DateTimeUtc>,
    /// When a job for this delivery was last put on the queue.
    pub enqueued_at: Option<DateTimeUtc>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub event_created_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub delivered_at: Option<DateTimeUtc>,
    pub dead_at: Option<DateTimeUtc>,
    /// What the event is about (its invoice, else its payout): deliveries with the same key reach
    /// the endpoint in the order of their events. `None`: not held back by any other.
    pub order_key: Option<Uuid>,
    /// Made while an earlier delivery with the same `order_key` was open: it is sent only once
    /// no earlier one is open. False for most deliveries (nothing before them to wait for).
    pub wait_for_earlier: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
