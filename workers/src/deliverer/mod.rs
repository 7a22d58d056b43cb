//! One attempt of one delivery. The attempt is claimed with a guarded update (open, due, no
//! live lease), so a duplicated or replayed job never sends twice at once; the body is signed
//! fresh (spec 5.7), posted, and the outcome recorded with the next step of the schedule in
//! one transaction. A deliverer killed mid-attempt leaves a lapsed lease: the sweeper puts the
//! delivery back on the queue and it is sent again (at least once; receivers de-duplicate by
//! the delivery id header). Deliveries about one invoice (or payout) are sent in the order their
//! events happened: one whose earlier sibling is still open is not claimed, and waits for it.
//! Attempts running at once share their claim and record writes (`group`, a group commit).
//!
//! Around the attempts (`job`): the dispatcher (every `webhooks.dispatch_interval_ms`) turns
//! outbox events into deliveries (`domain::webhooks::dispatch`), the body rendered once, and
//! takes only as many events as keep the queue's waiting deliveries under `webhooks.max_queued`
//! (back-pressure: an overload waits in the outbox, in event order); the sweep enqueues again
//! open deliveries due for more than `stale_after_secs` with no live lease, so a lost push, a
//! flushed Redis or a killed deliverer delays a webhook but never loses it. Each delivery goes to
//! its own endpoint (`endpoint_id`), signed with that endpoint's secrets; one whose endpoint was
//! removed is dead at its next attempt, never sent elsewhere. Endpoint secrets are
//! sealed with the operator's webhook key (`domain::webhooks::secrets`), which this process,
//! `ops` and the API (to seal the secrets of endpoints merchants create) load. Payer e-mail runs in the same process (`mail`;
//! its job beside the webhook's in `job`).

mod group;
pub mod job;
pub mod mail;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use entity::{DeliveryTrigger, Environment, webhook_attempt, webhook_delivery, webhook_endpoint};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QuerySelect};
use uuid::Uuid;

use domain::config::WebhooksConfig;
use domain::db::open_rows;
use domain::webhooks::outbound::{self, TargetPolicy, error_chain};
use domain::webhooks::secrets::SecretBox;
use domain::webhooks::{DELIVERY_HEADER, EVENT_HEADER, WebhookError, endpoints, signature};

pub use group::claim_update;
use group::{Batcher, MAX_GROUP, Record, Written};

/// A delivery held back behind an earlier one with the same order key looks again this long
/// after that one's next attempt.
const ORDER_RECHECK: Duration = Duration::from_millis(200);

/// The claim's condition, for a delivery made while an earlier one with its key was open
/// (`wait_for_earlier`; the others skip it at no cost), that no earlier event about the same
/// invoice or payout (same order key, merchant, environment and endpoint; a delivery made before
/// endpoints had ids counts for every endpoint) still has an open delivery: deliveries for one
/// invoice reach each endpoint in the order their events happened. Correlated to the row being claimed; a row
/// without a key is never held back (`= NULL` matches nothing).
const NO_EARLIER_OPEN: &str = "(NOT webhook_deliveries.wait_for_earlier OR NOT EXISTS (SELECT 1 FROM webhook_deliveries AS earlier \
    WHERE earlier.order_key = webhook_deliveries.order_key \
    AND earlier.merchant_id = webhook_deliveries.merchant_id \
    AND earlier.environment = webhook_deliveries.environment \
    AND (earlier.endpoint_id = webhook_deliveries.endpoint_id \
         OR earlier.endpoint_id IS NULL OR webhook_deliveries.endpoint_id IS NULL) \
    AND earlier.status IN ('pending', 'retrying') \
    AND (earlier.event_created_at < webhook_deliveries.event_created_at \
         OR (earlier.event_created_at = webhook_deliveries.event_created_at \
             AND earlier.event_id < webhook_deliveries.event_id))))";

/// Extra lease beyond the attempt timeout, for recording the outcome.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// Longest error text kept.
const ERROR_LIMIT: usize = 1000;
/// Widths, in characters, of the attempt's text columns (`webhook_attempts.url`, `error` (and
/// the delivery's `last_error`), `response_body`): what is stored is cut to them (`storable`).
const URL_COLUMN: usize = 2048;
const ERROR_COLUMN: usize = 1024;
const BODY_COLUMN: usize = 4096;

