//! Webhook delivery, driven in-process against real loopback receivers that verify every
//! signature: environments kept apart, the spec's body, the retry schedule through a receiver
//! that is down, failing, slow and rate limiting, dead deliveries and replay, one send per
//! attempt under concurrency, lost jobs found again, secret rotation, outbound safety at
//! connect time, and records the database cannot store failing no other delivery of their
//! group. Runs on SQLite, and on PostgreSQL with `pg-tests`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use api::webhooks::receiver::{Behaviour, Receiver};
use chrono::Utc;
use domain::config::WebhooksConfig;
use domain::events::{self, EventKind};
use domain::webhooks::outbound::TargetPolicy;
use domain::webhooks::secrets::SecretBox;
use domain::webhooks::{WebhookError, admin, dispatch, endpoints};
use entity::{DeliveryId, DeliveryStatus, Environment, event, webhook_attempt, webhook_delivery};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::json;
use testkit::TestApp;
use uuid::Uuid;
use workers::deliverer::{self, Deliverer, Outcome};

const ANY: &str = "127.0.0.1:0";

fn sbox() -> SecretBox {
    SecretBox::new([42; 32])
}

/// Immediate retries (the schedule's length is what matters here), short timeout, loopback
/// targets allowed, no endpoint caching.
fn fast() -> WebhooksConfig {
    WebhooksConfig {
        retry_schedule_secs: vec![0; 7],
        timeout_ms: 500,
        allow_insecure_targets: true,
        endpoint_cache_ms: 0,
        ..WebhooksConfig::default()
    }
}

struct Hooks {
    app: TestApp,
    merchant: Uuid,
    deliverer: Arc<Deliverer>,
}

impl Hooks {
    async fn new(cfg: WebhooksConfig) -> Hooks {
        let app = TestApp::spawn().await;
        let merchant = app.merchant().await;
        let deliverer = Arc::new(Deliverer::new(app.state.db.clone(), sbox(), cfg).unwrap());
        Hooks { app, merchant, deliverer }
    }

    fn db(&self) -> &DatabaseConnection {
        &self.app.state.db
    }

    /// Sets the endpoint through the same path as `ops webhooks set`; returns the secret.
    async fn endpoint(&self, env: Environment, url: &str) -> String {
        self.endpoint_of(self.merchant, env, url).await
    }

    async fn endpoint_of(&self, merchant: Uuid, env: Environment, url: &str) -> String {
        let policy = TargetPolicy { allow_insecure: true };
        let (_, secret) = endpoints::set(self.db(), &sbox(), policy, merchant.into(), env, url).await.unwrap();
        secret.expect("a new endpoint's secret")
    }

    async fn event(&self, env: Environment, kind: EventKind, n: usize) -> Uuid {
        self.event_of(self.merchant, env, kind, n).await
    }

    async fn event_of(&self, merchant: Uuid, env: Environment, kind: EventKind, n: usize) -> Uuid {
        let data = json!({"invoice_id": Uuid::now_v7(), "status": "paid", "n": n});
        let key = format!("{kind}:{}", Uuid::now_v7());
        events::emit(self.db(), merchant.into(), env, kind, key, data).await.unwrap().expect("a new event").into()
    }

    /// Another merchant whose test endpoint is a receiver that answers 200 and verifies.
    async fn merchant_with_receiver(&self) -> (Uuid, Receiver) {
        let merchant = self.app.merchant().await;
        let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
        rx.set_secrets(&[&self.endpoint_of(merchant, Environment::Test, &rx.url()).await]);
        (merchant, rx)
    }

    /// Attempts every delivery of `ids` at once, their records written as one group (the
    /// deliverer's record writer is held until all of them are in). Each delivery's outcome.
    async fn attempt_in_one_group(&self, ids: &[Uuid]) -> std::collections::HashMap<Uuid, Result<Outcome, String>> {
        let held = self.deliverer.hold_records().await;
        let groups_before = self.deliverer.group_writes().1;
        let tasks: Vec<_> = ids
            .iter()
            .map(|&id| {
                let d = self.deliverer.clone();
                tokio::spawn(async move { (id, d.attempt(id).await.map_err(|e| e.to_string())) })
            })
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.deliverer.records_pending() < ids.len() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} records of {} came",
                self.deliverer.records_pending(),
                ids.len()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(held);
        let mut outcomes = std::collections::HashMap::new();
        for t in tasks {
            let (id, outcome) = t.await.unwrap();
            outcomes.insert(id, outcome);
        }
        assert_eq!(self.deliverer.group_writes().1, groups_before + 1, "the records were written as one group");
        outcomes
    }

    async fn dispatch(&self) -> Vec<Uuid> {
        dispatch::dispatch_batch(self.db(), 1000).await.unwrap().deliveries
    }

    /// Attempts until the delivery is delivered or dead, waiting out each retry delay.
    async fn drive(&self, id: Uuid) -> Outcome {
        for _ in 0..50 {
            match self.deliverer.attempt(id).await.unwrap() {
                Outcome::RetryAfter(d) | Outcome::NotDue(d) => tokio::time::sleep(d).await,
                done => return done,
            }
        }
        panic!("delivery {id} never finished")
    }

    async fn delivery(&self, id: Uuid) -> webhook_delivery::Model {
        webhook_delivery::Entity::find_by_id(id).one(self.db()).await.unwrap().unwrap()
    }

    async fn attempts(&self, id: Uuid) -> Vec<webhook_attempt::Model> {
        admin::attempts(self.db(), id.into()).await.unwrap().1
    }
}

