//! A live-environment app for the chain adapter suites (`bitcoin_regtest`, `tron_live`,
//! `solana_live`): a test API with the node configured, a merchant with a live key, and the live
//! pipeline (scanner and tracker rules) stepped by the test against one set of chains, as one
//! worker process holds them (adapters keep what they learnt between scans: block hashes,
//! the mempool seen).

use std::str::FromStr;

use entity::{Environment, payment};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::Value;
use testkit::TestApp;
use uuid::Uuid;
use workers::chain::Chains;
use workers::pipeline::{scanner, tracker};

pub fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

pub fn id(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

pub struct LiveApp {
    pub app: TestApp,
    pub merchant: Uuid,
    pub key: String,
    /// The gates the suite watches.
    gates: &'static [&'static str],
    /// The worker's chains, kept from step to step.
    pub chains: Chains,
}

impl LiveApp {
    /// The app with `configure` applied (the node's URL, …), its cursors taken at the node's
    /// tip before any deposit (a live scan starts there).
    pub async fn start(gates: &'static [&'static str], configure: impl FnOnce(&mut domain::config::Config)) -> Self {
        let app = TestApp::spawn_with(configure).await;
        let merchant = app.merchant().await;
        let key = app.key(merchant, Environment::Live, &[]).await;
        let chains = Chains::default().with_live(&app.state.config);
        let l = LiveApp { app, merchant, key, gates, chains };
        l.scan(&l.chains, 100).await;
        l
    }

    /// The live chains as a newly started worker process builds them from the configuration.
    pub fn new_chains(&self) -> Chains {
        Chains::default().with_live(&self.app.state.config)
    }

    /// Scans every gate to the tip in batches of `batch` blocks, then its mempool.
    pub async fn scan(&self, chains: &Chains, batch: u64) {
        let db = &self.app.state.db;
        for gate in self.gates {
            let chain = chains.get(Environment::Live, gate).expect("a live chain for the gate");
            while scanner::scan_gate(db, chain.as_ref(), Environment::Live, batch).await.unwrap().is_some() {}
            scanner::scan_pending(db, chain.as_ref(), Environment::Live).await.unwrap();
        }
    }

    /// One pipeline step: a scan, then one tracker look at every live payment.
    pub async fn step(&self) {
        self.scan(&self.chains, 100).await;
        let db = &self.app.state.db;
        for p in
            payment::Entity::find().filter(payment::Column::Environment.eq(Environment::Live)).all(db).await.unwrap()
        {
            tracker::track_payment(db, &self.chains, &self.app.state.config.pipeline, p.id).await.unwrap();
        }
    }

    pub async fn invoice(&self, body: Value) -> Value {
        self.app.create_invoice(&self.key, body).await
    }

    pub async fn get(&self, inv: &Value) -> Value {
        self.app.get(&format!("/v1/invoices/{}", id(inv)), Some(&self.key)).await.data().clone()
    }

    pub async fn status(&self, inv: &Value) -> String {
        self.get(inv).await["status"].as_str().unwrap().to_owned()
    }

    pub async fn payment(&self, inv: &Value) -> payment::Model {
        payment::Entity::find()
            .filter(payment::Column::InvoiceId.eq(id(inv)))
            .one(&self.app.state.db)
            .await
            .unwrap()
            .expect("a payment")
    }

    pub async fn live_payments(&self) -> Vec<payment::Model> {
        let db = &self.app.state.db;
        payment::Entity::find().filter(payment::Column::Environment.eq(Environment::Live)).all(db).await.unwrap()
    }

    /// (available, pending) of a gate.
    pub async fn balance(&self, gate: &str) -> (Decimal, Decimal) {
        let rows = self.app.get("/v1/balances", Some(&self.key)).await.data().clone();
        rows.as_array().unwrap().iter().find(|r| r["gate_id"] == gate).map_or((Decimal::ZERO, Decimal::ZERO), |r| {
            (d(r["available"].as_str().unwrap()), d(r["pending"].as_str().unwrap()))
        })
    }

    pub async fn credits(&self, inv: &Value) -> usize {
        testkit::invoice_events(&self.app.state.db, id(inv)).await.iter().filter(|e| *e == "balance.credited").count()
    }

    pub async fn assert_ledger_sums(&self) {
        for gate in self.gates {
            testkit::assert_ledger_sums(&self.app.state.db, self.merchant, gate).await;
        }
    }

    /// Each of the suite's gates' status in `GET /v1/currencies?environment=live` of `app`.
    pub async fn live_statuses(&self, app: &TestApp) -> Vec<String> {
        let cur = app.get("/v1/currencies?environment=live", None).await;
        self.gates
            .iter()
            .map(|gate| {
                let g = cur.data().as_array().unwrap().iter().find(|c| c["id"] == *gate).unwrap().clone();
                g["status"].as_str().unwrap().to_owned()
            })
            .collect()
    }
}
