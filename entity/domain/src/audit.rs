//! The audit log (`audit_log`): one append-only row per `ops` action that changes money or
//! access, and per merchant settings change through the API (actor `api_key:<id>`), written by
//! `record` in the caller's transaction, so the row exists exactly when the change was committed.

use chrono::{DateTime, Utc};
use entity::{Environment, MerchantId, audit_log};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde_json::Value;
use uuid::Uuid;

/// One action about to be recorded. `action` is a stable dotted name (`ledger.adjust`).
#[derive(Debug, Clone)]
pub struct Entry {
    pub actor: String,
    pub action: &'static str,
    pub target_type: &'static str,
    pub target_id: String,
    pub merchant_id: Option<Uuid>,
    pub environment: Option<Environment>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub reason: Option<String>,
}

impl Entry {
    pub fn new(actor: &str, action: &'static str, target_type: &'static str, target_id: impl ToString) -> Entry {
        Entry {
            actor: actor.to_owned(),
            action,
            target_type,
            target_id: target_id.to_string(),
            merchant_id: None,
            environment: None,
            before: None,
            after: None,
            reason: None,
        }
    }

    pub fn merchant(mut self, merchant_id: MerchantId, environment: Option<Environment>) -> Entry {
        self.merchant_id = Some(merchant_id.into());
        self.environment = environment;
        self
    }

    pub fn change(mut self, before: Option<Value>, after: Option<Value>) -> Entry {
        self.before = before;
        self.after = after;
        self
    }

    pub fn reason(mut self, reason: Option<&str>) -> Entry {
        self.reason = reason.map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned);
        self
    }
}

/// Appends the row in `txn` (the transaction making the change).
pub async fn record(txn: &impl ConnectionTrait, e: Entry) -> Result<audit_log::Model, DbErr> {
    audit_log::Model {
        id: Uuid::now_v7(),
        at: Utc::now(),
        actor: e.actor,
        action: e.action.to_owned(),
        target_type: e.target_type.to_owned(),
        target_id: e.target_id,
        merchant_id: e.merchant_id,
        environment: e.environment,
        before: e.before,
        after: e.after,
        reason: e.reason,
    }
    .into_active_model()
    .insert(txn)
    .await
}

/// `ops audit list` filters; every given one must match.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub action: Option<String>,
    pub actor: Option<String>,
    pub merchant_id: Option<Uuid>,
    /// The target's id (a payout id, key id, gate, delivery id, queue name, …).
    pub target_id: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub limit: u64,
}

/// Rows matching `f`, newest first.
pub async fn list(db: &impl ConnectionTrait, f: &Filter) -> Result<Vec<audit_log::Model>, DbErr> {
    use audit_log::Column as C;
    let mut q = audit_log::Entity::find();
    if let Some(a) = &f.action {
        q = q.filter(C::Action.eq(a.as_str()));
    }
    if let Some(a) = &f.actor {
        q = q.filter(C::Actor.eq(a.as_str()));
    }
    if let Some(m) = f.merchant_id {
        q = q.filter(C::MerchantId.eq(m));
    }
    if let Some(t) = &f.target_id {
        q = q.filter(C::TargetId.eq(t.as_str()));
    }
    if let Some(t) = f.since {
        q = q.filter(C::At.gte(t));
    }
    if let Some(t) = f.until {
        q = q.filter(C::At.lt(t));
    }
    q.order_by_desc(C::At).order_by_desc(C::Id).limit(f.limit).all(db).await
}