#[tokio::test]
async fn environments_reach_only_their_own_endpoint_with_the_spec_body() {
    let h = Hooks::new(fast()).await;
    let test_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let live_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let test_secret = h.endpoint(Environment::Test, &test_rx.url()).await;
    let live_secret = h.endpoint(Environment::Live, &live_rx.url()).await;
    assert!(test_secret.starts_with("whsec_") && live_secret.starts_with("whsec_"));
    assert_ne!(test_secret, live_secret);
    test_rx.set_secrets(&[&test_secret]);
    live_rx.set_secrets(&[&live_secret]);
    // Stored encrypted only.
    let row = entity::webhook_endpoint::Entity::find()
        .filter(entity::webhook_endpoint::Column::MerchantId.eq(h.merchant))
        .filter(entity::webhook_endpoint::Column::Environment.eq(Environment::Test))
        .one(h.db())
        .await
        .unwrap()
        .unwrap();
    assert!(!row.secret_ciphertext.contains(&test_secret["whsec_".len()..]));

    let paid = h.event(Environment::Test, EventKind::InvoicePaid, 1).await;
    let credited = h.event(Environment::Test, EventKind::BalanceCredited, 2).await;
    let live_paid = h.event(Environment::Live, EventKind::InvoicePaid, 3).await;
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 3);
    for id in &ids {
        assert_eq!(h.drive(*id).await, Outcome::Delivered);
    }
    let (t, l) = (test_rx.received(), live_rx.received());
    assert_eq!(t.len(), 2, "test events at the test endpoint only");
    assert_eq!(l.len(), 1, "live events at the live endpoint only");
    assert!(t.iter().chain(&l).all(|r| r.verified && r.answered == 200));
    assert_eq!(l[0].body["data"]["n"], 3);
    // Body: event, created_at, data; event_id on balance.credited only, equal to the event id.
    let by_event = |e: &str| t.iter().find(|r| r.event == e).unwrap().body.clone();
    let b = by_event("balance.credited");
    assert_eq!(b["event_id"], json!(credited));
    assert!(b["created_at"].as_str().unwrap().ends_with('Z'));
    let p = by_event("invoice.paid");
    assert!(p.get("event_id").is_none());
    assert_eq!(p.as_object().unwrap().len(), 3);
    // Delivery ids: one per delivery, the row's id.
    let mut seen: Vec<String> = t.iter().chain(&l).map(|r| r.delivery_id.clone()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 3);
    for id in &ids {
        assert!(seen.contains(&id.to_string()));
        let d = h.delivery(*id).await;
        assert_eq!(d.status, DeliveryStatus::Succeeded);
        assert!(d.delivered_at.is_some());
    }
    let _ = (paid, live_paid);
    // Dispatching again finds nothing; every event is marked dispatched.
    assert!(h.dispatch().await.is_empty());
    assert_eq!(event::Entity::find().filter(event::Column::DispatchedAt.is_null()).count(h.db()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_receiver_that_is_down_fails_is_slow_and_rate_limits_gets_it_in_the_end() {
    let h = Hooks::new(fast()).await;
    // Down: a port nobody listens on yet.
    let port = std::net::TcpListener::bind(ANY).unwrap().local_addr().unwrap().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let secret = h.endpoint(Environment::Test, &format!("http://{addr}/webhooks")).await;
    h.event(Environment::Test, EventKind::InvoicePaid, 1).await;
    let id = h.dispatch().await[0];
    let first = h.deliverer.attempt(id).await.unwrap();
    assert!(matches!(first, Outcome::RetryAfter(_)), "{first:?}");

    // Up, but: 500, then slower than the 500 ms timeout, then 429 with Retry-After: 1.
    let rx = Receiver::start(addr, &[&secret], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    rx.script([Behaviour::Status(500), Behaviour::Hang(Duration::from_secs(2)), Behaviour::TooManyRequests(1)]);
    let before_429 = std::time::Instant::now();
    assert_eq!(h.drive(id).await, Outcome::Delivered);
    assert!(before_429.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");

    let a = h.attempts(id).await;
    let codes: Vec<Option<i32>> = a.iter().map(|a| a.status_code).collect();
    assert_eq!(codes, [None, Some(500), None, Some(429), Some(200)]);
    assert_eq!(a.iter().map(|a| a.attempt_no).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert!(a[0].error.as_deref().unwrap().contains("Connection refused"), "{:?}", a[0].error);
    assert_eq!(a[1].response_body.as_deref(), Some("receiver failure"));
    assert!(a[2].error.as_deref().unwrap().contains("timed out"), "{:?}", a[2].error);
    assert!(a[2].latency_ms >= 450 && a[2].latency_ms < 2000, "{}", a[2].latency_ms);
    assert_eq!(a[3].response_body.as_deref(), Some("slow down"));
    assert!(a[4].succeeded && a[..4].iter().all(|a| !a.succeeded));
    // The 429's retry was scheduled at least a second out.
    assert!(a[4].started_at - a[3].started_at >= chrono::Duration::milliseconds(950));
    // Every request the receiver saw was signed correctly, with the same delivery id.
    let r = rx.received();
    assert_eq!(r.len(), 4);
    assert!(r.iter().all(|r| r.verified && r.delivery_id == id.to_string()));
    let d = h.delivery(id).await;
    assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Succeeded, 5, Some(200)));
}

#[tokio::test]
async fn after_the_last_retry_a_delivery_is_dead_until_replayed() {
    let cfg = WebhooksConfig { retry_schedule_secs: vec![0, 0], ..fast() };
    let h = Hooks::new(cfg).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Status(503)).await.unwrap();
    let secret = h.endpoint(Environment::Test, &rx.url()).await;
    rx.set_secrets(&[&secret]);
    let since = Utc::now() - chrono::Duration::seconds(5);
    h.event(Environment::Test, EventKind::PayoutFailed, 1).await;
    let id = h.dispatch().await[0];
    assert_eq!(h.drive(id).await, Outcome::Dead);
    let d = h.delivery(id).await;
    assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Dead, 3, Some(503)));
    assert!(d.dead_at.is_some());
    // Dead: further jobs do nothing.
    assert_eq!(h.deliverer.attempt(id).await.unwrap(), Outcome::Skipped);
    assert_eq!(rx.count(), 3);

    // The operator lists the failed ones in the time range and replays them.
    let filter = admin::DeliveryFilter { since: Some(since), ..Default::default() };
    assert_eq!(admin::failed(h.db(), &filter).await.unwrap(), [DeliveryId::from(id)]);
    let later = admin::DeliveryFilter { since: Some(Utc::now() + chrono::Duration::seconds(60)), ..Default::default() };
    assert!(admin::failed(h.db(), &later).await.unwrap().is_empty());
    let listed = admin::list(
        h.db(),
        &admin::DeliveryFilter {
            statuses: vec![DeliveryStatus::Dead],
            event_type: Some("payout.failed".into()),
            limit: 10,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(listed.len(), 1);
    rx.set_default(Behaviour::Ok(Duration::ZERO));
    assert!(admin::replay(h.db(), id.into()).await.unwrap());
    assert!(!admin::replay(h.db(), id.into()).await.unwrap(), "already pending");
    assert_eq!(h.drive(id).await, Outcome::Delivered);
    let r = rx.received();
    assert_eq!(r.len(), 4);
    assert!(r.iter().all(|r| r.delivery_id == id.to_string()), "a replay keeps the delivery id");
    assert_eq!(h.attempts(id).await.len(), 4, "the history keeps every attempt");
    // A delivered one can be replayed too (the merchant lost it on their side).
    assert!(admin::replay(h.db(), id.into()).await.unwrap());
    assert_eq!(h.drive(id).await, Outcome::Delivered);
    assert_eq!(rx.count(), 5);
    assert!(matches!(admin::replay(h.db(), Uuid::now_v7().into()).await, Err(WebhookError::UnknownDelivery(_))));
}

/// Attempts running at once share their claims and records (`deliverer::group`): each still gets
/// its own outcome: the delivered ones succeed once, the failed ones are scheduled again, a
/// duplicated job sends nothing, and a record whose delivery another deliverer took over is
/// refused while the rest of its group is written.
#[tokio::test]
async fn attempts_running_together_are_written_together_each_in_its_own_right() {
    let h = Hooks::new(fast()).await;
    let ok_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::from_millis(300))).await.unwrap();
    let failing_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Status(500)).await.unwrap();
    let ok_secret = h.endpoint(Environment::Test, &ok_rx.url()).await;
    let failing_secret = h.endpoint(Environment::Live, &failing_rx.url()).await;
    ok_rx.set_secrets(&[&ok_secret]);
    failing_rx.set_secrets(&[&failing_secret]);
    for n in 0..30 {
        h.event(Environment::Test, EventKind::BalanceCredited, n).await;
    }
    for n in 0..10 {
        h.event(Environment::Live, EventKind::BalanceCredited, n).await;
    }
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 40);
    let env_of = |d: &webhook_delivery::Model| d.environment;
    let mut test_ids = Vec::new();
    for id in &ids {
        if env_of(&h.delivery(*id).await) == Environment::Test {
            test_ids.push(*id);
        }
    }
    // Every delivery once, the first five twice (a duplicated job).
    let jobs: Vec<Uuid> = ids.iter().chain(&ids[..5]).copied().collect();
    let tasks: Vec<_> = jobs
        .iter()
        .map(|&id| {
            let d = h.deliverer.clone();
            tokio::spawn(async move { (id, d.attempt(id).await.unwrap()) })
        })
        .collect();
    // While the test receiver holds its answers, another deliverer takes one delivery over (as
    // after a lapsed lease): its attempt count moves on.
    let taken = test_ids[7];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while h.delivery(taken).await.lease_until.is_none() {
        assert!(std::time::Instant::now() < deadline, "the attempt never claimed {taken}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    webhook_delivery::Entity::update_many()
        .col_expr(webhook_delivery::Column::AttemptCount, Expr::value(2))
        .filter(webhook_delivery::Column::Id.eq(taken))
        .exec(h.db())
        .await
        .unwrap();
    let mut outcomes = std::collections::HashMap::<Uuid, Vec<Outcome>>::new();
    for t in tasks {
        let (id, outcome) = t.await.unwrap();
        outcomes.entry(id).or_default().push(outcome);
    }
    for id in &ids {
        let mut got = outcomes[id].clone();
        got.retain(|o| *o != Outcome::Skipped);
        let d = h.delivery(*id).await;
        let attempts = h.attempts(*id).await;
        assert_eq!(attempts.len(), 1, "one attempt row for {id}");
        if *id == taken {
            assert!(got.is_empty(), "the taken-over delivery's record is refused: {:?}", outcomes[id]);
            assert_eq!((d.status, d.attempt_count), (DeliveryStatus::Pending, 2), "left to its new owner");
        } else if test_ids.contains(id) {
            assert_eq!(got, [Outcome::Delivered], "{id}");
            assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Succeeded, 1, Some(200)));
            assert!(d.delivered_at.is_some() && d.lease_until.is_none() && attempts[0].succeeded);
        } else {
            assert!(matches!(got[..], [Outcome::RetryAfter(_)]), "{id}: {got:?}");
            assert_eq!((d.status, d.retry_step, d.last_status_code), (DeliveryStatus::Retrying, 1, Some(500)));
            assert_eq!(attempts[0].status_code, Some(500));
        }
    }
    assert_eq!(ok_rx.count(), 30, "each test delivery sent once, the taken-over one too");
    assert_eq!(failing_rx.count(), 10);
    assert!(ok_rx.received().iter().chain(&failing_rx.received()).all(|r| r.verified));
    let (claims, records) = h.deliverer.group_writes();
    assert!(claims < 45 && records < 40, "45 jobs at once took {claims} claims and {records} records");
}

