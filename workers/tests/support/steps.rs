//! The `pipeline` suites' own steps over the shared step-by-step pipeline (`pipe`): invoices
//! paid and reversed, passes of scan and track, sweeps, and the checks a test ends with.

use std::time::Duration;

use entity::{Environment, event};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::d;
use uuid::Uuid;
use workers::scanner;
use workers::tracker::sweeper;

/// The shared step-by-step pipeline (`pipe`) with the pipeline suites' own steps.
pub struct Pipe(super::pipe::Pipe);

impl std::ops::Deref for Pipe {
    type Target = super::pipe::Pipe;
    fn deref(&self) -> &super::pipe::Pipe {
        &self.0
    }
}

impl std::ops::DerefMut for Pipe {
    fn deref_mut(&mut self) -> &mut super::pipe::Pipe {
        &mut self.0
    }
}

pub async fn pipe_with(f: impl FnOnce(&mut domain::config::Config)) -> Pipe {
    Pipe(super::pipe::Pipe::start(f).await)
}

pub async fn pipe() -> Pipe {
    pipe_with(|_| {}).await
}

impl Pipe {
    pub async fn invoice(&self, currency: &str, network: &str, amount: &str) -> Uuid {
        let body = json!({"currency": currency, "network": network, "amount": amount});
        self.app.create_invoice_id(&self.key, body).await
    }

    /// A new invoice of `amount` and a sandbox payment of all of it: the invoice and the deposit.
    pub async fn paid_invoice(&self, currency: &str, network: &str, amount: &str) -> (Uuid, Value) {
        let inv = self.invoice(currency, network, amount).await;
        let deposit = self.pay(inv, amount).await;
        (inv, deposit)
    }

    /// Reverses a sandbox deposit, then a pipeline step.
    pub async fn reverse_and_step(&self, deposit: &Value) {
        let r = self
            .app
            .post(
                &format!("/v1/test/deposits/{}/reverse", deposit["id"].as_str().unwrap()),
                Some(&self.key),
                &json!({}),
            )
            .await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        assert_eq!(r.data()["reversed"], true);
        self.step().await;
    }

    /// One pass of the pipeline: scan every test gate to its tip, then track every payment.
    pub async fn step(&self) -> Vec<Uuid> {
        self.scan_and_track().await
    }

    /// Mines `blocks` blocks on `gate`'s sandbox chain, then one scan of it (at most `batch`
    /// blocks) without tracking: the payments it recorded.
    pub async fn mine_and_scan(&self, gate: &str, blocks: u64, batch: u64) -> Vec<Uuid> {
        self.mine(gate, blocks).await;
        let chain = self.chains.get(Environment::Test, gate).unwrap();
        let db = &self.app.state.db;
        scanner::scan_gate(db, chain.as_ref(), Environment::Test, batch).await.unwrap().expect("a scan").recorded
    }

    /// One sweep, taking payments unchecked for `stale_after` as stale.
    pub async fn sweep(&self, stale_after: Duration) -> sweeper::SweepReport {
        sweeper::sweep(&self.app.state.db, stale_after).await.unwrap()
    }

    /// Mines `blocks` blocks on `gate`'s sandbox chain, then a pipeline step.
    pub async fn mine_and_step(&self, gate: &str, blocks: u64) {
        self.mine(gate, blocks).await;
        self.step().await;
    }

    /// `inv`'s payment on `gate` reached the end of its tracking
    /// (`tracking::assert_tracking_ended`) and stays there over `blocks` more blocks, each mined
    /// and scanned as the scanner stage does (without the steps' look at every payment): no scan
    /// hands it over, and the tracker asks the chain nothing about it.
    pub async fn assert_tracking_ended(&self, inv: Uuid, gate: &str, blocks: u64) {
        let id = self.payment_of(inv).await.id;
        let (db, cfg) = (&self.app.state.db, &self.app.state.config.pipeline);
        let chain = self.chains.get(Environment::Test, gate).unwrap();
        super::tracking::assert_tracking_ended(db, &self.chains, cfg, id, None).await;
        for _ in 0..blocks {
            let from = chain.tip().await.unwrap() + 1;
            self.mine(gate, 1).await;
            while scanner::scan_gate(db, chain.as_ref(), Environment::Test, 100).await.unwrap().is_some() {}
            let to = chain.tip().await.unwrap();
            super::tracking::assert_tracking_ended(db, &self.chains, cfg, id, Some(from..=to)).await;
        }
    }

    pub async fn status(&self, id: Uuid) -> String {
        self.get_invoice(id).await["status"].as_str().unwrap().to_owned()
    }

    /// The invoice's status, and `gate`'s (available, pending) balance.
    pub async fn assert_state(&self, inv: Uuid, status: &str, gate: &str, (available, pending): (&str, &str)) {
        assert_eq!(self.status(inv).await, status);
        assert_eq!(self.balance(gate).await, (d(available), d(pending)), "{gate} balance");
    }

    pub async fn events(&self, invoice: Uuid) -> Vec<String> {
        testkit::invoice_events(&self.app.state.db, invoice).await
    }

    /// The first event of type `event_type` in the outbox (any invoice).
    pub async fn first_event(&self, event_type: &str) -> event::Model {
        let found = event::Entity::find().filter(event::Column::EventType.eq(event_type)).one(&self.app.state.db);
        found.await.unwrap().unwrap_or_else(|| panic!("no {event_type} event"))
    }

    pub async fn assert_ledger(&self, gate: &str) {
        testkit::assert_ledger_sums(&self.app.state.db, self.merchant, gate).await;
    }

    /// Where a test ends: `gate`'s (available, pending) balance, the invoice's events in order,
    /// and a ledger that adds up to the balance.
    pub async fn assert_outcome(&self, inv: Uuid, gate: &str, (available, pending): (&str, &str), events: &[&str]) {
        assert_eq!(self.balance(gate).await, (d(available), d(pending)), "{gate} balance");
        assert_eq!(self.events(inv).await, events);
        self.assert_ledger(gate).await;
    }
}

pub async fn set_time(p: &Pipe, id: Uuid, col: entity::invoice::Column) {
    use sea_orm::sea_query::Expr;
    entity::invoice::Entity::update_many()
        .col_expr(col, Expr::value(chrono::Utc::now() - chrono::Duration::seconds(1)))
        .filter(entity::invoice::Column::Id.eq(id))
        .exec(&p.app.state.db)
        .await
        .unwrap();
}

pub async fn force_expired(p: &Pipe, id: Uuid) {
    set_time(p, id, entity::invoice::Column::ExpiresAt).await;
}
