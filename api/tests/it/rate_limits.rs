//! Operational hardening: throttling per API key (reads and writes apart), per client IP on the public
//! routes and on failed key checks, per merchant on the test helpers; 429 `rate_limited` with
//! `Retry-After` and the `RateLimit-*` headers; per-merchant overrides. The Redis store (shared
//! by API processes, failing open) runs with `--features redis-tests`.

use domain::config::{Config, RateLimit};
use serde_json::{Value, json};
use testkit::{Resp, TestApp};

fn per_hour(limit: u32) -> RateLimit {
    // A long period: no request is refilled while a test runs.
    RateLimit { limit, period_secs: 3600 }
}

fn header(r: &Resp, name: &str) -> Option<u64> {
    r.headers.get(name).map(|v| v.to_str().unwrap().parse().unwrap_or_else(|_| panic!("{name}: {v:?}")))
}

/// The `RateLimit-*` headers as (limit, remaining, reset).
#[track_caller]
fn limit_headers(r: &Resp) -> (u64, u64, u64) {
    let get = |n| header(r, n).unwrap_or_else(|| panic!("no {n} header: {:?}", r.headers));
    (get("ratelimit-limit"), get("ratelimit-remaining"), get("ratelimit-reset"))
}

#[track_caller]
fn assert_throttled(r: &Resp, limit: u64) {
    r.assert_error(429, "rate_limited", None);
    let retry = header(r, "retry-after").expect("Retry-After");
    assert!((1..=3600).contains(&retry), "Retry-After {retry}");
    let (l, remaining, reset) = limit_headers(r);
    assert_eq!((l, remaining), (limit, 0));
    assert!(reset >= retry, "reset {reset} before retry {retry}");
}

fn invoice_body() -> Value {
    json!({"currency": "BTC", "amount": "0.001"})
}

#[tokio::test]
async fn write_burst_over_the_limit_gets_429_with_retry_after_and_headers() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.writes = per_hour(3);
        c.rate_limits.reads = per_hour(50);
    })
    .await;
    let (_, key) = app.test_key().await;
    for left in [2, 1, 0] {
        let r = app.post("/v1/invoices", Some(&key), &invoice_body()).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let (limit, remaining, reset) = limit_headers(&r);
        assert_eq!((limit, remaining), (3, left));
        assert!(reset > 0);
        assert_eq!(r.headers["ratelimit-policy"], "3;w=3600");
    }
    let r = app.post("/v1/invoices", Some(&key), &invoice_body()).await;
    assert_throttled(&r, 3);
    // Nothing was written by the refused request.
    let list = app.get("/v1/invoices", Some(&key)).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.data().as_array().unwrap().len(), 3);
    // Reads have their own bucket and their own headers.
    assert_eq!(limit_headers(&list).0, 50);
    // Health and the OpenAPI document are not limited.
    let health = app.send(app.http.get(app.url("/health"))).await;
    assert!(health.headers.get("ratelimit-limit").is_none());
}

#[tokio::test]
async fn keys_are_limited_apart_and_the_bucket_is_per_key() {
    let app = TestApp::spawn_with(|c| c.rate_limits.reads = per_hour(2)).await;
    let (m, a) = app.test_key().await;
    let b = app.key(m, entity::Environment::Test, &[]).await;
    for _ in 0..2 {
        assert_eq!(app.get("/v1/invoices", Some(&a)).await.status, 200);
    }
    assert_throttled(&app.get("/v1/invoices", Some(&a)).await, 2);
    assert_eq!(app.get("/v1/invoices", Some(&b)).await.status, 200, "another key has its own bucket");
}

#[tokio::test]
async fn public_checkout_route_is_limited_per_client_ip() {
    let app = TestApp::spawn_with(|c| c.rate_limits.public = per_hour(4)).await;
    let (_, key) = app.test_key().await;
    let inv = app.create_invoice(&key, invoice_body()).await;
    let state = format!("/checkout/{}/state", inv["id"].as_str().unwrap());
    for left in [3, 2, 1] {
        let r = app.get(&state, None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(limit_headers(&r).1, left);
    }
    // The public JSON routes share the client's bucket.
    assert_eq!(app.get("/v1/currencies", None).await.status, 200);
    assert_throttled(&app.get(&state, None).await, 4);
    assert_throttled(&app.get("/v1/rates", None).await, 4);
    // The merchant's own API is not the public bucket.
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.status, 200);
}