#[tokio::test]
async fn concurrent_jobs_for_one_delivery_send_it_once() {
    let h = Hooks::new(fast()).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::from_millis(100))).await.unwrap();
    let secret = h.endpoint(Environment::Test, &rx.url()).await;
    rx.set_secrets(&[&secret]);
    h.event(Environment::Test, EventKind::InvoicePaid, 1).await;
    let id = h.dispatch().await[0];
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let d = h.deliverer.clone();
            tokio::spawn(async move { d.attempt(id).await.unwrap() })
        })
        .collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Delivered).count(), 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == Outcome::Skipped).count(), 9);
    assert_eq!(rx.count(), 1);
    assert_eq!(h.attempts(id).await.len(), 1);
}

#[tokio::test]
async fn concurrent_dispatchers_make_one_delivery_per_event_and_skip_merchants_without_endpoint() {
    let h = Hooks::new(fast()).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    h.endpoint(Environment::Test, &rx.url()).await;
    for i in 0..150 {
        h.event(Environment::Test, EventKind::InvoiceConfirming, i).await;
    }
    // Live has no endpoint: its events are dispatched without a delivery.
    for i in 0..20 {
        h.event(Environment::Live, EventKind::InvoiceConfirming, i).await;
    }
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let db = h.db().clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let r = dispatch::dispatch_batch(&db, 25).await.unwrap();
                    mine.extend(r.deliveries);
                    if r.events == 0 {
                        return mine;
                    }
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!((n, all.len()), (150, 150), "each delivery created and handed out once");
    assert_eq!(webhook_delivery::Entity::find().count(h.db()).await.unwrap(), 150);
    let live = webhook_delivery::Entity::find()
        .filter(webhook_delivery::Column::Environment.eq(Environment::Live))
        .count(h.db())
        .await
        .unwrap();
    assert_eq!(live, 0);
    assert_eq!(event::Entity::find().filter(event::Column::DispatchedAt.is_null()).count(h.db()).await.unwrap(), 0);
}

