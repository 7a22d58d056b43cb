//! Webhooks (spec 5.7 and section 6). Events are written to the outbox (`crate::events`) in
//! the transaction of their cause; the deliverer moves them into deliveries (`dispatch`),
//! posts each signed body until a 2xx or the end of the retry schedule (`deliver`), and keeps
//! every attempt. Each event goes to every enabled endpoint of its merchant and environment
//! whose event filter matches, one delivery per endpoint. Merchants manage their endpoints
//! through the API (`manage`), operators with `ops webhooks` (`endpoints`, `admin`). `signature` is also what merchants copy to verify deliveries.

pub mod admin;
pub mod deliveries;
pub mod dispatch;
pub mod endpoints;
pub mod manage;
pub mod outbound;
pub mod secrets;
pub mod signature;

use entity::{DeliveryId, Environment, MerchantId};

/// Header carrying the delivery id: the same on every attempt and replay of one delivery, so
/// receivers can de-duplicate.
pub const DELIVERY_HEADER: &str = "X-Service-Delivery";
/// Header carrying the event type.
pub const EVENT_HEADER: &str = "X-Service-Event";
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    #[error("merchant {0} not found")]
    UnknownMerchant(MerchantId),
    #[error("merchant {0} has no {1} webhook endpoint")]
    NoEndpoint(MerchantId, Environment),
    #[error("merchant {0} has {2} {1} webhook endpoints: name one (--endpoint <id>)")]
    SeveralEndpoints(MerchantId, Environment, usize),
    #[error("webhook endpoint {0} not found")]
    UnknownEndpoint(uuid::Uuid),
    #[error("{0}")]
    InvalidEvent(String),
    #[error("invalid description: {0}")]
    InvalidDescription(String),
    #[error("at most {0} webhook endpoints per merchant and environment")]
    TooManyEndpoints(u64),
    #[error("delivery {0} not found")]
    UnknownDelivery(DeliveryId),
    #[error(transparent)]
    Secret(#[from] secrets::SecretError),
    #[error(transparent)]
    Db(#[from] sea_orm::DbErr),
}
