//! From outbox events to deliveries. A round takes the oldest undispatched events, claims them
//! with a guarded update (so two deliverer processes never both take one), and creates one
//! delivery per (event, endpoint) for every enabled endpoint of the event's merchant and
//! environment whose filter takes the event (`endpoints::receives`), all in one transaction.
//! Events no endpoint takes are marked dispatched and not delivered.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::{DeliveryStatus, Environment, event, webhook_delivery, webhook_endpoint};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::events::EventKind;
use crate::invoices::types::ts;

/// The JSON body of spec section 6: `event`, `created_at`, `data`, and `event_id` on
/// `balance.credited` only.
#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    event_id: Option<Uuid>,
    event: &'a str,
    created_at: String,
    data: &'a Value,
}

/// The exact body every attempt of this event's delivery sends.
pub fn body(e: &event::Model) -> String {
    let b = Body {
        event_id: (e.event_type == EventKind::BalanceCredited.as_str()).then_some(e.id),
        event: &e.event_type,
        created_at: ts(e.created_at),
        data: &e.payload,
    };
    serde_json::to_string(&b).expect("a JSON value serialises")
}

/// A new delivery of `e` to the endpoint `endpoint_id`, due now.
pub fn new_delivery(e: &event::Model, endpoint_id: Option<Uuid>, now: DateTime<Utc>) -> webhook_delivery::Model {
    webhook_delivery::Model {
        id: Uuid::now_v7(),
        event_id: e.id,
        endpoint_id,
        merchant_id: e.merchant_id,
        environment: e.environment,
        event_type: e.event_type.clone(),
        body: body(e),
        status: DeliveryStatus::Pending,
        attempt_count: 0,
        retry_step: 0,
        next_attempt_at: now,
        lease_until: None,
        enqueued_at: Some(now),
        last_status_code: None,
        last_error: None,
        event_created_at: e.created_at,
        created_at: now,
        updated_at: now,
        delivered_at: None,
        dead_at: None,
        order_key: e.invoice_id.or(e.payout_id),
        wait_for_earlier: false,
    }
}

/// Marks the deliveries (ordered by event) that must wait for an earlier one with the same
/// order key to the same endpoint: one already open, or an earlier one among `rows`. Order holds
/// per endpoint; an old delivery without an endpoint id counts for every endpoint.
pub async fn mark_waiting<C: sea_orm::ConnectionTrait>(
    db: &C,
    rows: &mut [webhook_delivery::Model],
) -> Result<(), DbErr> {
    let keys: HashSet<Uuid> = rows.iter().filter_map(|d| d.order_key).collect();
    if keys.is_empty() {
        return Ok(());
    }
    let open: Vec<(Option<Uuid>, Option<Uuid>)> = open_with_keys(keys).into_tuple().all(db).await?;
    let mut seen: HashSet<(Uuid, Option<Uuid>)> = open.into_iter().filter_map(|(k, e)| Some((k?, e))).collect();
    waiting(&mut seen, rows);
    Ok(())
}

/// The (order key, endpoint) of every open delivery with one of `keys`, read through the open
/// deliveries' index (`open_rows::OPEN_DELIVERIES`), whatever the number delivered before.
pub fn open_with_keys(keys: impl IntoIterator<Item = Uuid>) -> sea_orm::Select<webhook_delivery::Entity> {
    webhook_delivery::Entity::find()
        .select_only()
        .column(webhook_delivery::Column::OrderKey)
        .column(webhook_delivery::Column::EndpointId)
        .filter(webhook_delivery::Column::OrderKey.is_in(keys))
        .filter(Expr::cust(crate::db::open_rows::OPEN_DELIVERIES))
}

/// [`mark_waiting`] once the open (order key, endpoint) pairs are known.
fn waiting(seen: &mut HashSet<(Uuid, Option<Uuid>)>, rows: &mut [webhook_delivery::Model]) {
    for d in rows.iter_mut() {
        if let Some(k) = d.order_key {
            let before = seen.contains(&(k, None)) || seen.contains(&(k, d.endpoint_id));
            seen.insert((k, d.endpoint_id));
            d.wait_for_earlier = before;
        }
    }
}

