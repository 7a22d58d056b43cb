use sea_orm::entity::prelude::*;

use crate::Environment;

/// One of a merchant's webhook endpoints in one environment (a merchant may have several).
/// Secrets are stored encrypted with the operator's webhook key (`domain::webhooks::secrets`),
/// never in the clear.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub merchant_id: Uuid,
    pub environment: Environment,
    pub url: String,
    pub description: Option<String>,
    /// The event types this endpoint receives, a JSON array of names; empty: every event
    /// (`domain::webhooks::endpoints::EventFilter`).
    #[sea_orm(column_type = "Text")]
    pub enabled_events: String,
    /// A disabled endpoint receives no new deliveries.
    pub disabled: bool,
    pub secret_ciphertext: String,
    /// The secret before the last rotation; it keeps signing until `previous_secret_expires_at`.
    pub previous_secret_ciphertext: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
