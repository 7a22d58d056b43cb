//! Test support shared by the integration suites of `api`, `workers` and `ops` (a dev-dependency
//! only, never published): the real router on 127.0.0.1:0 over a fresh database per test,
//! merchants and keys, ledger helpers, an anvil node ([`anvil`]) and worker processes
//! ([`fleet`]).
//!
//! Default: a temporary SQLite file (the embedded default). With the `pg` feature (each suite's
//! `--features pg-tests` turns it on): a new
//! PostgreSQL database per test on `PAYGATE_TEST_PG` (default postgres://postgres@127.0.0.1:5432),
//! dropped afterwards. An unreachable PostgreSQL fails the test loudly; nothing is skipped.
pub mod anvil;
pub mod fleet;
pub mod race;
pub mod serve;

use std::net::SocketAddr;

use api::auth::{Permission, Permissions};
use api::state::HttpState;
use domain::chain::address::AccountKeysConfig;
use domain::config::Config;
use entity::Environment;
use reqwest::StatusCode;
use serde_json::Value;
use uuid::Uuid;

/// A valid TRON address (mainnet and test alike) to pay out to.
pub const TRON_DEST: &str = "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP";

/// An invoice's events when its credited deposit was reversed (the invoice then `invalid`) and
/// later revived: taken as a late deposit and credited once more.
pub const REVIVED_DEPOSIT_EVENTS: [&str; 7] = [
    "invoice.confirming",
    "invoice.paid",
    "balance.credited",
    "invoice.deposit_reversed",
    "invoice.invalid",
    "invoice.late_deposit",
    "balance.credited",
];

/// A decimal from its text.
pub fn d(s: &str) -> rust_decimal::Decimal {
    s.parse().unwrap_or_else(|e| panic!("{s:?} is not a decimal: {e}"))
}

/// Public BIP32 test-vector keys (the "abandon … about" mnemonic): live-format addresses for tests.
pub fn live_keys() -> AccountKeysConfig {
    AccountKeysConfig {
        bitcoin_xpub: Some("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs".into()),
        evm_xpub: Some("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt".into()),
        tron_xpub: Some("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd".into()),
        xrp_address: Some("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh".into()),
        solana_pool: vec![
            "So11111111111111111111111111111111111111112".into(),
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".into(),
        ],
    }
}

/// The configuration every test starts from: static rates in both environments, live keys set,
/// and a node address for every live EVM network, so live EVM gates are online (the API never
/// calls it; nothing listens on the discard port). Live bitcoin, tron, solana and xrp have no
/// chain adapter, so they stay offline whatever keys are set.
pub fn test_config() -> Config {
    let mut c = Config::default();
    c.rates.live.provider = domain::config::RatesProviderKind::Static;
    c.addresses.live = live_keys();
    for network in ["ethereum", "bsc", "base", "arbitrum", "polygon"] {
        let node = domain::config::EvmNetworkConfig { rpc_url: "http://127.0.0.1:9".into(), ..Default::default() };
        c.evm.networks.insert(network.into(), node);
    }
    c.auth.cache_ttl_secs = 1;
    c.embedded.seed_demo = false;
    c.db.max_connections = 8;
    // Suites not about throttling fire bursts no merchant would (hundreds of racing writes):
    // the rate limiting layer stays on for every request, its limits out of their reach.
    // tests/rate_limits.rs sets its own.
    let high = domain::config::RateLimit { limit: 1_000_000, period_secs: 60 };
    let rl = &mut c.rate_limits;
    (rl.reads, rl.writes, rl.public, rl.auth_failures, rl.test_helpers) = (high, high, high, high, high);
    c
}

/// Takes the test environment's `gate` (a network: "bitcoin", "tron", …) offline in `config`.
pub fn take_test_gate_offline(config: &mut Config, gate: &str) {
    let offline =
        domain::config::GateOverride { status: Some(domain::config::GateStatus::Offline), ..Default::default() };
    config.gates.test.insert(gate.into(), offline);
}

pub struct Db {
    pub url: String,
    #[cfg(feature = "pg")]
    name: String,
    _dir: Option<tempfile::TempDir>,
}