#[tokio::test]
async fn deliveries_whose_job_was_lost_are_found_again() {
    let cfg = WebhooksConfig { timeout_ms: 200, ..fast() };
    let h = Hooks::new(cfg).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let secret = h.endpoint(Environment::Test, &rx.url()).await;
    rx.set_secrets(&[&secret]);
    for i in 0..3 {
        h.event(Environment::Test, EventKind::InvoicePaid, i).await;
    }
    let ids = h.dispatch().await;
    let stale_after = Duration::from_secs(30);
    // Just enqueued: not stale.
    assert!(deliverer::stale(h.db(), stale_after, 100).await.unwrap().is_empty());
    // As if the queue was flushed long ago (0), and as if a deliverer died mid-attempt with
    // its lease lapsed (1) or still held (2).
    let old = Utc::now() - chrono::Duration::minutes(5);
    let set = |id: Uuid, lease: Option<chrono::DateTime<Utc>>| {
        webhook_delivery::Entity::update_many()
            .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(old))
            .col_expr(webhook_delivery::Column::EnqueuedAt, Expr::value(old))
            .col_expr(webhook_delivery::Column::LeaseUntil, Expr::value(lease))
            .filter(webhook_delivery::Column::Id.eq(id))
            .exec(h.db())
    };
    set(ids[0], None).await.unwrap();
    set(ids[1], Some(old)).await.unwrap();
    set(ids[2], Some(Utc::now() + chrono::Duration::minutes(1))).await.unwrap();
    let mut found = deliverer::stale(h.db(), stale_after, 100).await.unwrap();
    found.sort();
    let mut expect = vec![ids[0], ids[1]];
    expect.sort();
    assert_eq!(found, expect);
    // Marked enqueued: the next sweep does not push them again.
    assert!(deliverer::stale(h.db(), stale_after, 100).await.unwrap().is_empty());
    // The held lease blocks an attempt; the lapsed one does not.
    assert_eq!(h.deliverer.attempt(ids[2]).await.unwrap(), Outcome::Skipped);
    assert_eq!(h.deliverer.attempt(ids[1]).await.unwrap(), Outcome::Delivered);
    assert_eq!(h.deliverer.attempt(ids[0]).await.unwrap(), Outcome::Delivered);
    // A job that arrives before its delivery is due is told to come back.
    h.event(Environment::Test, EventKind::InvoicePaid, 9).await;
    let early = h.dispatch().await[0];
    webhook_delivery::Entity::update_many()
        .col_expr(webhook_delivery::Column::NextAttemptAt, Expr::value(Utc::now() + chrono::Duration::seconds(30)))
        .filter(webhook_delivery::Column::Id.eq(early))
        .exec(h.db())
        .await
        .unwrap();
    assert!(matches!(h.deliverer.attempt(early).await.unwrap(), Outcome::NotDue(d) if d > Duration::from_secs(25)));
}

#[tokio::test]
async fn rotation_signs_with_both_secrets_during_the_overlap() {
    let h = Hooks::new(fast()).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let old = h.endpoint(Environment::Test, &rx.url()).await;
    let (info, new) =
        endpoints::rotate(h.db(), &sbox(), h.merchant.into(), Environment::Test, chrono::Duration::hours(1))
            .await
            .unwrap();
    assert!(info.previous_secret_until.is_some());
    assert_ne!(old, new);
    // A receiver still on the old secret and one already on the new both verify.
    for secret in [&old, &new] {
        rx.set_secrets(&[secret]);
        h.event(Environment::Test, EventKind::Test, 0).await;
        let id = h.dispatch().await[0];
        assert_eq!(h.deliverer.attempt(id).await.unwrap(), Outcome::Delivered);
    }
    // Overlap over: only the new secret signs.
    entity::webhook_endpoint::Entity::update_many()
        .col_expr(entity::webhook_endpoint::Column::PreviousSecretExpiresAt, Expr::value(Utc::now()))
        .exec(h.db())
        .await
        .unwrap();
    rx.set_secrets(&[&old]);
    h.event(Environment::Test, EventKind::Test, 1).await;
    let id = h.dispatch().await[0];
    assert!(matches!(h.deliverer.attempt(id).await.unwrap(), Outcome::RetryAfter(_)));
    assert_eq!(rx.received().last().unwrap().answered, 400, "the old secret no longer verifies");
    rx.set_secrets(&[&new]);
    assert_eq!(h.drive(id).await, Outcome::Delivered);
    let header = rx.received().iter().filter(|r| r.verified).count();
    assert_eq!(header, 3);
    // Removal: new events are not delivered.
    assert!(endpoints::remove(h.db(), h.merchant.into(), Environment::Test).await.unwrap());
    h.event(Environment::Test, EventKind::Test, 2).await;
    assert!(h.dispatch().await.is_empty());
    assert!(matches!(
        admin::send_test(h.db(), h.merchant.into(), Environment::Test).await,
        Err(WebhookError::NoEndpoint(..))
    ));
}