#[tokio::test]
async fn client_ip_comes_from_the_proxy_header_only_behind_a_trusted_proxy() {
    let behind = |c: &mut Config| {
        c.rate_limits.public = per_hour(2);
        c.rate_limits.trusted_proxy_header = Some("x-forwarded-for".into());
        c.rate_limits.trusted_proxies = vec!["127.0.0.0/8".parse().unwrap()];
    };
    let app = TestApp::spawn_with(behind).await;
    let from = |ip: &str| app.http.get(app.url("/v1/currencies")).header("x-forwarded-for", format!("{ip}, 127.0.0.1"));
    for _ in 0..2 {
        assert_eq!(app.send(from("203.0.113.1")).await.status, 200);
    }
    assert_throttled(&app.send(from("203.0.113.1")).await, 2);
    assert_eq!(app.send(from("203.0.113.2")).await.status, 200, "another client behind the proxy");

    // Without a trusted proxy the header is the client's own claim: ignored.
    let direct = TestApp::spawn_with(|c| c.rate_limits.public = per_hour(2)).await;
    for ip in ["203.0.113.1", "203.0.113.2"] {
        let r = direct.send(direct.http.get(direct.url("/v1/currencies")).header("x-forwarded-for", ip)).await;
        assert_eq!(r.status, 200);
    }
    let r = direct.send(direct.http.get(direct.url("/v1/currencies")).header("x-forwarded-for", "203.0.113.3")).await;
    assert_throttled(&r, 2);
}

#[tokio::test]
async fn auth_failures_from_one_ip_get_429_before_the_database_is_asked() {
    let app = TestApp::spawn_with(|c| c.rate_limits.auth_failures = per_hour(3)).await;
    let (_, good) = app.test_key().await;
    let bad = || api::auth::generate_key(entity::Environment::Test);
    let first_bad = bad();
    let mut statuses = Vec::new();
    for i in 0..4 {
        let key = if i == 0 { first_bad.clone() } else { bad() };
        let r = app.get("/v1/invoices", Some(&key)).await;
        statuses.push(r.status.as_u16());
        if r.status == 429 {
            assert_throttled(&r, 3);
        }
    }
    assert_eq!(&statuses[..3], [401, 401, 401]);
    assert_eq!(statuses[3], 429);
    let loads = app.state.keys.loads();
    for _ in 0..10 {
        assert_throttled(&app.get("/v1/invoices", Some(&bad())).await, 3);
    }
    // A bad key already rejected (cached, no lookup) still counts and waits.
    assert_throttled(&app.get("/v1/invoices", Some(&first_bad)).await, 3);
    assert_eq!(app.state.keys.loads(), loads, "a throttled IP's keys were looked up in the database");
    // The whole IP waits, a valid key included; the public routes are another bucket.
    assert_throttled(&app.get("/v1/invoices", Some(&good)).await, 3);
    assert_eq!(app.get("/v1/currencies", None).await.status, 200);
}

#[tokio::test]
async fn merchant_override_raises_a_limit() {
    let app = TestApp::spawn_with(|c| c.rate_limits.writes = per_hour(2)).await;
    let (raised, raised_key) = app.test_key().await;
    let (_, plain_key) = app.test_key().await;
    let limits = domain::merchants::MerchantRateLimits { writes: Some(5), ..Default::default() };
    let m = domain::merchants::set_rate_limits(&app.state.db, raised.into(), &limits).await.unwrap();
    assert_eq!(domain::merchants::MerchantRateLimits::of(&m), limits);
    for _ in 0..5 {
        let r = app.post("/v1/invoices", Some(&raised_key), &invoice_body()).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(limit_headers(&r).0, 5);
    }
    assert_throttled(&app.post("/v1/invoices", Some(&raised_key), &invoice_body()).await, 5);
    for _ in 0..2 {
        assert_eq!(app.post("/v1/invoices", Some(&plain_key), &invoice_body()).await.status, 201);
    }
    assert_throttled(&app.post("/v1/invoices", Some(&plain_key), &invoice_body()).await, 2);
    let bad = domain::merchants::MerchantRateLimits { reads: Some(0), ..Default::default() };
    assert!(domain::merchants::set_rate_limits(&app.state.db, raised.into(), &bad).await.is_err());
}

#[tokio::test]
async fn test_helpers_are_limited_per_merchant() {
    let app = TestApp::spawn_with(|c| c.rate_limits.test_helpers = per_hour(2)).await;
    let (m, k1) = app.test_key().await;
    let k2 = app.key(m, entity::Environment::Test, &[]).await;
    let (_, other) = app.test_key().await;
    let mine = json!({"currency": "BTC", "count": 1});
    assert_eq!(app.post("/v1/test/blocks", Some(&k1), &mine).await.status, 200);
    assert_eq!(app.post("/v1/test/blocks", Some(&k2), &mine).await.status, 200);
    // The merchant's second key shares the merchant's bucket.
    assert_throttled(&app.post("/v1/test/blocks", Some(&k2), &mine).await, 2);
    assert_eq!(app.post("/v1/test/blocks", Some(&other), &mine).await.status, 200, "another merchant");
    // The merchant's other writes are not the sandbox bucket.
    assert_eq!(app.post("/v1/invoices", Some(&k1), &invoice_body()).await.status, 201);
}

