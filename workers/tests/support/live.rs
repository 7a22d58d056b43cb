//! A live-environment app for the chain adapter suites (`bitcoin_regtest`, `tron_live`,
//! `solana_live`): a test API with the node configured, a merchant with a live key, and the live
//! pipeline (scanner and tracker rules) stepped by the test against one set of chains, as one
//! worker process holds them (adapters keep what they learnt between scans: block hashes,
//! the mempool seen).

use std::str::FromStr;

use entity::{Environment, payment};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;
use workers::chain::Chains;
use workers::{scanner, tracker};

pub fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

pub fn id(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

/// The node a live suite runs against (a fake one, or Litecoin Core).
pub trait Node {
    /// Its RPC or API URL.
    fn url(&self) -> String;
    /// Adds `n` empty blocks (ledgers, slots) to its chain.
    fn advance(&self, n: usize) -> impl std::future::Future<Output = ()>;
}

/// A suite's node and its live app (which it dereferences to).
pub struct Live<N> {
    pub node: N,
    pub l: LiveApp,
}

impl<N> std::ops::Deref for Live<N> {
    type Target = LiveApp;
    fn deref(&self) -> &LiveApp {
        &self.l
    }
}

impl<N: Node> Live<N> {
    /// [`LiveApp::start`] on `node`, `configure` given its URL.
    pub async fn start(
        node: N,
        gates: &'static [&'static str],
        configure: impl FnOnce(&mut domain::config::Config, String),
    ) -> Self {
        let url = node.url();
        let l = LiveApp::start(gates, |c| configure(c, url)).await;
        Live { node, l }
    }

    /// Advances the chain by `n` empty blocks one by one, a pipeline step after each.
    pub async fn step_over(&self, n: usize) {
        for _ in 0..n {
            self.node.advance(1).await;
            self.step().await;
        }
    }

    /// `inv`'s payment reached the end of its tracking (`tracking::assert_tracking_ended`) and
    /// stays there over `blocks` more blocks, each scanned as the scanner stage does (without the
    /// steps' look at every payment): no scan hands it over, and the tracker asks the chain
    /// nothing about it.
    pub async fn assert_tracking_ended(&self, inv: &Value, blocks: usize) {
        let p = self.payment(inv).await;
        let (db, cfg) = (&self.app.state.db, &self.app.state.config.pipeline);
        super::tracking::assert_tracking_ended(db, &self.chains, cfg, p.id, None).await;
        for _ in 0..blocks {
            let from = self.tip(&p.gate_id).await + 1;
            self.node.advance(1).await;
            self.scan(&self.chains, 100).await;
            let to = self.tip(&p.gate_id).await;
            super::tracking::assert_tracking_ended(db, &self.chains, cfg, p.id, Some(from..=to)).await;
        }
    }

    /// [`Live::step_over`] `blocks`; then, of the payments in the chain, only `short`'s counted:
    /// it is underpaid with `paid`, `untouched` is still pending (`why`), and `gate` holds `paid`
    /// available.
    pub async fn assert_only_underpaid_after(
        &self,
        blocks: usize,
        (short, paid): (&Value, &str),
        (untouched, why): (&Value, &str),
        gate: &str,
    ) {
        self.step_over(blocks).await;
        self.l.assert_only_underpaid(short, paid, untouched, why, gate).await;
    }
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
        let (merchant, key) = app.live_key().await;
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

    /// One pipeline step: a scan, then one tracker look at every live payment and at the
    /// unclaimed deposits still followed.
    pub async fn step(&self) {
        self.scan(&self.chains, 100).await;
        let db = &self.app.state.db;
        let cfg = &self.app.state.config.pipeline;
        for p in
            payment::Entity::find().filter(payment::Column::Environment.eq(Environment::Live)).all(db).await.unwrap()
        {
            tracker::track_payment(db, &self.chains, cfg, p.id).await.unwrap();
        }
        tracker::follow_unclaimed(db, &self.chains, cfg).await.unwrap();
    }

    /// The tip of `gate`'s live chain.
    pub async fn tip(&self, gate: &str) -> u64 {
        self.chains.get(Environment::Live, gate).expect("a live chain").tip().await.unwrap()
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
        let mut statuses = Vec::new();
        for gate in self.gates {
            statuses.push(app.gate_status("live", gate).await);
        }
        statuses
    }

    /// Every gate of the suite is online in this app, and offline in `without` (this app's
    /// configuration without the node), where a live invoice of 1 `refused` (a currency), if
    /// given, is refused: 503 `gate_offline`.
    pub async fn assert_online_only_with_a_node(&self, without: TestApp, refused: Option<&str>) {
        assert_eq!(self.live_statuses(&self.app).await, vec!["online"; self.gates.len()]);
        assert_eq!(self.live_statuses(&without).await, vec!["offline"; self.gates.len()]);
        if let Some(currency) = refused {
            let (_, key) = without.live_key().await;
            let r = without.post("/v1/invoices", Some(&key), &json!({"currency": currency, "amount": "1"})).await;
            r.assert_error(503, "gate_offline", None);
        }
    }

    /// `inv` was credited exactly once, its payment is final, and every gate's ledger adds up.
    pub async fn assert_credited_once(&self, inv: &Value) {
        assert_eq!(self.credits(inv).await, 1);
        assert_eq!(self.payment(inv).await.status, entity::PaymentStatus::Confirmed);
        self.assert_ledger_sums().await;
    }

    /// Of the payments in the chain, only `short`'s counted: it is underpaid with `paid`,
    /// `untouched` is still pending (`why`), and `gate` holds `paid` available.
    async fn assert_only_underpaid(&self, short: &Value, paid: &str, untouched: &Value, why: &str, gate: &str) {
        let got = self.get(short).await;
        assert_eq!(got["status"], "underpaid", "{got}");
        assert_eq!(got["amount_paid"], paid);
        assert_eq!(self.status(untouched).await, "pending", "{why}");
        assert_eq!(self.live_payments().await.len(), 1);
        assert_eq!(self.balance(gate).await, (d(paid), Decimal::ZERO));
    }

    /// A scan by a newly started worker process (new chains, the cursor from the database,
    /// bounded batches of 10 blocks).
    pub async fn scan_as_a_new_process(&self) {
        self.scan(&self.new_chains(), 10).await;
    }

    /// `inv`'s payment of `amount` is recorded at block `height`; deep enough, it confirms on the
    /// next step and the invoice is paid (`why`).
    pub async fn assert_recorded_at_then_paid(&self, inv: &Value, amount: &str, height: u64, why: &str) {
        let p = self.payment(inv).await;
        assert_eq!((p.amount.0, p.block_height), (d(amount), Some(height as i64)));
        self.step().await;
        assert_eq!(self.status(inv).await, "paid", "{why}");
    }

    /// A deposit reversed before it confirmed: its payment reversed, the invoice back to
    /// pending, nothing in `gate`, and the invoice's events say so.
    pub async fn assert_reversed_unconfirmed(&self, inv: &Value, gate: &str) {
        let p = self.payment(inv).await;
        assert_eq!(p.status, entity::PaymentStatus::Reversed, "{p:?}");
        assert_eq!(self.status(inv).await, "pending");
        assert_eq!(self.balance(gate).await, (Decimal::ZERO, Decimal::ZERO));
        let events = testkit::invoice_events(&self.app.state.db, id(inv)).await;
        assert_eq!(events, ["invoice.confirming", "invoice.deposit_reversed"]);
    }
}
