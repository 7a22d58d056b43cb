//! The merchant dashboard in a real browser (headless Chromium over WebDriver), as the people
//! of a merchant use it, on both shapes:
//!
//! - the embedded default: `ops serve` (API and every stage in one process, SQLite);
//! - the production shape (`--features pg-tests,redis-tests`): two `api` processes and the
//!   deposit scanner and confirmation tracker as separate processes, on a fresh PostgreSQL
//!   database and a fresh Redis prefix. The person signs in on one API process and goes on on
//!   the other: the session is in the database, so either serves it.
//!
//! The walk: the operator invites an owner (`ops merchants invite`); the owner opens the link,
//! sets a password and enrols TOTP (the code computed from the key the page shows, as an
//! authenticator app does), signs in, creates a test API key and uses it with curl, resolves an
//! underpaid invoice, approves a payout with a TOTP code (the operator set the merchant to
//! approve its payouts), invites a viewer; the viewer signs in, sees no action, and a forged
//! change is refused with the 403 page and changes nothing; a post without the form token or
//! without a session is refused too. Every page is checked by axe-core (no serious or critical
//! finding) and kept as a screenshot at a desktop and a phone width (`target/dashboard-screenshots/`,
//! and `docs/dashboard-screenshots/` with `DASHBOARD_SCREENSHOTS_DOCS=1`).

use std::process::Command;
use std::time::{Duration, Instant};

use chrono::Utc;
use domain::users::totp;
use fantoccini::Locator;
use serde_json::{Value, json};
use testkit::fleet::free_port;
use testkit::serve::{ops_serve, start_with_demo_key};
use uuid::Uuid;

use crate::browser::Browser;

const BTC_TESTNET: &str = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx";

/// A running deployment as the walk sees it: where its two API faces are (the same one on the
/// embedded default), a test key for the setup (the payer's and the shop's side), the merchant,
/// and how to run `ops` against its database.
struct Site {
    a: String,
    b: String,
    key: String,
    merchant: Uuid,
    ops_dir: std::path::PathBuf,
    ops_env: Vec<(String, String)>,
    http: reqwest::Client,
    _guards: Vec<Box<dyn std::any::Any>>,
}

impl Site {
    /// `ops <args>` on the site's database; its standard output.
    fn ops(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ops"));
        cmd.args(args).current_dir(&self.ops_dir).env("RUST_LOG", "warn");
        for (k, v) in &self.ops_env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run ops");
        assert!(out.status.success(), "ops {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    async fn api(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut r = self.http.request(method, format!("{}{path}", self.a)).header("X-API-Key", &self.key);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {v}");
        v["data"].clone()
    }

