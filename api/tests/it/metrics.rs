//! Operational hardening: the `api` binary serves Prometheus metrics on `[server] metrics_listen` (an
//! operator address apart from the public listener): requests refused by the rate limiter are
//! counted per class, and so are failures of the rate-limit store (Redis unreachable: the API
//! fails open and keeps answering).

use std::time::{Duration, Instant};

use testkit::fleet::{Deployment, free_port};

/// The value of the sample `name{labels}` in a Prometheus text body (0 when absent).
fn sample(body: &str, name_and_labels: &str) -> f64 {
    body.lines().find_map(|l| l.strip_prefix(name_and_labels).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}

async fn scrape(http: &reqwest::Client, url: &str) -> String {
    let r = http.get(url).send().await.expect("metrics endpoint answers");
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// The api binary on a fresh database with `[server] metrics_listen` set and public routes
/// limited to 2 per hour per IP, plus `vars`; returns it and its metrics URL.
async fn deployment(vars: &[(&str, &str)]) -> (Deployment, String) {
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let mut all = vec![
        ("PAYGATE_SERVER__METRICS_LISTEN", metrics_addr.as_str()),
        ("PAYGATE_RATE_LIMITS__PUBLIC__LIMIT", "2"),
        ("PAYGATE_RATE_LIMITS__PUBLIC__PERIOD_SECS", "3600"),
    ];
    all.extend_from_slice(vars);
    let d = Deployment::start("metrics", entity::Environment::Test, &all).await;
    let url = format!("http://{metrics_addr}/metrics");
    (d, url)
}

async fn currencies(d: &Deployment, times: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..times {
        statuses.push(d.http.get(format!("{}/v1/currencies", d.api.url)).send().await.unwrap().status().as_u16());
    }
    statuses
}

/// Scrapes `url` until `done(body)` holds (the recorder sees increments at once; the deadline
/// only guards against a metric that never comes).
async fn scrape_until(http: &reqwest::Client, url: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = scrape(http, url).await;
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "metrics never showed it:\n{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const PUBLIC_REFUSED: &str = "paygate_rate_limited_total{class=\"public\"}";
const STORE_FAILURES: &str = "paygate_rate_limit_store_failures_total";

#[tokio::test]
async fn the_api_binary_counts_throttled_requests_on_its_metrics_listener() {
    let (d, url) = deployment(&[]).await;
    assert_eq!(currencies(&d, 4).await, [200, 200, 429, 429]);
    // The public listener does not serve metrics; the operator's listener does.
    assert_eq!(d.http.get(format!("{}/metrics", d.api.url)).send().await.unwrap().status(), 404);
    let body = scrape_until(&d.http, &url, |b| sample(b, PUBLIC_REFUSED) >= 2.0).await;
    assert_eq!(sample(&body, PUBLIC_REFUSED), 2.0, "{body}");
    assert_eq!(sample(&body, STORE_FAILURES), 0.0, "{body}");
}

#[tokio::test]
async fn an_unreachable_rate_limit_store_is_counted_and_the_api_keeps_answering() {
    // A Redis URL nobody listens on: every limit decision fails open (the request is served).
    let dead_redis = format!("redis://127.0.0.1:{}", free_port());
    let (d, url) = deployment(&[("PAYGATE_REDIS_URL", &dead_redis)]).await;
    assert_eq!(currencies(&d, 4).await, [200, 200, 200, 200]);
    let body = scrape_until(&d.http, &url, |b| sample(b, STORE_FAILURES) >= 4.0).await;
    assert_eq!(sample(&body, PUBLIC_REFUSED), 0.0, "{body}");
}
