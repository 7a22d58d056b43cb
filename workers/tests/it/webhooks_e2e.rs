//! The `webhook-deliverer` binary as deployed: a separate process over the database and the
//! queue backend (PostgreSQL + Redis with `--features redis-tests,pg-tests`, else SQLite),
//! posting to a real loopback receiver that verifies every signature and timestamp.
//!
//! 1. The receiver is down, then answers 500, then hangs past the timeout, then 429 with
//!    `Retry-After`, then recovers: every event arrives, and the attempts are recorded.
//! 2. The deliverer is SIGKILLed mid-batch and (on Redis) every queued job is flushed: after a
//!    restart every event is delivered at least once.

use testkit::fleet;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use api::webhooks::receiver::{Behaviour, Receiver};
use domain::events::EventKind;
use domain::webhooks::endpoints;
use domain::webhooks::outbound::TargetPolicy;
use domain::webhooks::secrets::SecretBox;
use entity::{DeliveryStatus, Environment, webhook_attempt, webhook_delivery};
use fleet::{Fleet, Proc, wait_ready};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use uuid::Uuid;

const KEY_HEX: &str = "5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f";

struct Setup {
    _db: testkit::Db,
    conn: DatabaseConnection,
    fleet: Fleet,
    merchant: Uuid,
    http: reqwest::Client,
}

async fn setup(extra: &[(&str, &str)]) -> Setup {
    let db = testkit::Db::fresh().await;
    let mut env = vec![
        ("PAYGATE_WEBHOOKS__SECRET_KEY", KEY_HEX),
        ("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true"),
        ("PAYGATE_WEBHOOKS__DISPATCH_INTERVAL_MS", "50"),
        ("PAYGATE_WEBHOOKS__SWEEP_INTERVAL_MS", "200"),
        ("PAYGATE_WEBHOOKS__STALE_AFTER_SECS", "2"),
        ("PAYGATE_WEBHOOKS__ENDPOINT_CACHE_MS", "100"),
    ];
    env.extend_from_slice(extra);
    let fleet = Fleet::new(&db.url, &env);
    let config = domain::config::Config { database_url: db.url.clone(), ..Default::default() };
    let conn = domain::db::connect(&config).await.unwrap();
    domain::db::migrate(&conn).await.unwrap();
    let merchant = domain::merchants::create_merchant(&conn, "Hooks", &Default::default()).await.unwrap().id;
    Setup { _db: db, conn, fleet, merchant, http: reqwest::Client::new() }
}

