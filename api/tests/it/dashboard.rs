//! The merchant dashboard over HTTP, as a browser without script would use it: an invitation
//! accepted with a password and a TOTP code, sign-in, the session cookie, the CSRF token on
//! every form; and what it refuses: a post without a session or without the form token, a
//! viewer's change, a TOTP code used twice, a removed member's session, too many sign-ins.

use std::collections::HashMap;

use chrono::Utc;
use domain::users::{invitations, totp};
use entity::{InvoiceStatus, Role, invoice};
use regex::Regex;
use reqwest::redirect::Policy;
use sea_orm::{ActiveModelTrait, ActiveValue::Set, EntityTrait, IntoActiveModel};
use serde_json::json;
use testkit::TestApp;
use uuid::Uuid;

/// A person at a browser: their cookies, their authenticator (the TOTP secret) and the last
/// time step a code of theirs was accepted.
struct Person<'a> {
    app: &'a TestApp,
    http: reqwest::Client,
    cookies: HashMap<String, String>,
    email: String,
    password: String,
    secret: String,
    last_step: i64,
}

fn encode(form: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish()
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
}

impl Page {
    fn field(&self, name: &str) -> String {
        let re = Regex::new(&format!(r#"name="{name}" value="([^"]*)""#)).unwrap();
        re.captures(&self.body).unwrap_or_else(|| panic!("no field {name} in {}", self.body))[1].to_owned()
    }
}

impl<'a> Person<'a> {
    fn new(app: &'a TestApp, email: &str) -> Person<'a> {
        Person {
            app,
            http: reqwest::Client::builder().redirect(Policy::none()).build().unwrap(),
            cookies: HashMap::new(),
            email: email.into(),
            password: "a long enough password".into(),
            secret: String::new(),
            last_step: 0,
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    async fn read(&mut self, r: reqwest::Response) -> Page {
        for c in r.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let (kv, attrs) = c.split_once(';').unwrap_or((c, ""));
            assert!(attrs.contains("HttpOnly") && attrs.contains("SameSite=Strict"), "{c}");
            let (k, v) = kv.split_once('=').unwrap();
            if v.is_empty() {
                self.cookies.remove(k)
            } else {
                self.cookies.insert(k.into(), v.into())
            };
        }
        let status = r.status().as_u16();
        let location = r.headers().get("location").map(|v| v.to_str().unwrap().to_owned());
        if status == 200 || status == 201 {
            let csp = r.headers().get("content-security-policy").map(|v| v.to_str().unwrap().to_owned());
            assert!(csp.is_some_and(|c| c.contains("default-src 'none'")), "every page has the strict CSP");
        }
        Page { status, location, body: r.text().await.unwrap() }
    }

    async fn get(&mut self, path: &str) -> Page {
        let r = self.http.get(self.app.url(path)).header("cookie", self.cookie_header()).send().await.unwrap();
        self.read(r).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let r = self
            .http
            .post(self.app.url(path))
            .header("cookie", self.cookie_header())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(encode(form))
            .send()
            .await
            .unwrap();
        self.read(r).await
    }

    /// A form post with the token the page at `from` carries.
    async fn submit(&mut self, from: &str, path: &str, form: &[(&str, &str)]) -> Page {
        let csrf = self.get(from).await.field("_csrf");
        let mut all = vec![("_csrf", csrf.as_str())];
        all.extend_from_slice(form);
        self.post(path, &all).await
    }

    /// A code of a later step than the last one accepted (waiting for the clock when the next
    /// step is not yet within the accepted window).
    async fn code(&mut self) -> String {
        loop {
            let now = Utc::now();
            let step = (self.last_step + 1).max(totp::step_at(now));
            if step <= totp::step_at(now) + 1 {
                self.last_step = step;
                return totp::code_at(&self.secret, chrono::DateTime::from_timestamp(step * 30, 0).unwrap()).unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    async fn join(&mut self, merchant: Uuid, role: Role) {
        let (_, token) = invitations::create(
            &self.app.state.db,
            merchant.into(),
            &self.email,
            role,
            "operator:test",
            chrono::Duration::days(1),
            Utc::now(),
        )
        .await
        .unwrap();
        let path = format!("/dashboard/invite/{token}");
        let page = self.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        self.secret =
            Regex::new(r#"id="totp-secret">([A-Z2-7]+)<"#).unwrap().captures(&page.body).unwrap()[1].to_owned();
        let (csrf, secret, password) = (page.field("_csrf"), self.secret.clone(), self.password.clone());
        let code = self.code().await;
        let r = self
            .post(
                &path,
                &[
                    ("_csrf", &csrf),
                    ("password", &password),
                    ("password_again", &password),
                    ("totp_secret", &secret),
                    ("totp", &code),
                ],
            )
            .await;
        assert_eq!((r.status, r.location.as_deref()), (303, Some("/dashboard/login?done=joined")), "{}", r.body);
        // The link works once.
        assert_eq!(self.get(&path).await.status, 404);
    }

    async fn sign_in(&mut self) -> Page {
        let csrf = self.get("/dashboard/login").await.field("_csrf");
        let (email, password) = (self.email.clone(), self.password.clone());
        let code = self.code().await;
        self.post("/dashboard/login", &[("_csrf", &csrf), ("email", &email), ("password", &password), ("totp", &code)])
            .await
    }
}

async fn underpaid_invoice(app: &TestApp, key: &str) -> Uuid {
    let inv = app.create_invoice(key, json!({"currency": "BTC", "amount": "1"})).await;
    let id: Uuid = inv["id"].as_str().unwrap().parse().unwrap();
    let mut row = invoice::Entity::find_by_id(id).one(&app.state.db).await.unwrap().unwrap().into_active_model();
    row.status = Set(InvoiceStatus::Underpaid);
    row.amount_paid = Set(entity::Amount(testkit::d("0.4")));
    row.update(&app.state.db).await.unwrap();
    id
}

async fn status_of(app: &TestApp, id: Uuid) -> InvoiceStatus {
    invoice::Entity::find_by_id(id).one(&app.state.db).await.unwrap().unwrap().status
}

#[tokio::test]
async fn an_owner_joins_signs_in_and_resolves_an_underpaid_invoice() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let mut ann = Person::new(&app, "Ann@Example.com");
    ann.join(merchant, Role::Owner).await;

    // Not signed in yet: pages send to the sign-in page.
    assert_eq!(ann.get("/dashboard").await.location.as_deref(), Some("/dashboard/login"));
    let r = ann.sign_in().await;
    assert_eq!((r.status, r.location.as_deref()), (303, Some("/dashboard")), "{}", r.body);
    let home = ann.get("/dashboard").await;
    assert_eq!(home.status, 200);
    assert!(home.body.contains("Test mode"), "the test banner: {}", home.body);

    let inv = underpaid_invoice(&app, &key).await;
    let r = ann.submit(&format!("/dashboard/invoices/{inv}"), &format!("/dashboard/invoices/{inv}/resolve"), &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(status_of(&app, inv).await, InvoiceStatus::Paid);
    let detail = ann.get(&format!("/dashboard/invoices/{inv}")).await;
    assert!(detail.body.contains("invoice.resolved"), "the timeline shows the event: {}", detail.body);

    // Audited with the person.
    let f = domain::audit::Filter { merchant_id: Some(merchant), limit: 50, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &f).await.unwrap();
    let resolve = entries.iter().find(|e| e.action == "invoice.resolve").expect("audited");
    assert!(resolve.actor.starts_with("user:"), "{resolve:?}");

    // The invoice list filters by status and by external id.
    let list = ann.get("/dashboard/invoices?status=paid").await;
    assert!(list.body.contains(&inv.to_string()), "{}", list.body);
    let none = ann.get("/dashboard/invoices?status=expired").await;
    assert!(!none.body.contains(&inv.to_string()));
}

#[tokio::test]
async fn posts_without_a_session_or_form_token_change_nothing() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let inv = underpaid_invoice(&app, &key).await;
    let path = format!("/dashboard/invoices/{inv}/resolve");

    // No session at all.
    let mut stranger = Person::new(&app, "x@example.com");
    assert_eq!(stranger.post(&path, &[("_csrf", "0")]).await.status, 403);

    let mut ann = Person::new(&app, "ann@example.com");
    ann.join(merchant, Role::Owner).await;
    ann.sign_in().await;
    // A session but no form token, or another's.
    assert_eq!(ann.post(&path, &[]).await.status, 403);
    assert_eq!(ann.post(&path, &[("_csrf", &"ab".repeat(32))]).await.status, 403);
    // A cross-site post, even with the token.
    let csrf = ann.get("/dashboard").await.field("_csrf");
    let r = ann
        .http
        .post(app.url(&path))
        .header("cookie", ann.cookie_header())
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("_csrf", csrf.as_str())]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // The sign-in form without its double-submit token.
    let r = stranger.post("/dashboard/login", &[("email", "ann@example.com"), ("password", "x"), ("totp", "1")]).await;
    assert_eq!(r.status, 403);
    assert_eq!(status_of(&app, inv).await, InvoiceStatus::Underpaid, "nothing changed");
}

#[tokio::test]
async fn a_viewer_is_refused_every_change() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let inv = underpaid_invoice(&app, &key).await;
    let mut vic = Person::new(&app, "vic@example.com");
    vic.join(merchant, Role::Viewer).await;
    vic.sign_in().await;
    let page = vic.get(&format!("/dashboard/invoices/{inv}")).await;
    assert!(!page.body.contains("Resolve as paid"), "no action shown to a viewer");
    for (path, form) in [
        (format!("/dashboard/invoices/{inv}/resolve"), vec![]),
        (format!("/dashboard/invoices/{inv}/cancel"), vec![]),
        ("/dashboard/keys".to_owned(), vec![("permission", "invoices:read")]),
        (
            "/dashboard/settings".to_owned(),
            vec![("base_currency", "EUR"), ("invoice_lifetime_secs", "900"), ("underpayment_tolerance_percent", "1")],
        ),
        (
            "/dashboard/team/invite".to_owned(),
            vec![("email", "eve@example.com"), ("role", "owner"), ("totp", "000000")],
        ),
        ("/dashboard/webhooks".to_owned(), vec![("url", "https://example.com/hooks"), ("totp", "000000")]),
        ("/dashboard/webhooks/redeliver".to_owned(), vec![("from", "2026-01-01"), ("to", "2026-01-02")]),
    ] {
        let r = vic.submit("/dashboard", &path, &form).await;
        assert_eq!(r.status, 403, "{path}: {}", r.body);
        assert!(r.body.contains("Nothing was changed"), "{}", r.body);
    }
    assert_eq!(status_of(&app, inv).await, InvoiceStatus::Underpaid);
    let keys = domain::api_keys::list(
        &app.state,
        &domain::keys::Principal {
            key_id: entity::ApiKeyId(Uuid::nil()),
            merchant_id: merchant.into(),
            environment: entity::Environment::Test,
            permissions: domain::keys::Permissions::all(),
            user_id: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(keys.len(), 1, "only the test's own key");
    // A viewer exports (the bookkeeper's role): the CSV, streamed.
    let today = Utc::now().date_naive();
    let csv = vic.get(&format!("/dashboard/exports/download?kind=invoices&from={today}&to={today}")).await;
    assert_eq!(csv.status, 200, "{}", csv.body);
    assert!(csv.body.starts_with("id,") && csv.body.contains(&inv.to_string()), "{}", csv.body);
}

#[tokio::test]
async fn a_developer_creates_a_key_within_its_role_and_the_key_works() {
    let (app, merchant, _) = TestApp::with_test_key().await;
    let mut dev = Person::new(&app, "dev@example.com");
    dev.join(merchant, Role::Developer).await;
    dev.sign_in().await;
    // Beyond the role: refused.
    let r = dev.submit("/dashboard/keys", "/dashboard/keys", &[("permission", "payouts:write")]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = dev
        .submit(
            "/dashboard/keys",
            "/dashboard/keys",
            &[("label", "ci"), ("permission", "invoices:read"), ("permission", "invoices:write")],
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let key = Regex::new(r#"id="new-key">(sk_test_[0-9a-f]{64})<"#).unwrap().captures(&r.body).unwrap()[1].to_owned();
    let listed = app.get("/v1/invoices", Some(&key)).await;
    assert_eq!(listed.status.as_u16(), 200, "{}", listed.body);
    let f = domain::audit::Filter { merchant_id: Some(merchant), limit: 50, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &f).await.unwrap();
    let created = entries.iter().find(|e| e.action == "api_key.create").expect("audited");
    assert!(created.actor.starts_with("user:"), "{created:?}");
}

#[tokio::test]
async fn a_totp_code_is_taken_once() {
    let (app, merchant, _) = TestApp::with_test_key().await;
    let mut ann = Person::new(&app, "ann@example.com");
    ann.join(merchant, Role::Owner).await;
    ann.sign_in().await;
    let code = ann.code().await;
    let invite = |email: &'static str| [("email", email), ("role", "viewer")];
    let mut form = invite("b@example.com").to_vec();
    form.push(("totp", &code));
    let r = ann.submit("/dashboard/team", "/dashboard/team/invite", &form).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.body.contains("/dashboard/invite/"), "the link is shown once: {}", r.body);
    let mut again = invite("c@example.com").to_vec();
    again.push(("totp", &code));
    let r = ann.submit("/dashboard/team", "/dashboard/team/invite", &again).await;
    assert_eq!(r.status, 400, "the same code twice: {}", r.body);
    let pending = invitations::pending(&app.state.db, merchant.into(), Utc::now()).await.unwrap();
    assert_eq!(pending.iter().map(|i| i.email.as_str()).collect::<Vec<_>>(), ["b@example.com"]);
}

#[tokio::test]
async fn signing_out_everywhere_and_removal_end_sessions() {
    let (app, merchant, _) = TestApp::with_test_key().await;
    let mut ann = Person::new(&app, "ann@example.com");
    ann.join(merchant, Role::Owner).await;
    ann.sign_in().await;
    let mut ann2 = Person::new(&app, "ann@example.com");
    (ann2.secret, ann2.last_step) = (ann.secret.clone(), ann.last_step);
    ann2.sign_in().await;
    ann.last_step = ann2.last_step;
    assert_eq!(ann2.get("/dashboard").await.status, 200);
    let r = ann.submit("/dashboard", "/dashboard/logout-everywhere", &[]).await;
    assert_eq!(r.status, 303);
    assert_eq!(ann2.get("/dashboard").await.location.as_deref(), Some("/dashboard/login"));
    assert_eq!(ann.get("/dashboard").await.location.as_deref(), Some("/dashboard/login"));

    // An owner removes a member: the member's session ends at once.
    ann.sign_in().await;
    let mut bob = Person::new(&app, "bob@example.com");
    bob.join(merchant, Role::Admin).await;
    bob.sign_in().await;
    assert_eq!(bob.get("/dashboard").await.status, 200);
    let bob_id = domain::users::team(&app.state.db, merchant.into())
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.email == "bob@example.com")
        .unwrap()
        .id;
    let code = ann.code().await;
    let r = ann.submit("/dashboard/team", &format!("/dashboard/team/{bob_id}/remove"), &[("totp", &code)]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(bob.get("/dashboard").await.location.as_deref(), Some("/dashboard/login"));
    // The last owner cannot be removed (by an admin it would not be allowed anyway).
}

#[tokio::test]
async fn sign_in_is_throttled_per_account() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.login_per_account = domain::config::RateLimit { limit: 2, period_secs: 600 }
    })
    .await;
    let merchant = app.merchant().await;
    let mut ann = Person::new(&app, "ann@example.com");
    ann.join(merchant, Role::Owner).await;
    let csrf = ann.get("/dashboard/login").await.field("_csrf");
    for _ in 0..2 {
        let r = ann
            .post(
                "/dashboard/login",
                &[("_csrf", &csrf), ("email", "ann@example.com"), ("password", "wrong password!!"), ("totp", "000000")],
            )
            .await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // Even the right password is not tried once the account's attempts are used up.
    let r = ann.sign_in().await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert!(r.body.contains("Too many sign-in attempts"));
}

#[tokio::test]
async fn the_merchant_approves_its_payouts_and_its_limit_skips_small_ones() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    testkit::fund(&app.state.db, merchant, entity::Environment::Test, "tron_usdt", "1000").await;
    const TRON_DEST: &str = "TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE";
    let payout =
        |amount: &str| json!({"currency": "USDT", "network": "tron", "amount": amount, "destination": TRON_DEST});
    let mut ann = Person::new(&app, "ann@example.com");
    ann.join(merchant, Role::Owner).await;
    ann.sign_in().await;

    // The operator approves: the dashboard refuses to approve, and offers no limit.
    let p = app.post("/v1/payouts", Some(&key), &payout("10")).await;
    let pid = p.data()["id"].as_str().unwrap().to_owned();
    let code = ann.code().await;
    let r = ann.submit("/dashboard/payouts", &format!("/dashboard/payouts/{pid}/approve"), &[("totp", &code)]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(app.get(&format!("/v1/payouts/{pid}"), Some(&key)).await.data()["status"], "pending_approval");

    // The operator hands approval to the merchant: approved with a code, once.
    testkit::set_payout_settings(&app.state.db, merchant, entity::Environment::Test, |s| s.merchant_approves = true)
        .await;
    let r = ann.submit("/dashboard/payouts", &format!("/dashboard/payouts/{pid}/approve"), &[("totp", "000000")]).await;
    assert_eq!(r.status, 400, "a wrong code: {}", r.body);
    let code = ann.code().await;
    let r = ann.submit("/dashboard/payouts", &format!("/dashboard/payouts/{pid}/approve"), &[("totp", &code)]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(app.get(&format!("/v1/payouts/{pid}"), Some(&key)).await.data()["status"], "approved");
    let code = ann.code().await;
    let r = ann.submit("/dashboard/payouts", &format!("/dashboard/payouts/{pid}/approve"), &[("totp", &code)]).await;
    assert_eq!(r.status, 409, "approved already: {}", r.body);

    // The limit (USD at the static test rate, 1 USDT = 1 USD): at or below it, payouts start approved.
    let code = ann.code().await;
    let r = ann
        .submit("/dashboard/settings", "/dashboard/settings/payouts", &[("auto_approve_limit", "50"), ("totp", &code)])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let small = app.post("/v1/payouts", Some(&key), &payout("50")).await;
    assert_eq!(small.data()["status"], "approved", "{}", small.body);
    let big = app.post("/v1/payouts", Some(&key), &payout("60")).await;
    assert_eq!(big.data()["status"], "pending_approval", "{}", big.body);
}
