//! The real router on 127.0.0.1:0 over a fresh database, with its merchants, keys and HTTP
//! helpers.

use std::net::SocketAddr;

use api::auth::{Permission, Permissions};
use api::state::HttpState;
use domain::config::Config;
use entity::Environment;
use reqwest::StatusCode;
use serde_json::Value;
use uuid::Uuid;

use crate::{Db, take_test_gate_offline, test_config};

pub struct TestApp {
    pub addr: SocketAddr,
    pub state: HttpState,
    pub http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub db: std::sync::Arc<Db>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

pub struct Resp {
    pub status: StatusCode,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl Resp {
    /// Asserts the error envelope and returns `error.code`.
    pub fn error_code(&self) -> &str {
        assert!(
            self.body["meta"]["request_id"].as_str().is_some_and(|s| !s.is_empty()),
            "no request id: {}",
            self.body
        );
        assert!(self.body["error"]["message"].is_string(), "{}", self.body);
        assert!(self.body["error"]["details"].is_array(), "{}", self.body);
        self.body["error"]["code"].as_str().unwrap_or_else(|| panic!("no error code: {}", self.body))
    }

    pub fn details(&self) -> Vec<String> {
        self.body["error"]["details"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    }

    /// Asserts a 4xx/5xx status with that code, and a detail naming `field` if given.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str, field: Option<&str>) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert_eq!(self.error_code(), code, "{}", self.body);
        if let Some(f) = field {
            assert!(self.details().iter().any(|d| d.starts_with(&format!("{f}:"))), "no detail for {f}: {}", self.body);
        }
    }

    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// Asserts a list page's `meta.pagination`.
    #[track_caller]
    pub fn assert_page(&self, total: u64, limit: u64, offset: u64, has_more: bool) {
        let want = serde_json::json!({"total": total, "limit": limit, "offset": offset, "has_more": has_more});
        assert_eq!(self.body["meta"]["pagination"], want);
    }
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    /// [`TestApp::spawn`], with a merchant and its all-permission test key.
    pub async fn with_test_key() -> (TestApp, Uuid, String) {
        let app = Self::spawn().await;
        let (merchant, key) = app.test_key().await;
        (app, merchant, key)
    }

    pub async fn spawn_with(f: impl FnOnce(&mut Config)) -> TestApp {
        let db = std::sync::Arc::new(Db::fresh().await);
        Self::spawn_on(db, f).await
    }

    /// An app for the `gate_offline` suites, with a merchant and its test key: the test bitcoin
    /// gate taken offline, and no live Solana address pool (so live Solana is offline too).
    pub async fn spawn_with_gates_offline() -> (TestApp, Uuid, String) {
        let app = Self::spawn_with(|c| {
            take_test_gate_offline(c, "bitcoin");
            c.addresses.live.solana_pool.clear();
        })
        .await;
        let (merchant, key) = app.test_key().await;
        (app, merchant, key)
    }

    /// Another API process on the same database (for cross-process behaviour).
    pub async fn spawn_on(db: std::sync::Arc<Db>, f: impl FnOnce(&mut Config)) -> TestApp {
        // Logs (internal errors included) show up in a failing test's output.
        let _ = tracing_subscriber::fmt().with_env_filter("warn,sqlx=error").with_test_writer().try_init();
        let mut config = test_config();
        config.database_url = db.url.clone();
        f(&mut config);
        let state = api::bootstrap(config).await.expect("bootstrap");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(api::app::serve(listener, state.clone(), async {
            let _ = rx.await;
        }));
        TestApp { addr, state, http: reqwest::Client::new(), stop: Some(tx), db }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn merchant(&self) -> Uuid {
        domain::merchants::create_merchant(&self.state.db, "Test merchant", &Default::default())
            .await
            .expect("merchant")
            .id
    }

    pub async fn key(&self, merchant: Uuid, env: Environment, perms: &[Permission]) -> String {
        let p: Permissions = if perms.is_empty() { Permissions::all() } else { perms.iter().copied().collect() };
        domain::merchants::create_api_key(&self.state.db, merchant.into(), env, p, None).await.expect("key").1
    }

    /// A merchant with an all-permission test key.
    pub async fn test_key(&self) -> (Uuid, String) {
        let m = self.merchant().await;
        let k = self.key(m, Environment::Test, &[]).await;
        (m, k)
    }

    /// A merchant with an all-permission live key.
    pub async fn live_key(&self) -> (Uuid, String) {
        let m = self.merchant().await;
        let k = self.key(m, Environment::Live, &[]).await;
        (m, k)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let r = req.send().await.expect("request");
        let status = r.status();
        let headers = r.headers().clone();
        let text = r.text().await.expect("body");
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Resp { status, body, headers }
    }

    pub async fn get(&self, path: &str, key: Option<&str>) -> Resp {
        let mut rb = self.http.get(self.url(path));
        if let Some(k) = key {
            rb = rb.header("X-API-Key", k);
        }
        self.send(rb).await
    }

    /// `GET path` of a list page, asserting its `meta.pagination`: `[total, limit, offset]` and
    /// `has_more`.
    pub async fn page(&self, path: &str, key: &str, [total, limit, offset]: [u64; 3], has_more: bool) -> Resp {
        let r = self.get(path, Some(key)).await;
        r.assert_page(total, limit, offset, has_more);
        r
    }

    pub async fn post(&self, path: &str, key: Option<&str>, body: &Value) -> Resp {
        let mut rb = self.http.post(self.url(path)).json(body);
        if let Some(k) = key {
            rb = rb.header("X-API-Key", k);
        }
        self.send(rb).await
    }

    pub async fn patch(&self, path: &str, key: Option<&str>, body: &Value) -> Resp {
        let mut rb = self.http.patch(self.url(path)).json(body);
        if let Some(k) = key {
            rb = rb.header("X-API-Key", k);
        }
        self.send(rb).await
    }

    /// `post` with an owned body (handy in closures).
    pub async fn post_owned(&self, path: &str, key: &str, body: Value) -> Resp {
        self.post(path, Some(key), &body).await
    }

    /// `post` with an `Idempotency-Key` header (refunds require one).
    pub async fn post_idempotent(&self, path: &str, key: &str, idempotency_key: &str, body: &Value) -> Resp {
        let rb = self.http.post(self.url(path)).header("X-API-Key", key).header("Idempotency-Key", idempotency_key);
        self.send(rb.json(body)).await
    }

    pub async fn post_raw(&self, path: &str, key: &str, body: &str) -> Resp {
        self.send(
            self.http
                .post(self.url(path))
                .header("X-API-Key", key)
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await
    }

    pub async fn create_invoice(&self, key: &str, body: Value) -> Value {
        self.create("/v1/invoices", key, body).await
    }

    /// `POST path` of `body`, which must be `201 Created`: the created object.
    pub async fn create(&self, path: &str, key: &str, body: Value) -> Value {
        let r = self.post(path, Some(key), &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["data"].clone()
    }

    /// [`TestApp::create_invoice`], returning the new invoice's id.
    pub async fn create_invoice_id(&self, key: &str, body: Value) -> Uuid {
        let invoice = self.create_invoice(key, body).await;
        invoice["id"].as_str().expect("an invoice id").parse().expect("a UUID")
    }

    /// The `status` of `gate` in `GET /v1/currencies?environment={env}`.
    pub async fn gate_status(&self, env: &str, gate: &str) -> String {
        let currencies = self.get(&format!("/v1/currencies?environment={env}"), None).await;
        let all = currencies.data().as_array().expect("a list of currencies");
        let found = all.iter().find(|c| c["id"] == gate).unwrap_or_else(|| panic!("no {gate} in {env}"));
        found["status"].as_str().expect("a status").to_owned()
    }

    /// (available, reserved) of `gate` in `GET /v1/balances`, as the API writes them; the gate
    /// must have a balance row.
    pub async fn available_reserved(&self, key: &str, gate: &str) -> (String, String) {
        let rows = self.get("/v1/balances", Some(key)).await.body["data"].clone();
        let row = rows.as_array().unwrap().iter().find(|r| r["gate_id"] == gate).unwrap().clone();
        (row["available"].as_str().unwrap().to_owned(), row["reserved"].as_str().unwrap().to_owned())
    }
}