/// What the caller should do after [`Deliverer::attempt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered (2xx).
    Delivered,
    /// Failed; the next attempt is due after this delay.
    RetryAfter(Duration),
    /// Failed for the last time: dead until replayed.
    Dead,
    /// Not due yet (a job that arrived early): try again after this delay.
    NotDue(Duration),
    /// Nothing to do: done, dead, unknown, or another deliverer holds it.
    Skipped,
}

/// The endpoint as a deliverer uses it: URL and the secrets that sign now.
#[derive(Debug)]
struct Target {
    url: String,
    secrets: Vec<String>,
}

/// An endpoint lookup and when it was made (`None`: no endpoint).
type Cached = (Instant, Option<Arc<Target>>);
/// What a lookup is cached by: the delivery's merchant, environment and endpoint id.
type TargetKey = (Uuid, Environment, Option<Uuid>);

/// Sends deliveries. One per process; cheap to share behind an `Arc`.
pub struct Deliverer {
    db: DatabaseConnection,
    http: reqwest::Client,
    sbox: SecretBox,
    cfg: WebhooksConfig,
    policy: TargetPolicy,
    cache: Mutex<HashMap<TargetKey, Cached>>,
    /// Claims and records of the attempts running at once, written together (`group`); started
    /// on first use, on the runtime the attempts run on.
    claims: OnceLock<Batcher<Uuid, Option<webhook_delivery::Model>>>,
    records: OnceLock<Batcher<Record, Result<Written, DbErr>>>,
}

impl Deliverer {
    pub fn new(db: DatabaseConnection, sbox: SecretBox, cfg: WebhooksConfig) -> anyhow::Result<Deliverer> {
        Ok(Deliverer {
            http: outbound::client(&cfg)?,
            policy: TargetPolicy::from_config(&cfg),
            db,
            sbox,
            cfg,
            cache: Mutex::new(HashMap::new()),
            claims: OnceLock::new(),
            records: OnceLock::new(),
        })
    }

    pub fn config(&self) -> &WebhooksConfig {
        &self.cfg
    }

    /// How many grouped writes ran so far: (claims, records). Attempts running at once share
    /// them (`group`), so under load these grow far slower than the attempts.
    pub fn group_writes(&self) -> (u64, u64) {
        (self.claims.get().map_or(0, Batcher::runs), self.records.get().map_or(0, Batcher::runs))
    }

    /// Holds the writing of attempts' records back until the guard is dropped: the records
    /// finished meanwhile are then written as one group. For tests that need chosen attempts
    /// in one group; [`records_pending`](Deliverer::records_pending) tells when they are all in.
    pub async fn hold_records(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.records().hold().await
    }

    /// Records handed to the group writer and not written yet.
    pub fn records_pending(&self) -> usize {
        self.records.get().map_or(0, Batcher::pending)
    }

    /// Runs the attempt that is due for `delivery_id`, if one is.
    pub async fn attempt(&self, delivery_id: Uuid) -> Result<Outcome, WebhookError> {
        // A claim refused because an earlier sibling was open can find it closed a moment
        // later: then the delivery is claimable at once and is tried again here, not left to the
        // sweeper.
        let mut tries = 0;
        let d = loop {
            if let Some(d) = self.claim(delivery_id).await? {
                break d;
            }
            tries += 1;
            match self.unclaimed(delivery_id).await? {
                Unclaimed::Done(outcome) => return Ok(outcome),
                Unclaimed::ClaimAgain if tries < 3 => continue,
                Unclaimed::ClaimAgain => return Ok(Outcome::NotDue(ORDER_RECHECK)),
            }
        };
        let started = Instant::now();
        let started_at = Utc::now();
        // A delivery whose endpoint was removed is never sent (to it or to another): dead now.
        let mut removed = false;
        let (url, result) = match self.target(&d).await {
            Ok(Some(t)) => {
                let r = self.post(&d, &t).await;
                (t.url.clone(), r)
            }
            Ok(None) if d.endpoint_id.is_some() => {
                removed = true;
                (String::new(), Err(Failure::text(endpoints::REMOVED)))
            }
            Ok(None) => {
                (String::new(), Err(Failure::text("no webhook endpoint is set for this merchant and environment")))
            }
            Err(e) => (String::new(), Err(Failure::text(&e.to_string()))),
        };
        let latency = started.elapsed();
        self.record(&d, &url, started_at, latency, result, removed).await
    }