#[tokio::test]
async fn disabled_limits_neither_throttle_nor_add_headers() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.enabled = false;
        c.rate_limits.reads = per_hour(1);
    })
    .await;
    let (_, key) = app.test_key().await;
    for _ in 0..3 {
        let r = app.get("/v1/invoices", Some(&key)).await;
        assert_eq!(r.status, 200);
        assert!(r.headers.get("ratelimit-limit").is_none());
    }
}

#[tokio::test]
async fn openapi_lists_429_and_500_on_every_operation() {
    let app = TestApp::spawn().await;
    let doc = app.get("/openapi.json", None).await;
    let paths = doc.body["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let responses = &op["responses"];
            for code in ["429", "500"] {
                assert!(responses.get(code).is_some(), "{method} {path} lacks {code}");
            }
            assert!(responses["429"]["headers"].get("Retry-After").is_some(), "{method} {path}");
        }
    }
    assert!(operations >= 20, "{operations} operations");
}

#[test]
fn config_rejects_a_zero_limit_and_a_proxy_header_without_proxies() {
    let zero = |c: &mut Config| c.rate_limits.writes.limit = 0;
    let lone_header = |c: &mut Config| c.rate_limits.trusted_proxy_header = Some("x-forwarded-for".into());
    for (change, key) in
        [(&zero as &dyn Fn(&mut Config), "rate_limits.writes"), (&lone_header, "rate_limits.trusted_proxies")]
    {
        let mut c = Config::default();
        change(&mut c);
        let fig = figment::Figment::from(figment::providers::Serialized::defaults(c));
        let err = Config::from_figment(fig).unwrap_err().to_string();
        assert!(err.contains(key), "{key}: {err}");
    }
}

/// `figment::Jail` sets an environment variable and changes the working directory, both
/// process-wide: the test runs in a process of its own.
#[test]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
fn limits_are_set_per_class_in_the_file_or_the_environment() {
    crate::support::isolated("rate_limits::limits_are_set_per_class_in_the_file_or_the_environment", || {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[rate_limits]\nreads = { limit = 50, period_secs = 10 }\n")?;
            jail.set_env("PAYGATE_RATE_LIMITS__WRITES__LIMIT", "7");
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.rate_limits.reads, RateLimit { limit: 50, period_secs: 10 });
            assert_eq!(c.rate_limits.writes, RateLimit { limit: 7, period_secs: 60 });
            assert_eq!(c.rate_limits.test_helpers, Config::default().rate_limits.test_helpers);
            Ok(())
        });
    });
}

#[cfg(feature = "redis-tests")]
mod redis {
    //! The shared store: a real Redis (127.0.0.1:6379, or `PAYGATE_TEST_REDIS`), a fresh key
    //! prefix per test; and a `redis-server` child process stopped mid-test.

    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use testkit::fleet::free_port;
    use testkit::serve::KillOnDrop;

    use super::*;

    fn redis_url() -> String {
        std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    }