#[cfg(feature = "pg")]
pub fn pg_server() -> String {
    std::env::var("PAYGATE_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

impl Db {
    pub async fn fresh() -> Db {
        #[cfg(feature = "pg")]
        {
            use sea_orm::ConnectionTrait;
            let server = pg_server();
            let admin = sea_orm::Database::connect(format!("{server}/postgres"))
                .await
                .unwrap_or_else(|e| panic!("pg-tests: PostgreSQL at {server} is unreachable: {e}"));
            let name = format!("paygate_test_{}", Uuid::new_v4().simple());
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create test database");
            Db { url: format!("{server}/{name}"), name, _dir: None }
        }
        #[cfg(not(feature = "pg"))]
        {
            let dir = tempfile::tempdir().expect("tempdir");
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("test.db").display());
            Db { url, _dir: Some(dir) }
        }
    }
}

#[cfg(feature = "pg")]
impl Drop for Db {
    fn drop(&mut self) {
        let (server, name) = (pg_server(), self.name.clone());
        let _ = std::thread::spawn(move || {
            use sea_orm::ConnectionTrait;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                if let Ok(admin) = sea_orm::Database::connect(format!("{server}/postgres")).await {
                    let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                }
            });
        })
        .join();
    }
}

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
        domain::merchants::create_api_key(&self.state.db, merchant, env, p, None).await.expect("key").1
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

/// A manual ledger adjustment of `amount` (signed) on `merchant`'s `gate` balance in `env`.
pub async fn adjust(
    db: &impl domain::db::WriteDb,
    merchant: Uuid,
    env: Environment,
    gate: &str,
    amount: &str,
    reason: &str,
) {
    let g = domain::gates::find(gate).unwrap_or_else(|| panic!("no gate {gate}"));
    let amount: rust_decimal::Decimal = amount.parse().expect("amount");
    domain::ledger::adjust(db, merchant, env, g, amount, reason).await.expect("ledger adjustment");
}

/// Funds `merchant`'s `gate` balance in `env` with `amount` (an [`adjust`]ment, reason "fund").
pub async fn fund(db: &impl domain::db::WriteDb, merchant: Uuid, env: Environment, gate: &str, amount: &str) {
    adjust(db, merchant, env, gate, amount, "fund").await;
}

/// `merchant`'s payout settings in `env` (the defaults when never saved), changed by `f` and
/// saved; returns what was saved.
pub async fn set_payout_settings(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    env: Environment,
    f: impl FnOnce(&mut entity::merchant_env_settings::Model),
) -> entity::merchant_env_settings::Model {
    let mut s = domain::payouts::service::settings(db, merchant, env).await.expect("payout settings");
    f(&mut s);
    domain::payouts::service::save_settings(db, s.clone()).await.expect("save payout settings");
    s
}

/// Payouts approved at once and executable without delay, with both of their fees charged to
/// the merchant.
pub async fn auto_approve_payouts_merchant_pays(db: &sea_orm::DatabaseConnection, merchant: Uuid, env: Environment) {
    set_payout_settings(db, merchant, env, |s| {
        s.payout_auto_approve = true;
        s.payout_delay_secs = 0;
        s.network_fee_allocation = entity::FeeAllocation::Merchant;
        s.payout_fee_allocation = entity::FeeAllocation::Merchant;
    })
    .await;
}

/// The credit row of `invoice` in `gate` (what it credited, what was refunded).
pub async fn invoice_credit(
    db: &sea_orm::DatabaseConnection,
    invoice: Uuid,
    gate: &str,
) -> entity::invoice_credit::Model {
    use sea_orm::EntityTrait;
    let row = entity::invoice_credit::Entity::find_by_id((invoice, gate.to_owned())).one(db).await.expect("credit");
    row.unwrap_or_else(|| panic!("no {gate} credit for invoice {invoice}"))
}

/// Payloads of every outbox event of `event_type`.
pub async fn event_payloads(db: &sea_orm::DatabaseConnection, event_type: &str) -> Vec<Value> {
    use entity::event;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let rows = event::Entity::find().filter(event::Column::EventType.eq(event_type)).all(db).await.expect("events");
    rows.into_iter().map(|e| e.payload).collect()
}

/// The ledger of the gate a payment of `amount` came in on, once it confirmed and a settlement
/// conversion took it: credited pending, moved to available, then debited by the conversion.
pub fn converted_source_entries(amount: &str) -> [(entity::EntryType, entity::Bucket, rust_decimal::Decimal); 4] {
    use entity::{Bucket, EntryType};
    [
        (EntryType::InvoiceCredit, Bucket::Pending, d(amount)),
        (EntryType::InvoiceCredit, Bucket::Pending, -d(amount)),
        (EntryType::InvoiceCredit, Bucket::Available, d(amount)),
        (EntryType::ConversionDebit, Bucket::Available, -d(amount)),
    ]
}