    /// Takes the attempt: open, due, and not leased by a live attempt (with the others claimed
    /// at this moment, `group::claim`).
    async fn claim(&self, id: Uuid) -> Result<Option<webhook_delivery::Model>, DbErr> {
        let claims = self.claims.get_or_init(|| {
            let (db, timeout, ordered) =
                (self.db.clone(), Duration::from_millis(self.cfg.timeout_ms), self.cfg.ordered);
            Batcher::start(MAX_GROUP, move |ids| {
                let db = db.clone();
                async move { group::claim(&db, timeout, ordered, ids).await }
            })
        });
        claims.call(id).await
    }

    /// The group writer of attempts' records (`group::record`).
    fn records(&self) -> &Batcher<Record, Result<Written, DbErr>> {
        self.records.get_or_init(|| {
            let db = self.db.clone();
            Batcher::start(MAX_GROUP, move |records| {
                let db = db.clone();
                async move { group::record(&db, records).await }
            })
        })
    }

    /// The earliest open delivery with the same order key as `d` whose event happened before
    /// `d`'s: while it is open, `d` waits.
    async fn blocker(&self, d: &webhook_delivery::Model) -> Result<Option<webhook_delivery::Model>, DbErr> {
        match earlier_open(d).filter(|_| self.cfg.ordered) {
            Some(q) => q.one(&self.db).await,
            None => Ok(None),
        }
    }