#[tokio::test]
async fn internal_targets_are_refused_when_saved_and_when_connecting() {
    let strict = WebhooksConfig { allow_insecure_targets: false, ..fast() };
    let h = Hooks::new(strict).await;
    let policy = TargetPolicy { allow_insecure: false };
    let sb = sbox();
    let set = |env, url: &'static str| endpoints::set(h.db(), &sb, policy, h.merchant.into(), env, url);
    for (env, url, why) in [
        (Environment::Live, "http://shop.example/hook", "https"),
        (Environment::Live, "https://127.0.0.1/hook", "loopback"),
        (Environment::Test, "http://10.1.2.3/hook", "private"),
        (Environment::Live, "https://169.254.169.254/latest/meta-data", "metadata"),
        (Environment::Live, "https://[::1]/hook", "loopback"),
        (Environment::Live, "https://localhost/hook", "loopback"),
        (Environment::Live, "https://user:pw@shop.example/hook", "user name"),
        (Environment::Live, "not a url", "invalid url"),
    ] {
        let err = set(env, url).await.unwrap_err().to_string();
        assert!(err.contains(why), "{url}: {err}");
    }
    assert!(entity::webhook_endpoint::Entity::find().one(h.db()).await.unwrap().is_none(), "nothing saved");

    // A name that resolved elsewhere when saved and resolves to loopback now (DNS rebinding):
    // the deliverer's resolver refuses it at connect time.
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let now = Utc::now();
    let row = entity::webhook_endpoint::Model {
        id: Uuid::now_v7(),
        merchant_id: h.merchant,
        environment: Environment::Test,
        url: format!("http://localhost:{}/webhooks", rx.addr.port()),
        description: None,
        enabled_events: "[]".into(),
        disabled: false,
        secret_ciphertext: sbox().seal(h.merchant.into(), Environment::Test, "whsec_x"),
        previous_secret_ciphertext: None,
        previous_secret_expires_at: None,
        created_at: now,
        updated_at: now,
    };
    entity::webhook_endpoint::Entity::insert(entity::webhook_endpoint::ActiveModel::from(row))
        .exec(h.db())
        .await
        .unwrap();
    h.event(Environment::Test, EventKind::Test, 0).await;
    let id = h.dispatch().await[0];
    assert!(matches!(h.deliverer.attempt(id).await.unwrap(), Outcome::RetryAfter(_)));
    let a = h.attempts(id).await;
    assert!(a[0].error.as_deref().unwrap().contains("blocked address"), "{:?}", a[0].error);
    assert_eq!(rx.count(), 0, "nothing reached the loopback receiver");
    let list =
        webhook_attempt::Entity::find().order_by_asc(webhook_attempt::Column::StartedAt).all(h.db()).await.unwrap();
    assert_eq!(list.len(), 1);
}

/// Two events about one invoice dispatched in the same round: the later one waits (it is not
/// claimed while the earlier one is open) and is sent once the earlier one is delivered; an
/// event about another invoice, dispatched with them, never waits.
#[tokio::test]
async fn a_later_event_of_an_invoice_dispatched_with_its_earlier_one_waits_for_it() {
    let h = Hooks::new(fast()).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    rx.set_secrets(&[&h.endpoint(Environment::Test, &rx.url()).await]);
    let invoice = Uuid::now_v7();
    let emit = |kind: EventKind, invoice: Uuid| {
        let data = json!({"invoice_id": invoice, "status": kind.as_str()});
        events::emit(h.db(), h.merchant.into(), Environment::Test, kind, format!("{kind}:{invoice}"), data)
    };
    emit(EventKind::InvoiceConfirming, invoice).await.unwrap();
    emit(EventKind::InvoicePaid, invoice).await.unwrap();
    emit(EventKind::InvoiceConfirming, Uuid::now_v7()).await.unwrap();
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 3);
    let mut by_type = std::collections::HashMap::new();
    for id in &ids {
        let d = h.delivery(*id).await;
        by_type.entry(d.event_type.clone()).or_insert_with(Vec::new).push(d);
    }
    let first = by_type["invoice.confirming"].iter().find(|d| d.order_key == Some(invoice)).unwrap().clone();
    let other = by_type["invoice.confirming"].iter().find(|d| d.order_key != Some(invoice)).unwrap().clone();
    let later = by_type["invoice.paid"][0].clone();
    assert_eq!((first.wait_for_earlier, later.wait_for_earlier, other.wait_for_earlier), (false, true, false));
    // While the first is open, the later one is held back; the other invoice's goes at once.
    assert!(matches!(h.deliverer.attempt(later.id).await.unwrap(), Outcome::NotDue(_)));
    assert_eq!(h.drive(other.id).await, Outcome::Delivered);
    assert!(rx.received().iter().all(|r| r.event != "invoice.paid"));
    assert_eq!(h.drive(first.id).await, Outcome::Delivered);
    assert_eq!(h.drive(later.id).await, Outcome::Delivered);
    let order: Vec<String> = rx.received().iter().map(|r| r.event.clone()).collect();
    assert_eq!(order, ["invoice.confirming", "invoice.confirming", "invoice.paid"]);
}

/// `webhooks.ordered = false`: each delivery goes as soon as it is due, whatever came before.
#[tokio::test]
async fn unordered_deliveries_do_not_wait() {
    let h = Hooks::new(WebhooksConfig { ordered: false, ..fast() }).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    rx.set_secrets(&[&h.endpoint(Environment::Test, &rx.url()).await]);
    let invoice = Uuid::now_v7();
    for kind in [EventKind::InvoiceConfirming, EventKind::InvoicePaid] {
        let data = json!({"invoice_id": invoice, "status": kind.as_str()});
        events::emit(h.db(), h.merchant.into(), Environment::Test, kind, format!("{kind}:{invoice}"), data)
            .await
            .unwrap();
    }
    let ids = h.dispatch().await;
    let later = h.delivery(ids[1]).await;
    assert!(later.wait_for_earlier, "dispatch still marks it; the deliverer does not wait");
    assert_eq!(h.drive(later.id).await, Outcome::Delivered);
    assert_eq!(rx.received()[0].event, "invoice.paid");
}

/// Back-pressure: the dispatcher keeps at most `max_queued` deliveries waiting in the queue; the
/// other events wait in the outbox and are dispatched oldest first as the queue empties.
#[tokio::test]
async fn the_dispatcher_stops_at_max_queued_and_leaves_later_events_in_the_outbox() {
    let h = Hooks::new(fast()).await;
    h.endpoint(Environment::Test, "http://127.0.0.1:9/hook").await;
    let mut events = Vec::new();
    for n in 0..7 {
        events.push(h.event(Environment::Test, EventKind::InvoicePaid, n).await);
    }
    let tq = crate::common::TestQueues::new().await;
    let mut config = (*h.app.state.config).clone();
    (config.webhooks.max_queued, config.webhooks.dispatch_batch) = (3, 2);
    let ctx = workers::context::Shared::new(h.db().clone(), Arc::new(config), tq.queues.clone());
    let queue = tq.queues.full_name("webhook-deliver");
    // The events each delivery was made for, oldest first.
    let delivered = || async {
        let rows = webhook_delivery::Entity::find().order_by_asc(webhook_delivery::Column::EventCreatedAt).all(h.db());
        rows.await.unwrap().into_iter().map(|d| d.event_id).collect::<Vec<_>>()
    };
    workers::deliverer::job::dispatch(&ctx).await.unwrap();
    assert_eq!(tq.queues.waiting("webhook-deliver").await.unwrap(), 3);
    assert_eq!(delivered().await, events[..3]);
    // Full: the next rounds leave the outbox alone.
    workers::deliverer::job::dispatch(&ctx).await.unwrap();
    assert_eq!(delivered().await, events[..3]);
    let waiting = event::Entity::find().filter(event::Column::DispatchedAt.is_null()).count(h.db()).await.unwrap();
    assert_eq!(waiting, 4);
    // Taken by workers: the next oldest, up to the bound again, then the last one.
    tq.take_waiting(&queue).await;
    workers::deliverer::job::dispatch(&ctx).await.unwrap();
    assert_eq!(delivered().await, events[..6]);
    tq.take_waiting(&queue).await;
    workers::deliverer::job::dispatch(&ctx).await.unwrap();
    assert_eq!(delivered().await, events);
}