/// Asserts that each field of the object `expected` has that value in `actual` (which may hold
/// more fields).
#[track_caller]
pub fn assert_fields(actual: &Value, expected: Value) {
    for (field, want) in expected.as_object().expect("expected fields as an object") {
        assert_eq!(&actual[field], want, "{field} of {actual}");
    }
}

/// Records a confirmed payment of `amount` to the invoice and credits it through the ledger's
/// crediting service (what the confirmation tracker does), returning the payment id.
pub async fn credit_invoice(app: &TestApp, merchant: Uuid, invoice_id: Uuid, gate: &str, amount: &str) -> Uuid {
    credit_invoice_on(&app.state.db, merchant, invoice_id, gate, amount).await
}

/// [`credit_invoice`] on any connection (the end-to-end suites have no in-process app).
pub async fn credit_invoice_on(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    invoice_id: Uuid,
    gate: &str,
    amount: &str,
) -> Uuid {
    credit_invoice_in(db, Environment::Test, merchant, invoice_id, gate, amount).await
}

/// [`credit_invoice_on`] for an invoice of `environment`.
pub async fn credit_invoice_in(
    db: &sea_orm::DatabaseConnection,
    environment: Environment,
    merchant: Uuid,
    invoice_id: Uuid,
    gate: &str,
    amount: &str,
) -> Uuid {
    use sea_orm::{ActiveModelTrait, IntoActiveModel, TransactionTrait};
    let amount: rust_decimal::Decimal = amount.parse().expect("amount");
    let now = chrono::Utc::now();
    let tx_hash = format!("test-{}", Uuid::new_v4().simple());
    let detected = entity::payment::Model::detected(
        invoice_id,
        environment,
        gate.into(),
        tx_hash,
        0,
        entity::Amount::new(amount),
        now,
    );
    let payment = entity::payment::Model {
        confirmations: 1,
        required_confirmations: 1,
        status: entity::PaymentStatus::Confirmed,
        block_height: Some(1),
        confirmed_at: Some(now),
        ..detected
    };
    let txn = db.begin().await.expect("begin");
    let payment = payment.into_active_model().insert(&txn).await.expect("payment");
    let credit =
        domain::ledger::Credit { payment: &payment, merchant_id: merchant, gate, amount, release_pending: false };
    let credited = domain::ledger::credit_payment(&txn, &credit).await.expect("credit");
    assert!(credited, "a fresh payment is credited");
    // A second credit of the same payment is refused without writing anything.
    assert!(!domain::ledger::credit_payment(&txn, &credit).await.expect("re-credit"));
    txn.commit().await.expect("commit");
    payment.id
}

/// Asserts that every bucket of the merchant's balance in `gate` equals the sum of its ledger
/// entries, and returns the balance with those entries.
pub async fn assert_ledger_sums(
    db: &sea_orm::DatabaseConnection,
    merchant: Uuid,
    gate: &str,
) -> (entity::balance::Model, Vec<entity::ledger_entry::Model>) {
    use entity::{Bucket, balance, ledger_entry};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let b = balance::Entity::find()
        .filter(balance::Column::MerchantId.eq(merchant))
        .filter(balance::Column::GateId.eq(gate))
        .one(db)
        .await
        .expect("balance")
        .expect("a balance row");
    let entries = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(merchant))
        .filter(ledger_entry::Column::GateId.eq(gate))
        .all(db)
        .await
        .expect("entries");
    let sum = |bucket| entries.iter().filter(|e| e.bucket == bucket).map(|e| e.amount.0).sum::<rust_decimal::Decimal>();
    assert_eq!(sum(Bucket::Available), b.available.0, "available");
    assert_eq!(sum(Bucket::Pending), b.pending.0, "pending");
    assert_eq!(sum(Bucket::Reserved), b.reserved.0, "reserved");
    (b, entries)
}

/// Event types of one invoice in the outbox, oldest first.
pub async fn invoice_events(db: &sea_orm::DatabaseConnection, invoice: impl std::fmt::Display) -> Vec<String> {
    use entity::event;
    use sea_orm::{EntityTrait, QueryOrder};
    let invoice = invoice.to_string();
    let rows = event::Entity::find()
        .order_by_asc(event::Column::CreatedAt)
        .order_by_asc(event::Column::Id)
        .all(db)
        .await
        .expect("events");
    rows.into_iter()
        .filter(|e| e.payload["invoice_id"] == Value::String(invoice.clone()))
        .map(|e| e.event_type)
        .collect()
}