    async fn wait_invoice(&self, id: &str, status: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let inv = self.api(reqwest::Method::GET, &format!("/v1/invoices/{id}"), None).await;
            if inv["status"] == status {
                return;
            }
            assert!(Instant::now() < deadline, "invoice {id} never became {status}: {inv}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn wait_ready(http: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while http.get(format!("{base}/ready")).send().await.map(|r| r.status() != 200).unwrap_or(true) {
        assert!(Instant::now() < deadline, "{base} never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `ops serve` on a fresh directory: one process, one SQLite file.
async fn embedded() -> Site {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut cmd = ops_serve(env!("CARGO_BIN_EXE_ops"), dir.path(), port, "200");
    cmd.env("PAYGATE_PUBLIC_BASE_URL", &base)
        .env("PAYGATE_PIPELINE__TRACK_INTERVAL_MS", "200")
        // The test's webhook receiver listens on 127.0.0.1.
        .env("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")
        // A test event or redelivery is taken by the deliverer's sweep of stale deliveries.
        .env("PAYGATE_WEBHOOKS__STALE_AFTER_SECS", "2");
    let (child, key) = start_with_demo_key(cmd).await;
    let http = reqwest::Client::new();
    wait_ready(&http, &base).await;
    let mut site = Site {
        a: base.clone(),
        b: base,
        key,
        merchant: Uuid::nil(),
        ops_dir: dir.path().to_owned(),
        ops_env: Vec::new(),
        http,
        _guards: vec![Box::new(child), Box::new(dir)],
    };
    let list = site.ops(&["merchants", "list"]);
    site.merchant = list.split_whitespace().next().and_then(|id| id.parse().ok()).expect("the demo merchant");
    site
}

/// Two API processes, the deposit scanner and the confirmation tracker on a fresh PostgreSQL
/// database, jobs and rate limits on a fresh Redis prefix.
#[cfg(all(feature = "pg-tests", feature = "redis-tests"))]
async fn production() -> Site {
    let secret = domain::webhooks::secrets::SecretBox::new_key_hex();
    let redis = std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let prefix = format!("paygate-dash-{:016x}", rand::random::<u64>());
    let vars: Vec<(&str, &str)> = vec![
        ("PAYGATE_WEBHOOKS__SECRET_KEY", &secret),
        ("PAYGATE_REDIS_URL", &redis),
        ("PAYGATE_RATE_LIMITS__REDIS_PREFIX", &prefix),
        ("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true"),
        ("PAYGATE_WEBHOOKS__DISPATCH_INTERVAL_MS", "100"),
        ("PAYGATE_WEBHOOKS__STALE_AFTER_SECS", "2"),
    ];
    let dep = testkit::fleet::Deployment::start("Dashboard shop", entity::Environment::Test, &vars).await;
    let second = dep.fleet.api();
    let scanner = dep.fleet.worker(testkit::fleet::sibling_binary("deposit-scanner").to_str().unwrap());
    let tracker = dep.fleet.worker(testkit::fleet::sibling_binary("confirmation-tracker").to_str().unwrap());
    let deliverer = dep.fleet.worker(testkit::fleet::sibling_binary("webhook-deliverer").to_str().unwrap());
    let http = reqwest::Client::new();
    testkit::fleet::wait_ready(&http, &second).await;
    testkit::fleet::wait_ready(&http, &scanner).await;
    testkit::fleet::wait_ready(&http, &tracker).await;
    testkit::fleet::wait_ready(&http, &deliverer).await;
    let ops_env = dep.fleet.env.clone();
    Site {
        a: dep.api.url.clone(),
        b: second.url.clone(),
        key: dep.key.clone(),
        merchant: dep.merchant,
        ops_dir: dep.fleet.dir.path().to_owned(),
        ops_env,
        http,
        _guards: vec![Box::new(deliverer), Box::new(tracker), Box::new(scanner), Box::new(second), Box::new(dep)],
    }
}

/// A person's authenticator: their TOTP key and the last step a code of theirs was accepted.
struct Authenticator {
    secret: String,
    last: i64,
}

impl Authenticator {
    /// A code the server has not seen yet (waiting for the clock's next step when needed).
    async fn code(&mut self) -> String {
        loop {
            let now = Utc::now();
            let step = (self.last + 1).max(totp::step_at(now));
            if step <= totp::step_at(now) + 1 {
                self.last = step;
                return totp::code_at(&self.secret, chrono::DateTime::from_timestamp(step * 30, 0).unwrap()).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

async fn fill(b: &Browser, css: &str, text: &str) {
    let el = b.client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    el.clear().await.unwrap();
    el.send_keys(text).await.unwrap();
}

async fn wait_url(b: &Browser, part: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = b.client.current_url().await.unwrap();
        if url.as_str().contains(part) {
            return;
        }
        assert!(Instant::now() < deadline, "never reached {part}; at {url}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn goto(b: &Browser, url: &str) {
    b.client.goto(url).await.unwrap_or_else(|e| panic!("{url}: {e}"));
}

/// Opens an invitation link, sets the password, enrols TOTP; returns the authenticator.
async fn accept_invitation(b: &Browser, link: &str, password: &str, shot: Option<&str>) -> Authenticator {
    goto(b, link).await;
    b.wait_text("h1", "Join the dashboard").await;
    if let Some(name) = shot {
        b.capture(name, "en", &[("h1", "Join the dashboard")]).await;
    }
    let mut auth = Authenticator { secret: b.text("#totp-secret").await, last: 0 };
    fill(b, "#password", password).await;
    fill(b, "#password_again", password).await;
    let code = auth.code().await;
    fill(b, "#totp", &code).await;
    b.click("form.card button[type=submit]").await;
    wait_url(b, "/dashboard/login?done=joined").await;
    auth
}

async fn sign_in(b: &Browser, base: &str, email: &str, password: &str, auth: &mut Authenticator) {
    goto(b, &format!("{base}/dashboard/login")).await;
    fill(b, "#email", email).await;
    fill(b, "#password", password).await;
    let code = auth.code().await;
    fill(b, "#totp", &code).await;
    b.click("form.card button[type=submit]").await;
    b.wait_text("h1", "Overview").await;
}

/// The path of the link `ops merchants invite` printed, on `base`.
fn on(base: &str, link: &str) -> String {
    let url = url::Url::parse(link.trim()).expect("an invitation link");
    format!("{base}{}", url.path())
}

async fn walk(site: Site) {
    let b = Browser::start("dashboard").await;
    let password = "correct horse battery staple";

    // The operator invites the owner; the link is printed once.
    let link =
        site.ops(&["merchants", "invite", &site.merchant.to_string(), "--email", "owner@shop.test", "--role", "owner"]);
    let mut owner = accept_invitation(&b, &on(&site.a, &link), password, Some("invite")).await;
    b.wait_text("p.notice", "Your account is ready").await;
    b.capture("sign-in", "en", &[("h1", "Sign in")]).await;
    sign_in(&b, &site.a, "owner@shop.test", password, &mut owner).await;
    b.wait_text("p.banner", "Test mode").await;

    // A test key, on the other API process: the same session.
    goto(&b, &format!("{}/dashboard/keys", site.b)).await;
    b.wait_text("h1", "API keys").await;
    fill(&b, "#k-label", "shop backend").await;
    b.click("#create-key").await;
    b.wait_text("h1", "Key created").await;
    let key = b.text("#new-key").await;
    assert!(key.starts_with("sk_test_") && key.len() == 72, "{key}");
    b.capture("key-created", "en", &[("h1", "Key created")]).await;
    let curl = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            &format!("X-API-Key: {key}"),
            &format!("{}/v1/invoices", site.a),
        ])
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "200", "the new key works with curl");

    // A webhook endpoint added on the page (with a code), a test event sent to it, and its
    // delivery and attempt seen in the log; the receiver checks each signature with the secret
    // the page showed once.
    let receiver = api::webhooks::receiver::Receiver::start(
        "127.0.0.1:0".parse().unwrap(),
        &[],
        api::webhooks::receiver::Behaviour::Ok(Duration::ZERO),
    )
    .await
    .unwrap();
    goto(&b, &format!("{}/dashboard/webhooks", site.a)).await;
    fill(&b, "#w-url", &receiver.url()).await;
    fill(&b, "#w-description", "order system").await;
    let code = owner.code().await;
    fill(&b, "#w-totp", &code).await;
    b.click("#add-endpoint").await;
    b.wait_text("h1", "Endpoint added").await;
    let secret = b.text("#endpoint-secret").await;
    assert!(secret.starts_with("whsec_"), "{secret}");
    receiver.set_secrets(&[&secret]);
    goto(&b, &format!("{}/dashboard/webhooks", site.b)).await;
    b.click("form[action$='/test'] button").await;
    b.wait_text("h1", "Webhook delivery").await;
    let deadline = Instant::now() + Duration::from_secs(180);
    while !b.text("#delivery-status").await.contains("succeeded") {
        assert!(Instant::now() < deadline, "the test delivery never succeeded");
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.client.refresh().await.unwrap();
    }
    b.wait_text("#attempts", "200").await;
    b.capture("webhook-delivery", "en", &[("#attempts", "ms")]).await;
    let got = receiver.received();
    assert!(got.iter().any(|r| r.event == "test" && r.verified), "a signed test event: {got:?}");
    goto(&b, &format!("{}/dashboard/webhooks", site.a)).await;
    b.capture("webhooks", "en", &[("h1", "Webhooks"), ("section.card", "order system")]).await;

    // An underpaid invoice, resolved by hand.
    let inv = site
        .api(
            reqwest::Method::POST,
            "/v1/invoices",
            Some(json!({"currency": "BTC", "amount": "1", "external_id": "order-1001"})),
        )
        .await;
    let id = inv["id"].as_str().unwrap().to_owned();
    site.api(reqwest::Method::POST, "/v1/test/deposits", Some(json!({"invoice_id": id, "amount": "0.4"}))).await;
    site.api(reqwest::Method::POST, "/v1/test/blocks", Some(json!({"currency": "BTC", "count": 6}))).await;
    site.wait_invoice(&id, "underpaid").await;
    goto(&b, &format!("{}/dashboard/invoices?status=underpaid&external_id=order-1001", site.a)).await;
    b.capture("invoices", "en", &[("h1", "Invoices"), ("table", "order-1001")]).await;
    b.click(&format!("a[href='/dashboard/invoices/{id}']")).await;
    b.wait_text("#invoice-status", "underpaid").await;
    // Its credit recorded its value on the day: 0.4 BTC at the test rates' 60 000 USD (published
    // by the API, read by the tracker that credited it).
    b.wait_text("td.fiat", "24000.00 USD").await;
    b.capture("invoice-underpaid", "en", &[("#invoice-status", "underpaid")]).await;
    b.click("#resolve").await;
    b.wait_text("#invoice-status", "paid").await;
    b.wait_text("p.notice", "Resolved").await;
    site.wait_invoice(&id, "paid").await;

    // The bookkeeper's CSV of invoices, downloaded from the exports page and read back.
    goto(&b, &format!("{}/dashboard/exports", site.a)).await;
    b.capture("exports", "en", &[("h1", "Exports")]).await;
    b.client.find(Locator::Css("#e-kind")).await.unwrap().select_by_value("invoices").await.unwrap();
    b.click("#download").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let csv = loop {
        let done = std::fs::read_dir(b.downloads.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "csv"));
        if let Some(path) = done {
            break std::fs::read_to_string(path).unwrap();
        }
        assert!(Instant::now() < deadline, "no CSV was downloaded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("id,"), "{csv}");
    let row = lines.find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("the invoice is in the CSV: {csv}"));
    assert!(row.contains("order-1001") && row.contains(",paid,"), "{row}");

    // A payout, approved by the merchant with a TOTP code.
    site.ops(&[
        "payouts",
        "settings",
        "--merchant",
        &site.merchant.to_string(),
        "--env",
        "test",
        "--merchant-approves",
        "true",
    ]);
    let payout = site
        .api(
            reqwest::Method::POST,
            "/v1/payouts",
            Some(json!({"currency": "BTC", "amount": "0.1", "destination": BTC_TESTNET})),
        )
        .await;
    let pid = payout["id"].as_str().unwrap().to_owned();
    assert_eq!(payout["status"], "pending_approval", "{payout}");
    goto(&b, &format!("{}/dashboard/payouts", site.b)).await;
    b.capture("payouts", "en", &[("h1", "Payouts"), (&format!("#payout-{pid}"), "pending_approval")]).await;
    let code = owner.code().await;
    fill(&b, &format!("#totp-{pid}"), &code).await;
    b.click(&format!("form[action='/dashboard/payouts/{pid}/approve'] button")).await;
    b.wait_text("p.notice", "Approved").await;
    b.wait_text(&format!("#payout-{pid}"), "approved").await;
    let after = site.api(reqwest::Method::GET, &format!("/v1/payouts/{pid}"), None).await;
    assert_ne!(after["status"], "pending_approval", "{after}");

    // The owner invites a viewer from the team page.
    goto(&b, &format!("{}/dashboard/team", site.a)).await;
    fill(&b, "#i-email", "books@shop.test").await;
    b.client.find(Locator::Css("#i-role")).await.unwrap().select_by_value("viewer").await.unwrap();
    let code = owner.code().await;
    fill(&b, "#i-totp", &code).await;
    b.click("form[action='/dashboard/team/invite'] button").await;
    b.wait_text("h1", "Invitation created").await;
    let viewer_link = b.text("#invite-link").await;
    b.capture("invitation-created", "en", &[("h1", "Invitation created")]).await;
    goto(&b, &format!("{}/dashboard", site.a)).await;
    b.capture("overview", "en", &[("h1", "Overview")]).await;
    b.click("form[action='/dashboard/logout'] button").await;
    wait_url(&b, "/dashboard/login").await;

    // The viewer joins and looks around; a pending invoice to try changes on.
    let mut viewer = accept_invitation(&b, &on(&site.b, &viewer_link), password, None).await;
    sign_in(&b, &site.b, "books@shop.test", password, &mut viewer).await;
    let pending =
        site.api(reqwest::Method::POST, "/v1/invoices", Some(json!({"currency": "BTC", "amount": "0.5"}))).await;
    let pending_id = pending["id"].as_str().unwrap().to_owned();
    goto(&b, &format!("{}/dashboard/invoices/{pending_id}", site.b)).await;
    b.wait_text("#invoice-status", "pending").await;
    assert!(b.client.find(Locator::Css("#cancel")).await.is_err(), "no cancel button for a viewer");
    // A change forged in the page (as an edited form would send it), with the session's token.
    b.js(&format!(
        "var f = document.createElement('form'); f.method = 'post'; f.action = '/dashboard/invoices/{pending_id}/cancel';
         var t = document.createElement('input'); t.type = 'hidden'; t.name = '_csrf';
         t.value = document.querySelector('input[name=_csrf]').value; f.appendChild(t);
         document.body.appendChild(f); f.submit(); return true;"
    ))
    .await;
    b.wait_text("h1", "Not allowed").await;
    b.capture("viewer-refused", "en", &[("p.error", "Nothing was changed")]).await;
    site.wait_invoice(&pending_id, "pending").await;

    // Without the form token, or without a session: refused, nothing changed.
    let cookies = b.client.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|c| c.name() == "paygate_session").expect("the session cookie");
    assert_eq!(session.http_only(), Some(true));
    let post = |cookie: Option<String>| {
        let mut r = site
            .http
            .post(format!("{}/dashboard/invoices/{pending_id}/cancel", site.a))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("x=1");
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        r.send()
    };
    assert_eq!(post(Some(format!("paygate_session={}", session.value()))).await.unwrap().status(), 403);
    assert_eq!(post(None).await.unwrap().status(), 403);
    site.wait_invoice(&pending_id, "pending").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_walk_on_the_embedded_default() {
    walk(embedded().await).await;
}

#[cfg(all(feature = "pg-tests", feature = "redis-tests"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_walk_on_postgres_and_redis_with_two_api_processes() {
    walk(production().await).await;
}