/// A receiver that answers every request 200 with `body`, byte for byte; counts the requests.
struct RawReceiver {
    url: String,
    count: Arc<AtomicUsize>,
}

impl RawReceiver {
    async fn start(body: Vec<u8>) -> RawReceiver {
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        let app = axum::Router::new().fallback(move || async move {
            counted.fetch_add(1, Ordering::SeqCst);
            body
        });
        let listener = tokio::net::TcpListener::bind(ANY).await.unwrap();
        let url = format!("http://{}/webhooks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        RawReceiver { url, count }
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

/// A merchant's endpoint answering bytes a text column cannot hold as they are (a NUL byte,
/// which PostgreSQL refuses in text, invalid UTF-8, more characters than the column's width),
/// its record written in one group with the records of other merchants' deliveries: its body is
/// stored escaped, and every delivery of the group is recorded delivered once and sent once
/// (before, the group's one transaction failed as a whole and every delivery in it was sent
/// again).
#[tokio::test]
async fn a_body_with_a_nul_byte_is_stored_escaped_and_fails_no_other_merchants_record() {
    let h = Hooks::new(WebhooksConfig { response_body_limit: 8192, ..fast() }).await;
    let mut body = b"ok\0\xff done ".to_vec();
    body.extend(std::iter::repeat_n(b'x', 5000));
    let odd = RawReceiver::start(body).await;
    h.endpoint(Environment::Test, &odd.url).await;
    let odd_event = h.event(Environment::Test, EventKind::InvoicePaid, 0).await;
    let mut others = Vec::new();
    for _ in 0..3 {
        let (merchant, rx) = h.merchant_with_receiver().await;
        for n in 0..4 {
            h.event_of(merchant, Environment::Test, EventKind::BalanceCredited, n).await;
        }
        others.push(rx);
    }
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 13);

    let outcomes = h.attempt_in_one_group(&ids).await;
    // The other merchants' deliveries first, then the odd one.
    let mut checked = Vec::new();
    for id in &ids {
        let odd_last = h.delivery(*id).await.event_id == odd_event;
        checked.push((odd_last, *id));
    }
    checked.sort();
    for (_, id) in &checked {
        assert_eq!(outcomes[id], Ok(Outcome::Delivered), "{id}");
        let d = h.delivery(*id).await;
        assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Succeeded, 1, Some(200)), "{id}");
        assert!(d.delivered_at.is_some() && d.lease_until.is_none());
        let attempts = h.attempts(*id).await;
        assert_eq!(attempts.len(), 1, "one attempt row for {id}");
        assert!(attempts[0].succeeded);
        if d.event_id == odd_event {
            // NUL and the invalid byte as U+FFFD; cut to the column's 4096 characters.
            let stored = attempts[0].response_body.clone().expect("the body is stored");
            assert!(stored.starts_with("ok\u{FFFD}\u{FFFD} done xxx"), "{:?}", &stored[..20]);
            assert!(!stored.contains('\0'));
            assert_eq!(stored.chars().count(), 4096);
            assert!(stored.ends_with("x…"));
        }
    }
    // Sent once each; a job for any of them again sends nothing.
    for id in &ids {
        assert_eq!(h.deliverer.attempt(*id).await.unwrap(), Outcome::Skipped);
    }
    assert_eq!(odd.count(), 1);
    for rx in &others {
        assert_eq!(rx.count(), 4);
        assert!(rx.received().iter().all(|r| r.verified));
    }
}

/// A record the database refuses even written alone (here a stray attempt row already holds the
/// attempt's number, so the unique index refuses it whatever its text) fails only itself: the
/// rest of its group is written (each delivery recorded delivered, sent once), and its delivery
/// is dead with the reason rather than sent again and again; a replay sends it again.
#[tokio::test]
async fn a_record_refused_even_alone_leaves_only_its_delivery_dead_with_the_reason() {
    let h = Hooks::new(fast()).await;
    let mut receivers = Vec::new();
    let mut first = None;
    for _ in 0..3 {
        let (merchant, rx) = h.merchant_with_receiver().await;
        for n in 0..3 {
            let e = h.event_of(merchant, Environment::Test, EventKind::InvoicePaid, n).await;
            first.get_or_insert(e);
        }
        receivers.push(rx);
    }
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 9);
    let mut refused = None;
    for id in &ids {
        if Some(h.delivery(*id).await.event_id) == first {
            refused = Some(*id);
        }
    }
    let refused = refused.expect("the first event's delivery");
    let stray = webhook_attempt::Model {
        id: Uuid::now_v7(),
        delivery_id: refused,
        attempt_no: 1,
        url: "stray".into(),
        started_at: Utc::now(),
        latency_ms: 0,
        status_code: None,
        error: Some("stray".into()),
        response_body: None,
        succeeded: false,
    };
    webhook_attempt::Entity::insert(webhook_attempt::ActiveModel::from(stray.clone())).exec(h.db()).await.unwrap();

    let outcomes = h.attempt_in_one_group(&ids).await;
    for id in &ids {
        let d = h.delivery(*id).await;
        let attempts = h.attempts(*id).await;
        if *id == refused {
            assert_eq!(outcomes[id], Ok(Outcome::Dead));
            assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Dead, 1, Some(200)));
            assert!(d.dead_at.is_some() && d.lease_until.is_none() && d.delivered_at.is_none());
            let reason = d.last_error.unwrap_or_default();
            assert!(reason.contains("could not be recorded"), "{reason}");
            let rows: Vec<(Uuid, String)> = attempts.iter().map(|a| (a.id, a.url.clone())).collect();
            assert_eq!(rows, [(stray.id, stray.url.clone())], "only the stray row");
        } else {
            assert_eq!(outcomes[id], Ok(Outcome::Delivered), "{id}");
            assert_eq!((d.status, d.attempt_count, d.last_status_code), (DeliveryStatus::Succeeded, 1, Some(200)));
            assert_eq!(attempts.len(), 1, "one attempt row for {id}");
            assert!(attempts[0].succeeded);
        }
    }
    // Each sent once, the refused one too; dead, its job does nothing more.
    assert_eq!(h.deliverer.attempt(refused).await.unwrap(), Outcome::Skipped);
    assert!(receivers.iter().all(|rx| rx.count() == 3));
    // The operator replays it: its next attempt has its own number and is recorded.
    assert!(admin::replay(h.db(), refused.into()).await.unwrap());
    assert_eq!(h.drive(refused).await, Outcome::Delivered);
    assert_eq!(receivers.iter().map(Receiver::count).sum::<usize>(), 10);
    assert_eq!(h.attempts(refused).await.len(), 2);
}