    /// Why the claim failed: early or held back (reschedule), claimable after all (its earlier
    /// sibling closed meanwhile), or nothing to do.
    async fn unclaimed(&self, id: Uuid) -> Result<Unclaimed, WebhookError> {
        let Some(d) = webhook_delivery::Entity::find_by_id(id).one(&self.db).await? else {
            return Ok(Unclaimed::Done(Outcome::Skipped));
        };
        let now = Utc::now();
        let due_and_free = d.status.is_open() && d.lease_until.is_none_or(|t| t < now) && d.next_attempt_at <= now;
        let blocker = if due_and_free { self.blocker(&d).await? } else { None };
        let verdict = after_refused_claim(&d, blocker.as_ref(), now);
        if let Unclaimed::Done(Outcome::NotDue(wait)) = verdict
            && blocker.is_some()
        {
            // Held back behind an earlier event about the same invoice or payout: due again
            // just after that one's next attempt.
            let at = now + chrono_delay(wait);
            webhook_delivery::Entity::update_many()
                .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(at))
                .col_expr(webhook_delivery::Column::EnqueuedAt, Expr::value(now))
                .filter(webhook_delivery::Column::Id.eq(d.id))
                .filter(webhook_delivery::Column::Status.eq(d.status))
                .filter(webhook_delivery::Column::AttemptCount.eq(d.attempt_count))
                .exec(&self.db)
                .await?;
        }
        Ok(verdict)
    }

    /// The delivery's endpoint: the one it names, or (a delivery made before endpoints had ids)
    /// the merchant's oldest endpoint in its environment. `None`: there is none (removed).
    async fn target(&self, d: &webhook_delivery::Model) -> Result<Option<Arc<Target>>, WebhookError> {
        use sea_orm::QueryOrder;
        let key = (d.merchant_id, d.environment, d.endpoint_id);
        let ttl = Duration::from_millis(self.cfg.endpoint_cache_ms);
        if let Some((at, t)) = self.cache.lock().expect("cache lock").get(&key)
            && at.elapsed() < ttl
        {
            return Ok(t.clone());
        }
        let mut q = webhook_endpoint::Entity::find()
            .filter(webhook_endpoint::Column::MerchantId.eq(d.merchant_id))
            .filter(webhook_endpoint::Column::Environment.eq(d.environment));
        if let Some(id) = d.endpoint_id {
            q = q.filter(webhook_endpoint::Column::Id.eq(id));
        }
        let row = q
            .order_by_asc(webhook_endpoint::Column::CreatedAt)
            .order_by_asc(webhook_endpoint::Column::Id)
            .one(&self.db)
            .await?;
        let target = match row {
            Some(m) => Some(Arc::new(Target {
                url: m.url.clone(),
                secrets: endpoints::signing_secrets(&self.sbox, &m, Utc::now())?,
            })),
            None => None,
        };
        self.cache.lock().expect("cache lock").insert(key, (Instant::now(), target.clone()));
        Ok(target)
    }

    async fn post(&self, d: &webhook_delivery::Model, t: &Target) -> Result<Answer, Failure> {
        let url = url::Url::parse(&t.url).map_err(|e| Failure::text(&format!("invalid url: {e}")))?;
        self.policy.check_url(&url, d.environment).map_err(|e| Failure::text(&format!("refused target: {e}")))?;
        let secrets: Vec<&[u8]> = t.secrets.iter().map(String::as_bytes).collect();
        let header = signature::header(&secrets, Utc::now().timestamp(), d.body.as_bytes());
        let resp = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(signature::HEADER, header)
            .header(DELIVERY_HEADER, d.id.to_string())
            .header(EVENT_HEADER, &d.event_type)
            .body(d.body.clone())
            .send()
            .await
            .map_err(|e| Failure::text(&error_chain(&e)))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
        let body = read_prefix(resp, self.cfg.response_body_limit).await;
        Ok(Answer { status: status.as_u16(), retry_after, body })
    }

    async fn record(
        &self,
        d: &webhook_delivery::Model,
        url: &str,
        started_at: DateTime<Utc>,
        latency: Duration,
        result: Result<Answer, Failure>,
        removed: bool,
    ) -> Result<Outcome, WebhookError> {
        let (code, body, error, retry_after) = match &result {
            Ok(a) => (Some(a.status), Some(a.body.clone()), None, a.retry_after),
            Err(f) => (None, None, Some(f.0.clone()), None),
        };
        let ok = code.is_some_and(|c| (200..300).contains(&c));
        let error = match (ok, code, error) {
            (true, ..) => None,
            (false, Some(c), None) => Some(format!("HTTP {c}")),
            (false, _, e) => e,
        };
        let step = usize::try_from(d.retry_step).unwrap_or(usize::MAX);
        let verdict = match (ok, removed, next_delay(&self.cfg, step, retry_after)) {
            (true, ..) => Verdict::Delivered,
            (false, true, _) => Verdict::Dead,
            (false, false, Some(delay)) => Verdict::Retry(delay),
            (false, false, None) => Verdict::Dead,
        };
        let trigger = match verdict {
            Verdict::Delivered => DeliveryTrigger::Delivered,
            Verdict::Retry(_) => DeliveryTrigger::FailedWillRetry,
            Verdict::Dead => DeliveryTrigger::FailedFinal,
        };
        let next = d.status.on(trigger).expect("a claimed delivery is open");
        // What the endpoint answered is the merchant's text: stored as a text column can hold it.
        let attempt = webhook_attempt::Model {
            id: Uuid::now_v7(),
            delivery_id: d.id,
            attempt_no: d.attempt_count,
            url: storable(url, URL_COLUMN),
            started_at,
            latency_ms: i64::try_from(latency.as_millis()).unwrap_or(i64::MAX),
            status_code: code.map(i32::from),
            error: error.map(|e| storable(&e, ERROR_COLUMN)),
            response_body: body.map(|b| storable(&b, BODY_COLUMN)),
            succeeded: ok,
        };
        let record = Record { attempt, from: d.status, retry_step: d.retry_step, next, verdict };
        Ok(match self.records().call(record).await?? {
            // The lease lapsed and another deliverer took the delivery over; it decides.
            Written::TakenOver => Outcome::Skipped,
            // The database refused the record even alone: dead with the reason.
            Written::Dead => Outcome::Dead,
            Written::Applied => match verdict {
                Verdict::Delivered => Outcome::Delivered,
                Verdict::Retry(delay) => Outcome::RetryAfter(delay),
                Verdict::Dead => Outcome::Dead,
            },
        })
    }
}

