use sea_orm::entity::prelude::*;

/// One HTTP attempt of a delivery.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub delivery_id: Uuid,
    pub attempt_no: i32,
    pub url: String,
    pub started_at: DateTimeUtc,
    pub latency_ms: i64,
    /// The response's status; `None` when none came (refused, timed out, blocked address).
    pub status_code: Option<i32>,
    pub error: Option<String>,
    /// The first bytes of the response body.
    pub response_body: Option<String>,
    pub succeeded: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