    async fn assert_reachable(url: &str) {
        let client = ::redis::Client::open(url).unwrap();
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| panic!("redis-tests: Redis at {url} is unreachable: {e}"));
        let pong: String = ::redis::cmd("PING").query_async(&mut conn).await.expect("PING");
        assert_eq!(pong, "PONG");
    }

    fn shared(url: String, prefix: String, reads: RateLimit) -> impl FnOnce(&mut Config) {
        move |c| {
            c.redis_url = Some(url);
            c.rate_limits.redis_prefix = prefix;
            c.rate_limits.reads = reads;
        }
    }

    /// `n` concurrent `GET /v1/invoices` with `key`, alternating between `a` (even) and `b`
    /// (odd): how many each process accepted (200). Anything but 200 or 429 fails the test.
    async fn alternate(a: &TestApp, b: &TestApp, key: &str, n: usize) -> [u32; 2] {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let app = if i % 2 == 0 { a } else { b };
            let request = app.http.get(app.url("/v1/invoices")).header("X-API-Key", key);
            set.spawn(async move { (i % 2, request.send().await.unwrap().status().as_u16()) });
        }
        let mut accepted = [0u32; 2];
        while let Some(r) = set.join_next().await {
            let (process, status) = r.unwrap();
            match status {
                200 => accepted[process] += 1,
                429 => {}
                s => panic!("unexpected status {s}"),
            }
        }
        accepted
    }

    #[tokio::test]
    async fn two_api_processes_on_one_redis_share_one_keys_limit() {
        let url = redis_url();
        assert_reachable(&url).await;
        let prefix = format!("paygate:rl:test:{}", uuid::Uuid::new_v4().simple());
        let a = TestApp::spawn_with(shared(url.clone(), prefix.clone(), per_hour(10))).await;
        let b = TestApp::spawn_on(a.db.clone(), shared(url.clone(), prefix.clone(), per_hour(10))).await;
        assert!(a.state.limiter.shared() && b.state.limiter.shared());
        let (_, key) = a.test_key().await;
        let accepted = alternate(&a, &b, &key, 40).await;
        assert_eq!(accepted[0] + accepted[1], 10, "accepted per process: {accepted:?}");
        assert_eq!(a.state.limiter.store_failures() + b.state.limiter.store_failures(), 0);
        // The bucket lives under the configured prefix with an expiry, keyed by the key id.
        let client = ::redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = ::redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut conn).await.unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert!(keys[0].starts_with(&format!("{prefix}:reads:")) && !keys[0].contains("sk_test_"), "{keys:?}");
        let ttl: i64 = ::redis::cmd("PTTL").arg(&keys[0]).query_async(&mut conn).await.unwrap();
        assert!(ttl > 0, "no expiry: {ttl}");
    }

    /// A limit large enough for leases (requests taken from the shared bucket in one step and
    /// spent locally): the two processes together still never accept more than the limit, and
    /// what leases hold back at the end is at most a twentieth of the limit per process.
    #[tokio::test]
    async fn leased_requests_never_let_two_processes_exceed_one_limit() {
        let url = redis_url();
        assert_reachable(&url).await;
        let prefix = format!("paygate:rl:test:{}", uuid::Uuid::new_v4().simple());
        let limit = 400;
        // One request refills every 216 s: none while the test runs.
        let per_day = RateLimit { limit, period_secs: 86_400 };
        let a = TestApp::spawn_with(shared(url.clone(), prefix.clone(), per_day)).await;
        let b = TestApp::spawn_on(a.db.clone(), shared(url.clone(), prefix.clone(), per_day)).await;
        let (_, key) = a.test_key().await;
        let mut accepted = [0u32; 2];
        // Waves of concurrent requests, alternating processes, until both are refused.
        for _ in 0..20 {
            let wave = alternate(&a, &b, &key, 60).await;
            accepted = [accepted[0] + wave[0], accepted[1] + wave[1]];
            if wave == [0, 0] {
                break;
            }
        }
        let total = accepted[0] + accepted[1];
        assert!(total <= limit, "accepted {total} > limit {limit}: {accepted:?}");
        assert!(total >= limit - 2 * (limit / 20), "leases held back too much: {accepted:?}");
        assert!(accepted[0] > 0 && accepted[1] > 0, "{accepted:?}");
        assert_eq!(a.state.limiter.store_failures() + b.state.limiter.store_failures(), 0);
    }

    #[tokio::test]
    async fn redis_stopped_mid_test_keeps_the_api_answering() {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (redis-tests need it on PATH)");
        let mut child = KillOnDrop(child);
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ok = match ::redis::Client::open(url.as_str()).unwrap().get_multiplexed_async_connection().await {
                Ok(mut c) => ::redis::cmd("PING").query_async::<String>(&mut c).await.is_ok(),
                Err(_) => false,
            };
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "redis-server did not start on {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let app = TestApp::spawn_with(shared(url, "paygate:rl:stop".into(), per_hour(3))).await;
        let (_, key) = app.test_key().await;
        for _ in 0..3 {
            assert_eq!(app.get("/v1/invoices", Some(&key)).await.status, 200);
        }
        assert_throttled(&app.get("/v1/invoices", Some(&key)).await, 3);
        assert_eq!(app.state.limiter.store_failures(), 0);

        child.0.kill().expect("stop redis-server");
        child.0.wait().expect("redis-server exit");
        for _ in 0..5 {
            let started = Instant::now();
            let r = app.get("/v1/invoices", Some(&key)).await;
            assert_eq!(r.status, 200, "{}", r.body);
            assert!(started.elapsed() < Duration::from_secs(3), "a request waited {:?}", started.elapsed());
        }
        assert!(app.state.limiter.store_failures() >= 5, "failures not counted");
        // Writes and the public routes fail open too.
        assert_eq!(app.post("/v1/invoices", Some(&key), &invoice_body()).await.status, 201);
        assert_eq!(app.get("/v1/currencies", None).await.status, 200);
    }
}