/// What a job whose claim was refused does next.
#[derive(Debug, PartialEq, Eq)]
enum Unclaimed {
    Done(Outcome),
    /// Open, due, not leased and nothing earlier open: the claim can succeed now.
    ClaimAgain,
}

/// The decision after a refused claim, from the delivery as it is now and the earliest open
/// earlier sibling it waits for (if it waits for any).
fn after_refused_claim(
    d: &webhook_delivery::Model,
    blocker: Option<&webhook_delivery::Model>,
    now: DateTime<Utc>,
) -> Unclaimed {
    let leased = d.lease_until.is_some_and(|t| t >= now);
    if !d.status.is_open() || leased {
        return Unclaimed::Done(Outcome::Skipped);
    }
    if d.next_attempt_at > now {
        return Unclaimed::Done(Outcome::NotDue((d.next_attempt_at - now).to_std().unwrap_or_default()));
    }
    match blocker {
        Some(earlier) => {
            let at = earlier.next_attempt_at.max(now) + chrono_delay(ORDER_RECHECK);
            Unclaimed::Done(Outcome::NotDue((at - now).to_std().unwrap_or_default()))
        }
        None => Unclaimed::ClaimAgain,
    }
}

/// The look for what `d` waits behind ([`Deliverer::blocker`]): the earliest open delivery with
/// its order key, merchant, environment and endpoint (a delivery made before endpoints had ids
/// counts for every endpoint) whose event happened before `d`'s. `None`: `d` waits for nothing.
/// Read through the open deliveries' index (`open_rows::OPEN_DELIVERIES`).
pub fn earlier_open(d: &webhook_delivery::Model) -> Option<sea_orm::Select<webhook_delivery::Entity>> {
    use sea_orm::{Condition, QueryOrder};
    let key = d.order_key.filter(|_| d.wait_for_earlier)?;
    let mut same_endpoint = Condition::any().add(webhook_delivery::Column::EndpointId.is_null());
    if let Some(e) = d.endpoint_id {
        same_endpoint = same_endpoint.add(webhook_delivery::Column::EndpointId.eq(e));
    } else {
        same_endpoint = same_endpoint.add(webhook_delivery::Column::EndpointId.is_not_null());
    }
    Some(
        webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::OrderKey.eq(key))
            .filter(Expr::cust(open_rows::OPEN_DELIVERIES))
            .filter(same_endpoint)
            .filter(webhook_delivery::Column::MerchantId.eq(d.merchant_id))
            .filter(webhook_delivery::Column::Environment.eq(d.environment))
            .filter(
                Condition::any().add(webhook_delivery::Column::EventCreatedAt.lt(d.event_created_at)).add(
                    Condition::all()
                        .add(webhook_delivery::Column::EventCreatedAt.eq(d.event_created_at))
                        .add(webhook_delivery::Column::EventId.lt(d.event_id)),
                ),
            )
            .order_by_asc(webhook_delivery::Column::EventCreatedAt),
    )
}

/// Ids of open deliveries due for at least `stale_after` that no job has taken: their job was
/// lost (flushed queue, deliverer killed between steps). Marks them enqueued now.
pub async fn stale(db: &DatabaseConnection, stale_after: Duration, limit: u64) -> Result<Vec<Uuid>, DbErr> {
    let now = Utc::now();
    let cutoff = now - chrono_delay(stale_after);
    let ids: Vec<Uuid> = stale_query(now, cutoff, limit).into_tuple().all(db).await?;
    if !ids.is_empty() {
        webhook_delivery::Entity::update_many()
            .col_expr(webhook_delivery::Column::EnqueuedAt, Expr::value(now))
            .filter(webhook_delivery::Column::Id.is_in(ids.clone()))
            .exec(db)
            .await?;
    }
    Ok(ids)
}