/// The deliveries of `events` (oldest first) to the `endpoints` that take them: one per
/// (event, endpoint).
pub fn fan_out(
    events: &[&event::Model],
    endpoints: &[webhook_endpoint::Model],
    now: DateTime<Utc>,
) -> Vec<webhook_delivery::Model> {
    let mut by_owner: HashMap<(Uuid, Environment), Vec<&webhook_endpoint::Model>> = HashMap::new();
    for ep in endpoints {
        by_owner.entry((ep.merchant_id, ep.environment)).or_default().push(ep);
    }
    let mut out = Vec::new();
    for e in events {
        for ep in by_owner.get(&(e.merchant_id, e.environment)).map(Vec::as_slice).unwrap_or_default() {
            if super::endpoints::receives(ep, &e.event_type) {
                out.push(new_delivery(e, Some(ep.id), now));
            }
        }
    }
    out
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Dispatched {
    /// Events claimed by this round.
    pub events: usize,
    /// Deliveries created, to be enqueued.
    pub deliveries: Vec<Uuid>,
}

/// At most `limit` events not dispatched yet, oldest first: a read of the partial index of
/// undispatched events (`open_rows::OPEN_UNDISPATCHED`), whatever the number dispatched before.
pub fn undispatched(limit: u64) -> sea_orm::Select<event::Entity> {
    event::Entity::find()
        .filter(event::Column::DispatchedAt.is_null())
        .order_by_asc(event::Column::CreatedAt)
        .limit(limit)
}

/// One round of at most `limit` events.
pub async fn dispatch_batch(db: &DatabaseConnection, limit: u64) -> Result<Dispatched, DbErr> {
    let candidates = undispatched(limit).all(db).await?;
    if candidates.is_empty() {
        return Ok(Dispatched::default());
    }
    let merchants: HashSet<Uuid> = candidates.iter().map(|e| e.merchant_id).collect();
    let endpoints: Vec<webhook_endpoint::Model> = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::MerchantId.is_in(merchants))
        .filter(webhook_endpoint::Column::Disabled.eq(false))
        .all(db)
        .await?;
    let now = Utc::now();
    let txn = crate::db::begin_write(db).await?;
    let claimed: HashSet<Uuid> = event::Entity::update_many()
        .col_expr(event::Column::DispatchedAt, Expr::value(now))
        .filter(event::Column::Id.is_in(candidates.iter().map(|e| e.id)))
        .filter(event::Column::DispatchedAt.is_null())
        .exec_with_returning(&txn)
        .await?
        .into_iter()
        .map(|e| e.id)
        .collect();
    // Candidates come oldest first, so a later event of an invoice follows its earlier ones.
    let taken: Vec<&event::Model> = candidates.iter().filter(|e| claimed.contains(&e.id)).collect();
    let mut made = fan_out(&taken, &endpoints, now);
    mark_waiting(&txn, &mut made).await?;
    let deliveries: Vec<Uuid> = made.iter().map(|d| d.id).collect();
    let once_per_endpoint = [webhook_delivery::Column::EventId, webhook_delivery::Column::EndpointId];
    crate::bulk::insert::<webhook_delivery::Entity, _>(&txn, made, &once_per_endpoint).await?;
    txn.commit().await?;
    Ok(Dispatched { events: claimed.len(), deliveries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str) -> event::Model {
        event::Model::new(
            Uuid::now_v7(),
            Environment::Test,
            kind,
            "k".into(),
            json!({"invoice_id": "x", "amount_paid": "1.5"}),
            DateTime::parse_from_rfc3339("2026-11-21T10:00:00.123Z").unwrap().to_utc(),
        )
    }

    fn endpoint(merchant: Uuid, filter: &[&str]) -> webhook_endpoint::Model {
        let now = Utc::now();
        webhook_endpoint::Model {
            id: Uuid::now_v7(),
            merchant_id: merchant,
            environment: Environment::Test,
            url: "https://shop.example/hook".into(),
            description: None,
            enabled_events: serde_json::to_string(filter).unwrap(),
            disabled: false,
            secret_ciphertext: String::new(),
            previous_secret_ciphertext: None,
            previous_secret_expires_at: None,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn each_event_goes_to_every_endpoint_of_its_owner_whose_filter_takes_it() {
        let paid = ev(EventKind::InvoicePaid.as_str());
        let merchant = paid.merchant_id;
        let mut expired = ev(EventKind::InvoiceExpired.as_str());
        expired.merchant_id = merchant;
        let mut live = ev(EventKind::InvoicePaid.as_str());
        live.merchant_id = merchant;
        live.environment = Environment::Live;
        let other = ev(EventKind::InvoicePaid.as_str());
        let all = endpoint(merchant, &[]);
        let only_paid = endpoint(merchant, &["invoice.paid"]);
        let someone_else = endpoint(other.merchant_id, &["invoice.expired"]);
        let made = fan_out(
            &[&paid, &expired, &live, &other],
            &[all.clone(), only_paid.clone(), someone_else.clone()],
            Utc::now(),
        );
        let pairs: Vec<(Uuid, Option<Uuid>)> = made.iter().map(|d| (d.event_id, d.endpoint_id)).collect();
        assert_eq!(
            pairs,
            vec![(paid.id, Some(all.id)), (paid.id, Some(only_paid.id)), (expired.id, Some(all.id))],
            "the live event has no live endpoint; the other merchant's endpoint does not take invoice.paid"
        );
        assert!(made.iter().all(|d| d.merchant_id == merchant && d.environment == Environment::Test));
    }

    #[test]
    fn order_is_kept_per_endpoint() {
        let invoice = Uuid::now_v7();
        let mut first = ev(EventKind::InvoiceConfirming.as_str());
        first.invoice_id = Some(invoice);
        let mut second = ev(EventKind::InvoicePaid.as_str());
        second.invoice_id = Some(invoice);
        second.merchant_id = first.merchant_id;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let now = Utc::now();
        let mut rows = vec![
            new_delivery(&first, Some(a), now),
            new_delivery(&first, Some(b), now),
            new_delivery(&second, Some(a), now),
            new_delivery(&second, Some(b), now),
        ];
        waiting(&mut HashSet::new(), &mut rows);
        let w: Vec<bool> = rows.iter().map(|d| d.wait_for_earlier).collect();
        assert_eq!(w, [false, false, true, true], "each endpoint's second waits for its own first only");
        // An open delivery to endpoint `a` holds back `a`'s, not `b`'s; one without an endpoint
        // (made before endpoints had ids) holds back every endpoint's.
        let mut rows = vec![new_delivery(&second, Some(a), now), new_delivery(&second, Some(b), now)];
        waiting(&mut HashSet::from([(invoice, Some(a))]), &mut rows);
        assert_eq!(rows.iter().map(|d| d.wait_for_earlier).collect::<Vec<_>>(), [true, false]);
        let mut rows = vec![new_delivery(&second, Some(a), now), new_delivery(&second, Some(b), now)];
        waiting(&mut HashSet::from([(invoice, None)]), &mut rows);
        assert_eq!(rows.iter().map(|d| d.wait_for_earlier).collect::<Vec<_>>(), [true, true]);
    }

    #[test]
    fn body_has_event_id_on_balance_credited_only() {
        let e = ev(EventKind::BalanceCredited.as_str());
        let b: Value = serde_json::from_str(&body(&e)).unwrap();
        assert_eq!(b["event_id"], json!(e.id));
        assert_eq!(b["event"], "balance.credited");
        assert_eq!(b["created_at"], "2026-11-21T10:00:00.123Z");
        assert_eq!(b["data"]["amount_paid"], "1.5");
        for k in [EventKind::InvoicePaid.as_str(), "payout.completed", "test"] {
            let b: Value = serde_json::from_str(&body(&ev(k))).unwrap();
            assert!(b.get("event_id").is_none(), "{k}");
            assert_eq!(b.as_object().unwrap().len(), 3, "{k}: event, created_at, data");
        }
    }
}
