//! Reading the event log (`GET /v1/events`): a merchant's past events in one environment,
//! newest first, each with exactly the body its webhooks carry.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use entity::{EventId, event};
use sea_orm::{ColumnTrait, QueryFilter, Select};
use serde_json::Value;
use uuid::Uuid;

use super::EventKind;
use crate::domain_error::DomainResult;
use crate::keys::Principal;
use crate::list_counts::{Key, List, Tally};
use crate::owned::{self, Filter};
use crate::state::AppState;

#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    pub event_type: Option<&'static str>,
    pub created_after: Option<DateTime<Utc>>,
    pub created_before: Option<DateTime<Utc>>,
    pub invoice_id: Option<Uuid>,
    pub payout_id: Option<Uuid>,
}

impl Filter<event::Entity> for ListFilter {
    fn apply(&self, mut q: Select<event::Entity>) -> Select<event::Entity> {
        if let Some(t) = self.event_type {
            q = q.filter(event::Column::EventType.eq(t));
        }
        let (from, until) = self.window();
        if let Some(t) = from {
            q = q.filter(event::Column::CreatedAt.gte(t));
        }
        if let Some(t) = until {
            q = q.filter(event::Column::CreatedAt.lt(t));
        }
        if let Some(id) = self.invoice_id {
            q = q.filter(event::Column::InvoiceId.eq(id));
        }
        if let Some(id) = self.payout_id {
            q = q.filter(event::Column::PayoutId.eq(id));
        }
        q
    }

    fn tally(&self) -> Option<Tally> {
        let counted = self.invoice_id.is_none() && self.payout_id.is_none();
        let key = Key { kind: self.event_type.map(str::to_owned), ..Key::default() };
        counted.then(|| Tally { window: self.window(), ..Tally::new(List::Events, key) })
    }
}

impl ListFilter {
    /// The creation window `[from, until)` of `created_after` / `created_before`, compared as
    /// shown: `created_at` is given to the millisecond, so "after t" is every event shown later
    /// than t (stored at or after the next millisecond), "before t" every one shown earlier.
    fn window(&self) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let from = self.created_after.map(|t| floor_ms(t) + TimeDelta::milliseconds(1));
        let until = self.created_before.map(|t| {
            let floor = floor_ms(t);
            if floor == t { t } else { floor + TimeDelta::milliseconds(1) }
        });
        (from, until)
    }
}

fn floor_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::milliseconds(1)).unwrap_or(t)
}

pub async fn get(state: &AppState, who: &Principal, id: EventId) -> DomainResult<event::Model> {
    owned::get::<event::Entity>(&state.db, who, id).await
}

/// An event as the API shows it: `id`, then exactly the fields of its webhook body.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct EventResponse {
    pub id: Uuid,
    /// The event type (`invoice.paid`, `balance.credited`, …).
    #[schema(example = "invoice.paid")]
    pub event: String,
    /// RFC 3339, as in the webhook body.
    pub created_at: String,
    /// `balance.credited` only: its stable id (equal to `id`), as in the webhook body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<Uuid>,
    /// The webhook body's `data`, unchanged: `InvoiceEventData`, `PayoutEventData`,
    /// `BalanceCreditedData` or `TestEventData` by `event`.
    #[schema(value_type = Object)]
    pub data: Value,
}

impl EventResponse {
    pub fn from_model(e: &event::Model) -> EventResponse {
        EventResponse {
            id: e.id,
            event: e.event_type.clone(),
            created_at: crate::invoices::types::ts(e.created_at),
            event_id: (e.event_type == EventKind::BalanceCredited.as_str()).then_some(e.id),
            data: e.payload.clone(),
        }
    }
}