/// The merchant's own delivery log and redelivery through the API (`/v1/webhook_deliveries`):
/// a dead delivery is listed with its status, read with every attempt (status, latency, the
/// answer's first bytes), redelivered by the merchant's key, picked up by the deliverer's sweep
/// (the API holds no queue) and delivered, with the same delivery id; another merchant's key
/// and a key without `webhooks:write` cannot touch it.
#[tokio::test]
async fn a_merchant_reads_its_delivery_log_and_redelivers_through_the_api() {
    let cfg = WebhooksConfig { retry_schedule_secs: vec![0], ..fast() };
    let h = Hooks::new(cfg).await;
    let key = h.app.key(h.merchant, Environment::Test, &[]).await;
    let rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Status(503)).await.unwrap();
    rx.set_secrets(&[&h.endpoint(Environment::Test, &rx.url()).await]);
    h.event(Environment::Test, EventKind::PayoutFailed, 1).await;
    let id = h.dispatch().await[0];
    assert_eq!(h.drive(id).await, Outcome::Dead);

    let list = h.app.get("/v1/webhook_deliveries?status=dead&type=payout.failed", Some(&key)).await;
    assert_eq!(list.status.as_u16(), 200, "{}", list.body);
    list.assert_page(1, 20, 0, false);
    assert_eq!(list.data()[0]["id"], id.to_string());
    assert_eq!(h.app.get("/v1/webhook_deliveries?status=succeeded", Some(&key)).await.data(), &json!([]));
    h.app.get("/v1/webhook_deliveries?status=lost", Some(&key)).await.assert_error(
        400,
        "validation_error",
        Some("status"),
    );
    let one = h.app.get(&format!("/v1/webhook_deliveries/{id}"), Some(&key)).await;
    assert_eq!(one.status.as_u16(), 200, "{}", one.body);
    let attempts = one.data()["attempts"].as_array().unwrap().clone();
    assert_eq!(attempts.len(), 2, "{}", one.body);
    assert!(attempts.iter().all(|a| a["status_code"] == 503 && a["succeeded"] == false && a["latency_ms"].is_i64()));
    assert_eq!(one.data()["status"], "dead");

    // Others cannot see or redeliver it.
    let (_, stranger) = h.app.test_key().await;
    h.app.get(&format!("/v1/webhook_deliveries/{id}"), Some(&stranger)).await.assert_error(404, "not_found", None);
    let reader = h.app.key(h.merchant, Environment::Test, &[domain::keys::Permission::WebhooksRead]).await;
    let path = format!("/v1/webhook_deliveries/{id}/redeliver");
    h.app.post(&path, Some(&reader), &json!({})).await.assert_error(403, "forbidden", None);
    assert_eq!(h.delivery(id).await.status, DeliveryStatus::Dead);

    // Redelivered by the merchant: due now, on no queue, so the deliverer's sweep takes it.
    rx.set_default(Behaviour::Ok(Duration::ZERO));
    let r = h.app.post(&path, Some(&key), &json!({})).await;
    assert_eq!((r.status.as_u16(), r.data()["status"].as_str()), (200, Some("pending")), "{}", r.body);
    h.app.post(&path, Some(&key), &json!({})).await.assert_error(409, "delivery_pending", None);
    let swept = deliverer::stale(h.db(), Duration::ZERO, 100).await.unwrap();
    assert_eq!(swept, vec![id], "the sweep takes the redelivered delivery");
    assert_eq!(h.drive(id).await, Outcome::Delivered);
    let received = rx.received();
    assert_eq!(received.last().unwrap().delivery_id, id.to_string(), "the same delivery id");
    let after = h.app.get(&format!("/v1/webhook_deliveries/{id}"), Some(&key)).await;
    assert_eq!(
        (after.data()["status"].as_str(), after.data()["attempts"].as_array().unwrap().len()),
        (Some("succeeded"), 3)
    );
    let filter = domain::audit::Filter { merchant_id: Some(h.merchant), limit: 10, ..Default::default() };
    let entries = domain::audit::list(h.db(), &filter).await.unwrap();
    assert!(
        entries.iter().any(|e| e.action == "webhook_delivery.replay" && e.actor.starts_with("api_key:")),
        "{entries:?}"
    );
}