impl Setup {
    /// The deliverer process folds the list counters' deltas (`domain::list_counts`): none is
    /// left, and the folded counter of the deliveries list holds every delivery.
    async fn list_counts_folded(&self, deliveries: i64) {
        use sea_orm::{ConnectionTrait, Statement};
        let backend = self.conn.get_database_backend();
        let one = |sql: &str| {
            let stmt = Statement::from_string(backend, sql.to_owned());
            async move { self.conn.query_one_raw(stmt).await.unwrap().unwrap().try_get_by_index::<i64>(0).unwrap() }
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while one("SELECT COUNT(*) FROM list_count_deltas").await > 0 {
            assert!(Instant::now() < deadline, "the deliverer never folded the list counters");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let folded = one(
            "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) FROM list_counts WHERE list = 'webhook_deliveries' AND day = ''",
        )
        .await;
        assert_eq!(folded, deliveries);
    }

    async fn endpoint(&self, url: &str) -> String {
        let sbox = SecretBox::new(SecretBox::parse_key(KEY_HEX).unwrap());
        let policy = TargetPolicy { allow_insecure: true };
        let (_, secret) =
            endpoints::set(&self.conn, &sbox, policy, self.merchant.into(), Environment::Test, url).await.unwrap();
        secret.unwrap()
    }

    /// `n` events of every kind the outbox carries, in the test environment.
    async fn events(&self, n: usize) -> HashSet<Uuid> {
        let mut ids = HashSet::new();
        for i in 0..n {
            let kind = EventKind::ALL[i % EventKind::ALL.len()];
            let key = format!("e2e:{i}:{}", Uuid::now_v7());
            let data = json!({"invoice_id": Uuid::now_v7(), "n": i});
            let id = domain::events::emit(&self.conn, self.merchant.into(), Environment::Test, kind, key, data)
                .await
                .unwrap();
            ids.insert(id.expect("a new event").into());
        }
        ids
    }

    async fn deliverer(&self) -> Proc {
        let p = self.fleet.worker(env!("CARGO_BIN_EXE_webhook-deliverer"));
        wait_ready(&self.http, &p).await;
        p
    }

    async fn succeeded(&self) -> u64 {
        webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::Status.eq(DeliveryStatus::Succeeded))
            .count(&self.conn)
            .await
            .unwrap()
    }

    async fn wait_all_succeeded(&self, n: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.succeeded().await < n {
            assert!(Instant::now() < deadline, "only {} of {n} delivered in {within:?}", self.succeeded().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Delivery id -> event id of every delivery.
    async fn deliveries(&self) -> HashMap<String, Uuid> {
        webhook_delivery::Entity::find()
            .all(&self.conn)
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.id.to_string(), d.event_id))
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_fails_hangs_and_rate_limits_still_gets_every_event() {
    const EVENTS: usize = 40;
    let s =
        setup(&[("PAYGATE_WEBHOOKS__RETRY_SCHEDULE_SECS", "[1,1,1,1,1,1,1]"), ("PAYGATE_WEBHOOKS__TIMEOUT_MS", "500")])
            .await;
    let port = fleet::free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let secret = s.endpoint(&format!("http://{addr}/webhooks")).await;
    let events = s.events(EVENTS).await;
    let _deliverer = s.deliverer().await;

    // Down: every first attempt is refused.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let refused = webhook_attempt::Entity::find().count(&s.conn).await.unwrap();
        if refused >= EVENTS as u64 {
            break;
        }
        assert!(Instant::now() < deadline, "first attempts never happened ({refused})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Up, with 10 failures of each kind before it recovers.
    let rx = Receiver::start(addr, &[&secret], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    rx.script(
        std::iter::repeat_n(Behaviour::Status(500), 10)
            .chain(std::iter::repeat_n(Behaviour::Hang(Duration::from_secs(2)), 10))
            .chain(std::iter::repeat_n(Behaviour::TooManyRequests(2), 10)),
    );
    s.wait_all_succeeded(EVENTS as u64, Duration::from_secs(60)).await;

    // Every event arrived, verified, and was answered 200.
    let deliveries = s.deliveries().await;
    let received = rx.received();
    assert!(received.iter().all(|r| r.verified), "every request carried a valid signature and timestamp");
    let delivered: HashSet<Uuid> =
        received.iter().filter(|r| r.answered == 200).filter_map(|r| deliveries.get(&r.delivery_id)).copied().collect();
    assert_eq!(delivered, events);

    // The attempt history: 40 refused, 10 × 500, 10 timeouts, 10 × 429, 40 successes (a hung
    // request counts as received but not delivered).
    let attempts = webhook_attempt::Entity::find().all(&s.conn).await.unwrap();
    let count = |f: &dyn Fn(&webhook_attempt::Model) -> bool| attempts.iter().filter(|a| f(a)).count();
    assert_eq!(count(&|a| a.error.as_deref().is_some_and(|e| e.contains("Connection refused"))), EVENTS);
    assert_eq!(count(&|a| a.status_code == Some(500)), 10);
    assert_eq!(count(&|a| a.status_code.is_none() && a.error.as_deref().is_some_and(|e| e.contains("timed out"))), 10);
    assert_eq!(count(&|a| a.status_code == Some(429)), 10);
    assert_eq!(count(&|a| a.succeeded), EVENTS);
    assert_eq!(attempts.len(), EVENTS * 2 + 30);
    // A 429 asked for 2 s: the next attempt of that delivery came no sooner.
    for a in attempts.iter().filter(|a| a.status_code == Some(429)) {
        let next =
            attempts.iter().find(|b| b.delivery_id == a.delivery_id && b.attempt_no == a.attempt_no + 1).unwrap();
        assert!(next.started_at - a.started_at >= chrono::Duration::milliseconds(1900), "Retry-After honoured");
    }
    s.list_counts_folded(deliveries.len() as i64).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_deliverer_and_a_flushed_queue_lose_no_event() {
    const EVENTS: usize = 600;
    let s = setup(&[("PAYGATE_PIPELINE__STAGE_CONCURRENCY__WEBHOOK-DELIVER", "8")]).await;
    let rx =
        Receiver::start("127.0.0.1:0".parse().unwrap(), &[], Behaviour::Ok(Duration::from_millis(30))).await.unwrap();
    let secret = s.endpoint(&rx.url()).await;
    rx.set_secrets(&[&secret]);
    let events = s.events(EVENTS).await;
    let mut deliverer = s.deliverer().await;

    // Mid-batch: SIGKILL (in-flight attempts are cut off), then the queue loses every job.
    let deadline = Instant::now() + Duration::from_secs(60);
    while rx.count() < EVENTS / 4 {
        assert!(Instant::now() < deadline, "deliveries never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    deliverer.kill();
    let at_kill = rx.count();
    assert!(at_kill < EVENTS, "the kill must come mid-batch ({at_kill})");
    if cfg!(feature = "redis-tests") {
        s.fleet.flush_redis().await;
    }
    let _deliverer = s.deliverer().await;
    s.wait_all_succeeded(EVENTS as u64, Duration::from_secs(90)).await;

    let deliveries = s.deliveries().await;
    let received = rx.received();
    assert!(received.iter().all(|r| r.verified));
    let delivered: HashSet<Uuid> = received.iter().filter_map(|r| deliveries.get(&r.delivery_id)).copied().collect();
    assert_eq!(delivered, events, "every event delivered at least once");
    let duplicates = received.len() - delivered.len();
    eprintln!("killed after {at_kill} of {EVENTS} deliveries; {duplicates} delivered twice (at least once)");
    // Only attempts cut off by the kill may repeat: at most the deliverer's concurrency.
    assert!(duplicates <= 8, "{duplicates} duplicates");
}

/// Per-invoice order: while an invoice's first event is retrying, its later event waits; another
/// invoice's event is not held back. The receiver fails the first request it gets (the only
/// event there is then), and accepts everything after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoices_later_event_waits_for_its_retrying_first_one_and_others_do_not() {
    let s = setup(&[("PAYGATE_WEBHOOKS__RETRY_SCHEDULE_SECS", "[2,2,2,2,2,2,2]")]).await;
    let rx = Receiver::start("127.0.0.1:0".parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let secret = s.endpoint(&rx.url()).await;
    rx.set_secrets(&[&secret]);
    rx.script([Behaviour::Status(500)]);
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let emit = |kind: EventKind, invoice: Uuid| {
        let conn = s.conn.clone();
        let merchant = s.merchant;
        async move {
            let data = json!({"invoice_id": invoice, "status": kind.as_str()});
            let key = format!("{kind}:{invoice}");
            let id = domain::events::emit(&conn, merchant.into(), Environment::Test, kind, key, data).await.unwrap();
            Uuid::from(id.unwrap())
        }
    };
    let a1 = emit(EventKind::InvoiceConfirming, a).await;
    let _deliverer = s.deliverer().await;
    // A's first event fails its first attempt; then A's second and B's first happen.
    let deadline = Instant::now() + Duration::from_secs(20);
    while rx.count() < 1 {
        assert!(Instant::now() < deadline, "the first attempt never came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let a2 = emit(EventKind::InvoicePaid, a).await;
    let b1 = emit(EventKind::InvoiceConfirming, b).await;
    s.wait_all_succeeded(3, Duration::from_secs(30)).await;

    let deliveries = s.deliveries().await;
    let received: Vec<(Uuid, u16, chrono::DateTime<chrono::Utc>)> =
        rx.received().iter().map(|r| (deliveries[&r.delivery_id], r.answered, r.at)).collect();
    let first = |event: Uuid| received.iter().find(|(e, ..)| *e == event).map(|r| r.2).unwrap();
    let ok = |event: Uuid| received.iter().find(|(e, code, _)| *e == event && *code == 200).map(|r| r.2).unwrap();
    assert_eq!(received.iter().filter(|(e, ..)| *e == a1).count(), 2, "a1: refused once, then delivered");
    assert!(first(a2) >= ok(a1), "a2 never reached the endpoint before a1 was delivered: {received:?}");
    assert!(ok(b1) < ok(a1), "b1 is not held back by a's retry: {received:?}");
    assert_eq!(received.iter().filter(|(e, ..)| *e == a2).count(), 1, "a2 was sent once, when its turn came");
}