/// The ids of open deliveries due since `cutoff` with no live lease at `now` that no job has
/// taken since `cutoff` ([`stale`]), read through the index of open deliveries, whole
/// (`open_rows::OPEN_DELIVERIES`): the sweep costs what is open, not the history.
pub fn stale_query(now: DateTime<Utc>, cutoff: DateTime<Utc>, limit: u64) -> sea_orm::Select<webhook_delivery::Entity> {
    use sea_orm::sea_query::ExprTrait;
    webhook_delivery::Entity::find()
        .select_only()
        .column(webhook_delivery::Column::Id)
        .filter(Expr::cust(open_rows::OPEN_DELIVERIES))
        .filter(webhook_delivery::Column::NextAttemptAt.lte(cutoff))
        .filter(webhook_delivery::Column::LeaseUntil.is_null().or(webhook_delivery::Column::LeaseUntil.lt(now)))
        .filter(webhook_delivery::Column::EnqueuedAt.is_null().or(webhook_delivery::Column::EnqueuedAt.lte(cutoff)))
        .limit(limit)
}

fn chrono_delay(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::days(1))
}

/// What a finished attempt leads to.
#[derive(Clone, Copy)]
enum Verdict {
    Delivered,
    Retry(Duration),
    Dead,
}

struct Answer {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

struct Failure(String);

impl Failure {
    fn text(s: &str) -> Failure {
        Failure(truncate(s, ERROR_LIMIT))
    }
}

/// The delay before the retry after a failed attempt at schedule step `step` (0-based), or
/// `None` when the schedule is exhausted. The scheduled delay is spread by the jitter; a
/// `Retry-After` longer than that postpones it, up to `retry_after_max_secs`.
pub fn next_delay(cfg: &WebhooksConfig, step: usize, retry_after: Option<Duration>) -> Option<Duration> {
    let base = Duration::from_secs(*cfg.retry_schedule_secs.get(step)?);
    let base_ms = u64::try_from(base.as_millis()).unwrap_or(u64::MAX);
    let spread = base_ms / 100 * u64::from(cfg.jitter_percent);
    let jittered =
        if spread == 0 { base_ms } else { base_ms - spread + rand::random_range(0..=spread.saturating_mul(2)) };
    let mut delay = Duration::from_millis(jittered);
    if let Some(ra) = retry_after {
        delay = delay.max(ra.min(Duration::from_secs(cfg.retry_after_max_secs)));
    }
    Some(delay)
}

/// `Retry-After` as delay-seconds or an HTTP date.
pub fn parse_retry_after(v: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// The first `limit` bytes of the body, as text.
async fn read_prefix(mut resp: reqwest::Response, limit: usize) -> String {
    let mut buf = Vec::new();
    while buf.len() < limit {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c[..c.len().min(limit - buf.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// `s` as a text column of `width` characters holds it, on PostgreSQL and SQLite alike: NUL
/// (which PostgreSQL refuses in text) becomes U+FFFD, the character invalid UTF-8 in a response
/// is already read as, and a longer text is cut to `width` characters, the last one `…`.
fn storable(s: &str, width: usize) -> String {
    let mut out: String = s.chars().take(width).map(|c| if c == '\0' { '\u{FFFD}' } else { c }).collect();
    if s.chars().nth(width).is_some() {
        out.pop();
        out.push('…');
    }
    out
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use entity::DeliveryStatus;

    fn delivery(now: DateTime<Utc>) -> webhook_delivery::Model {
        let e = entity::event::Model::new(
            Uuid::now_v7(),
            entity::Environment::Test,
            "invoice.paid",
            "k".into(),
            serde_json::json!({}),
            now,
        );
        domain::webhooks::dispatch::new_delivery(&e, Some(Uuid::now_v7()), now)
    }

    #[test]
    fn the_claims_ordering_guard_repeats_the_open_deliveries_predicate() {
        // Else PostgreSQL and SQLite cannot prove it implies the partial index's predicate.
        let open = format!("earlier.{}", open_rows::OPEN_DELIVERIES);
        assert!(NO_EARLIER_OPEN.contains(&open), "{NO_EARLIER_OPEN}");
    }

    #[test]
    fn the_open_deliveries_predicate_names_exactly_the_open_statuses() {
        for s in DeliveryStatus::ALL {
            let named = open_rows::OPEN_DELIVERIES.contains(&format!("'{}'", s.as_str()));
            assert_eq!(named, s.is_open(), "{s:?} in {}", open_rows::OPEN_DELIVERIES);
        }
    }

    #[test]
    fn only_a_delivery_made_to_wait_looks_for_an_earlier_one() {
        let now = Utc::now();
        let mut d = delivery(now);
        d.order_key = Some(Uuid::now_v7());
        assert!(earlier_open(&d).is_none());
        d.wait_for_earlier = true;
        assert!(earlier_open(&d).is_some());
        d.order_key = None;
        assert!(earlier_open(&d).is_none());
    }

    #[test]
    fn a_refused_claim_is_retried_at_once_when_nothing_earlier_is_open_any_more() {
        let now = Utc::now();
        let d = delivery(now - chrono::Duration::seconds(1));
        // The earlier sibling closed between the refused claim and this look: claim again,
        // do not leave the delivery to the sweeper.
        assert_eq!(after_refused_claim(&d, None, now), Unclaimed::ClaimAgain);
        // Still open: due again just after the earlier one's next attempt.
        let mut earlier = delivery(now - chrono::Duration::seconds(2));
        earlier.next_attempt_at = now + chrono::Duration::seconds(5);
        assert_eq!(
            after_refused_claim(&d, Some(&earlier), now),
            Unclaimed::Done(Outcome::NotDue(Duration::from_secs(5) + ORDER_RECHECK))
        );
        // Early, leased by another attempt, or closed.
        let mut early = d.clone();
        early.next_attempt_at = now + chrono::Duration::seconds(3);
        assert_eq!(after_refused_claim(&early, None, now), Unclaimed::Done(Outcome::NotDue(Duration::from_secs(3))));
        let mut leased = d.clone();
        leased.lease_until = Some(now + chrono::Duration::seconds(10));
        assert_eq!(after_refused_claim(&leased, None, now), Unclaimed::Done(Outcome::Skipped));
        let mut done = d;
        done.status = DeliveryStatus::Succeeded;
        assert_eq!(after_refused_claim(&done, None, now), Unclaimed::Done(Outcome::Skipped));
    }

    #[test]
    fn schedule_with_jitter_then_dead() {
        let cfg = WebhooksConfig::default();
        let expect = [5u64, 300, 1800, 7200, 18_000, 36_000, 36_000];
        for (step, secs) in expect.iter().enumerate() {
            for _ in 0..50 {
                let d = next_delay(&cfg, step, None).unwrap();
                let (lo, hi) = (Duration::from_millis(secs * 900), Duration::from_millis(secs * 1100));
                assert!(d >= lo && d <= hi, "step {step}: {d:?} outside {lo:?}..{hi:?}");
            }
        }
        assert_eq!(next_delay(&cfg, expect.len(), None), None, "after the 7th retry the delivery is dead");
    }

    #[test]
    fn retry_after_postpones_within_bounds() {
        let cfg = WebhooksConfig { jitter_percent: 0, ..WebhooksConfig::default() };
        assert_eq!(next_delay(&cfg, 0, Some(Duration::from_secs(60))), Some(Duration::from_secs(60)));
        // Shorter than the schedule: the schedule wins.
        assert_eq!(next_delay(&cfg, 1, Some(Duration::from_secs(1))), Some(Duration::from_secs(300)));
        // Longer than the bound: capped.
        assert_eq!(next_delay(&cfg, 0, Some(Duration::from_secs(10_000_000))), Some(Duration::from_secs(36_000)));
    }

    #[test]
    fn retry_after_forms() {
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn stored_text_has_no_nul_and_fits_its_column() {
        assert_eq!(storable("ok", 4), "ok");
        assert_eq!(storable("a\0b\0", 4), "a\u{FFFD}b\u{FFFD}");
        assert_eq!(storable("abcde", 4), "abc…");
        assert_eq!(storable("éééé\0", 4), "ééé…");
        assert_eq!(storable(&String::from_utf8_lossy(b"\xff\0"), 4), "\u{FFFD}\u{FFFD}");
    }

    #[test]
    fn truncation_keeps_char_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("ééé", 3), "é…");
    }
}