/// Two endpoints of one merchant with different filters: each event goes to exactly the
/// endpoints whose filter takes it, one delivery per endpoint, signed with that endpoint's own
/// secret (each receiver knows only its own) and posted to its URL. Order holds per endpoint: a
/// failing endpoint holds back only its own later delivery about the invoice. Removing an
/// endpoint stops its open deliveries: nothing more reaches it, and nothing of it goes to the
/// other endpoint.
#[tokio::test]
async fn two_endpoints_with_different_filters_each_receive_exactly_their_events_signed_with_their_own_secret() {
    use domain::webhooks::endpoints::NewEndpoint;
    let h = Hooks::new(fast()).await;
    let paid_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let all_rx = Receiver::start(ANY.parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let policy = TargetPolicy { allow_insecure: true };
    let new = |url: String, events: &[&str]| NewEndpoint {
        url,
        description: None,
        enabled_events: events.iter().map(|e| (*e).to_owned()).collect(),
    };
    let create = |n: NewEndpoint| {
        let db = h.db().clone();
        let merchant = h.merchant;
        async move { endpoints::create(&db, &sbox(), policy, merchant.into(), Environment::Test, &n).await.unwrap() }
    };
    let (paid_ep, paid_secret) = create(new(paid_rx.url(), &["invoice.paid"])).await;
    let (all_ep, all_secret) = create(new(all_rx.url(), &[])).await;
    assert_ne!(paid_secret, all_secret);
    paid_rx.set_secrets(&[&paid_secret]);
    all_rx.set_secrets(&[&all_secret]);

    let paid = h.event(Environment::Test, EventKind::InvoicePaid, 1).await;
    let expired = h.event(Environment::Test, EventKind::InvoiceExpired, 2).await;
    h.event(Environment::Live, EventKind::InvoicePaid, 3).await;
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 3, "invoice.paid to both, invoice.expired to the unfiltered one, none in live");
    for id in &ids {
        assert_eq!(h.drive(*id).await, Outcome::Delivered);
    }
    let got = |rx: &Receiver| {
        let mut v: Vec<(String, bool)> = rx.received().iter().map(|r| (r.event.clone(), r.verified)).collect();
        v.sort();
        v
    };
    assert_eq!(got(&paid_rx), [("invoice.paid".to_owned(), true)]);
    assert_eq!(got(&all_rx), [("invoice.expired".to_owned(), true), ("invoice.paid".to_owned(), true)]);
    let mut rows = Vec::new();
    for id in &ids {
        rows.push(h.delivery(*id).await);
    }
    let to = |event: Uuid| {
        let mut e: Vec<Option<Uuid>> = rows.iter().filter(|d| d.event_id == event).map(|d| d.endpoint_id).collect();
        e.sort();
        e
    };
    let mut both = vec![Some(paid_ep.id), Some(all_ep.id)];
    both.sort();
    assert_eq!(to(paid), both);
    assert_eq!(to(expired), [Some(all_ep.id)]);
    for d in &rows {
        let url = if d.endpoint_id == Some(paid_ep.id) { paid_rx.url() } else { all_rx.url() };
        assert_eq!(h.attempts(d.id).await[0].url, url, "posted to its own endpoint");
    }
    // Signed with the endpoint's own secret only: a receiver holding the other one's refuses.
    paid_rx.set_secrets(&[&all_secret]);
    h.event(Environment::Test, EventKind::InvoicePaid, 4).await;
    let ids = h.dispatch().await;
    let to_paid = ids.iter().find(|id| rows.iter().all(|d| d.id != **id)).copied().unwrap();
    let mut outcomes = Vec::new();
    for id in &ids {
        outcomes.push((h.delivery(*id).await.endpoint_id, h.deliverer.attempt(*id).await.unwrap()));
    }
    for (endpoint, outcome) in outcomes {
        if endpoint == Some(paid_ep.id) {
            assert!(matches!(outcome, Outcome::RetryAfter(_)), "{to_paid}: {outcome:?}");
        } else {
            assert_eq!(outcome, Outcome::Delivered);
        }
    }
    assert_eq!(paid_rx.received().last().unwrap().answered, 400, "not signed with the other endpoint's secret");
    paid_rx.set_secrets(&[&paid_secret]);

    // Order per endpoint: the paid endpoint failing holds back only its own later delivery.
    let invoice = Uuid::now_v7();
    let emit = |kind: EventKind| {
        let data = json!({"invoice_id": invoice, "status": kind.as_str()});
        events::emit(h.db(), h.merchant.into(), Environment::Test, kind, format!("{kind}:{invoice}"), data)
    };
    emit(EventKind::InvoicePaid).await.unwrap();
    emit(EventKind::InvoiceResolved).await.unwrap();
    let mut fresh = Vec::new();
    for id in h.dispatch().await {
        fresh.push(h.delivery(id).await);
    }
    assert_eq!(fresh.len(), 3, "paid to both endpoints, resolved to the unfiltered one");
    let all_paid = fresh.iter().find(|d| d.endpoint_id == Some(all_ep.id) && d.event_type == "invoice.paid").unwrap();
    let all_resolved = fresh.iter().find(|d| d.event_type == "invoice.resolved").unwrap();
    let paid_paid = fresh.iter().find(|d| d.endpoint_id == Some(paid_ep.id)).unwrap();
    assert!(all_resolved.wait_for_earlier && !paid_paid.wait_for_earlier && !all_paid.wait_for_earlier);
    paid_rx.set_default(Behaviour::Status(500));
    assert!(matches!(h.deliverer.attempt(paid_paid.id).await.unwrap(), Outcome::RetryAfter(_)));
    assert!(
        matches!(h.deliverer.attempt(all_resolved.id).await.unwrap(), Outcome::NotDue(_)),
        "waits for its own endpoint's earlier delivery"
    );
    assert_eq!(h.drive(all_paid.id).await, Outcome::Delivered);
    assert_eq!(h.drive(all_resolved.id).await, Outcome::Delivered, "not held back by the other endpoint's failure");

    // Removal: the failing endpoint's open delivery stops, sent nowhere.
    let received = (paid_rx.count(), all_rx.count());
    let (gone, stopped) = endpoints::delete(h.db(), &paid_ep).await.unwrap();
    assert_eq!((gone, stopped), (true, 2), "the wrongly verified one and the failing one, both retrying");
    for id in [paid_paid.id, to_paid] {
        let d = h.delivery(id).await;
        assert_eq!((d.status, d.last_error.as_deref()), (DeliveryStatus::Dead, Some(endpoints::REMOVED)));
        assert_eq!(h.deliverer.attempt(id).await.unwrap(), Outcome::Skipped);
    }
    // A delivery claimed for a removed endpoint (made before the removal was seen) dies at its
    // attempt, posted nowhere.
    let e = entity::event::Entity::find_by_id(expired).one(h.db()).await.unwrap().unwrap();
    let orphan = dispatch::new_delivery(&e, Some(paid_ep.id), Utc::now());
    let orphan = webhook_delivery::Entity::insert(webhook_delivery::ActiveModel::from(orphan))
        .exec_with_returning(h.db())
        .await
        .unwrap();
    assert_eq!(h.deliverer.attempt(orphan.id).await.unwrap(), Outcome::Dead);
    assert_eq!(h.attempts(orphan.id).await[0].error.as_deref(), Some(endpoints::REMOVED));
    assert_eq!((paid_rx.count(), all_rx.count()), received, "nothing more reached either endpoint");
    h.event(Environment::Test, EventKind::InvoicePaid, 5).await;
    let ids = h.dispatch().await;
    assert_eq!(ids.len(), 1, "only the remaining endpoint");
    assert_eq!(h.delivery(ids[0]).await.endpoint_id, Some(all_ep.id));
}