/// A merchant's balances held locked by a transaction of the test's own (PostgreSQL: the
/// balance rows; SQLite: the database write lock), so requests that reserve a balance queue up
/// behind it and are provably in flight together. Released on `release` (or drop).
pub struct BalanceWriteBlock {
    txn: sea_orm::DatabaseTransaction,
    _conn: sea_orm::DatabaseConnection,
}

impl BalanceWriteBlock {
    pub async fn release(self) {
        self.txn.rollback().await.expect("release the balance lock");
    }
}

impl TestApp {
    /// Locks `merchant`'s balances on a separate connection (see [`BalanceWriteBlock`]).
    pub async fn block_balance_writes(&self, merchant: Uuid) -> BalanceWriteBlock {
        use sea_orm::sea_query::Expr;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let conn = sea_orm::Database::connect(&self.db.url).await.expect("second connection");
        let txn = domain::db::begin_write(&conn).await.expect("begin");
        entity::balance::Entity::update_many()
            .col_expr(entity::balance::Column::UpdatedAt, Expr::col(entity::balance::Column::UpdatedAt))
            .filter(entity::balance::Column::MerchantId.eq(merchant))
            .exec(&txn)
            .await
            .expect("lock the balances");
        BalanceWriteBlock { txn, _conn: conn }
    }

    /// Waits (polling, 30 s deadline) until at least `n` of the app's database connections are
    /// stuck behind a lock: on PostgreSQL, sessions waiting on a lock; on SQLite, every pooled
    /// connection checked out (reads never wait in WAL mode, so a connection that stays out is
    /// one waiting for the write lock).
    pub async fn wait_blocked_writers(&self, n: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Probed on a connection of its own: the app's pool may be all taken by the waiters.
        let probe = sea_orm::Database::connect(&self.db.url).await.expect("probe connection");
        loop {
            let blocked = self.blocked_writers(&probe).await;
            if blocked >= n {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "only {blocked} of {n} writers got blocked");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[cfg(feature = "pg")]
    async fn blocked_writers(&self, probe: &sea_orm::DatabaseConnection) -> usize {
        use sea_orm::{ConnectionTrait, Statement};
        let sql = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
                   AND wait_event_type = 'Lock'";
        let row = probe
            .query_one_raw(Statement::from_string(sea_orm::DatabaseBackend::Postgres, sql))
            .await
            .expect("pg_stat_activity")
            .expect("a row");
        row.try_get::<i64>("", "n").expect("count") as usize
    }

    #[cfg(not(feature = "pg"))]
    async fn blocked_writers(&self, _probe: &sea_orm::DatabaseConnection) -> usize {
        let pool = self.state.db.get_sqlite_connection_pool();
        let max = self.state.config.db.max_connections.min(8) as usize;
        if pool.size() as usize == max { max - pool.num_idle() } else { 0 }
    }
}

/// Every unclaimed deposit the scanner recorded (money that reached an address of ours but
/// credits no invoice), as (gate, tx hash, amount, reason, address key), by gate and tx hash.
pub async fn unclaimed_deposits(
    db: &sea_orm::DatabaseConnection,
) -> Vec<(String, String, rust_decimal::Decimal, entity::UnclaimedReason, String)> {
    use entity::unclaimed_deposit as u;
    use sea_orm::{EntityTrait, QueryOrder};
    let rows = u::Entity::find()
        .order_by_asc(u::Column::GateId)
        .order_by_asc(u::Column::TxHash)
        .order_by_asc(u::Column::OutputIndex)
        .all(db)
        .await
        .expect("unclaimed deposits");
    rows.into_iter().map(|r| (r.gate_id, r.tx_hash, r.amount.0, r.reason, r.address_key)).collect()
}

/// Moves `gate`'s scan cursor back to `height`: the next scan reads those blocks again, as a
/// scanner replaying a range would.
pub async fn rescan_from(db: &sea_orm::DatabaseConnection, env: Environment, gate: &str, height: i64) {
    use entity::scan_cursor as c;
    use sea_orm::sea_query::Expr;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let moved = c::Entity::update_many()
        .col_expr(c::Column::NextHeight, Expr::value(height))
        .filter(c::Column::Environment.eq(env))
        .filter(c::Column::GateId.eq(gate))
        .exec(db)
        .await
        .expect("scan cursor");
    assert_eq!(moved.rows_affected, 1, "no scan cursor for {gate}");
}
