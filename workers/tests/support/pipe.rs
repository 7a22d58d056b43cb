//! The sandbox pipeline driven step by step, as a merchant sees it: a test server whose sandbox
//! chains move only when a test mines, a test key, and the chains the worker stages read. The
//! suites of the scanner, tracker and converter build their own steps on it.

use std::str::FromStr;

use entity::Environment;
use rust_decimal::Decimal;
use sea_orm::EntityTrait;
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;
use workers::chain::Chains;
use workers::{scanner, tracker};

pub struct Pipe {
    pub app: TestApp,
    pub merchant: Uuid,
    pub key: String,
    pub chains: Chains,
}

impl Pipe {
    /// A test server (block interval 0: blocks come only from [`Pipe::mine`]), configured
    /// further by `f`, with a test merchant and key.
    pub async fn start(f: impl FnOnce(&mut domain::config::Config)) -> Pipe {
        let app = TestApp::spawn_with(|c| {
            c.sandbox.block_interval_ms = 0;
            f(c)
        })
        .await;
        let (merchant, key) = app.test_key().await;
        let chains = Chains::new(&app.state.db, &app.state.config.sandbox);
        Pipe { app, merchant, key, chains }
    }

    /// `POST /v1/test/deposits` of `amount` to `target` (`{"invoice_id": …}` or
    /// `{"address_id": …}`); the sandbox transfer.
    pub async fn deposit(&self, target: Value, amount: &str) -> Value {
        let mut body = target;
        body["amount"] = json!(amount);
        let r = self.app.post("/v1/test/deposits", Some(&self.key), &body).await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.body);
        r.data().clone()
    }

    /// A sandbox payment of `amount` to `invoice`.
    pub async fn pay(&self, invoice: Uuid, amount: &str) -> Value {
        self.deposit(json!({"invoice_id": invoice}), amount).await
    }

    /// Mines `count` blocks on `gate`'s sandbox chain.
    pub async fn mine(&self, gate: &str, count: u64) {
        let r = self.app.post("/v1/test/blocks", Some(&self.key), &json!({"currency": gate, "count": count})).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    }

    /// Funds the merchant's tron USDT with the 2 USDT of network fee a refund costs it by default
    /// (spec 2.6): funds beyond an invoice's credit.
    pub async fn fund_refund_fees(&self) {
        testkit::adjust(&self.app.state.db, self.merchant, Environment::Test, "tron_usdt", "2", "fees").await;
    }

    /// `POST /v1/refunds` of `body` with an `Idempotency-Key`.
    pub async fn refund(&self, idempotency_key: &str, body: &Value) -> testkit::Resp {
        self.app.post_idempotent("/v1/refunds", &self.key, idempotency_key, body).await
    }

    /// `GET /v1/invoices/{id}`'s data.
    pub async fn get_invoice(&self, id: Uuid) -> Value {
        self.app.get(&format!("/v1/invoices/{id}"), Some(&self.key)).await.data().clone()
    }

    /// (available, pending) of a gate; zero when it has no balance row.
    pub async fn balance(&self, gate: &str) -> (Decimal, Decimal) {
        let rows = self.app.get("/v1/balances", Some(&self.key)).await.data().clone();
        let d = |v: &Value| Decimal::from_str(v.as_str().unwrap()).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["gate_id"] == gate)
            .map_or((Decimal::ZERO, Decimal::ZERO), |r| (d(&r["available"]), d(&r["pending"])))
    }

    /// One pass of the deposit pipeline: scan every test gate to its tip, then track every
    /// payment and follow the unclaimed deposits. Returns the payments the scans recorded.
    pub async fn scan_and_track(&self) -> Vec<Uuid> {
        let db = &self.app.state.db;
        let mut recorded = Vec::new();
        for (env, chain) in self.chains.all() {
            if env != Environment::Test {
                continue;
            }
            while let Some(r) = scanner::scan_gate(db, chain.as_ref(), env, 100).await.unwrap() {
                recorded.extend(r.recorded);
            }
        }
        let cfg = &self.app.state.config.pipeline;
        for p in entity::payment::Entity::find().all(db).await.unwrap() {
            tracker::track_payment(db, &self.chains, cfg, p.id).await.unwrap();
        }
        tracker::follow_unclaimed(db, &self.chains, cfg).await.unwrap();
        recorded
    }
}
