//! Live payouts on a suite's node (`xrp_payouts`, `tron_payouts` and their crash tests): a
//! merchant paying payouts' network fees and auto-approving them, funded in the live ledger,
//! and payout executors built as the `payout-executor` worker builds them (its signers from the
//! configuration).

use std::time::Duration;

use entity::{Environment, payout};
use rust_decimal::Decimal;
use sea_orm::EntityTrait;
use serde_json::Value;
use uuid::Uuid;
use workers::chain::Chains;
use workers::chain::signer::Signers;
use workers::executor::Executor;

use super::live::{Live, id};

/// The signers the executor builds from the configuration.
pub type MakeSigners = fn(&domain::config::Config) -> Signers;

pub struct Payouts<N> {
    pub live: Live<N>,
    signers: MakeSigners,
}

impl<N> Payouts<N> {
    /// `live`'s merchant auto-approving payouts and paying their network fees, with `funds`
    /// (gate, amount) in the live ledger.
    pub async fn start(live: Live<N>, funds: &[(&str, &str)], signers: MakeSigners) -> Self {
        let db = &live.app.state.db;
        testkit::auto_approve_payouts_merchant_pays(db, live.merchant, Environment::Live).await;
        for (gate, amount) in funds {
            testkit::fund(db, live.merchant, Environment::Live, gate, amount).await;
        }
        Payouts { live, signers }
    }

    /// A payout executor as the worker builds it from the configuration.
    pub fn executor(&self) -> Executor {
        let (db, cfg) = (&self.live.app.state.db, &self.live.app.state.config);
        Executor {
            db: db.clone(),
            chains: Chains::default().with_live(cfg),
            signers: (self.signers)(cfg),
            recheck: Duration::from_millis(10),
        }
    }

    /// A payout of `body` (`currency`, `amount`, `destination`, …), created through the API.
    pub async fn payout(&self, body: Value) -> Uuid {
        let r = self.live.app.post("/v1/payouts", Some(&self.live.key), &body).await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.body);
        id(r.data())
    }

    pub async fn row(&self, id: Uuid) -> payout::Model {
        payout::Entity::find_by_id(id).one(&self.live.app.state.db).await.unwrap().unwrap()
    }

    /// (available, reserved) of the merchant's live `gate`, the ledger's sums checked.
    pub async fn balance(&self, gate: &str) -> (Decimal, Decimal) {
        let (b, _) = testkit::assert_ledger_sums(&self.live.app.state.db, self.live.merchant, gate).await;
        (b.available.0, b.reserved.0)
    }
}

/// Runs one `execute` of `id` on `executor` in a task of its own, which dies at the armed fail
/// point `at`: the task must end in a panic, as a killed process ends. Fail points are
/// process-wide: only for test binaries of their own (`*_payout_crash`).
#[cfg(feature = "failpoints")]
pub async fn crash(executor: Executor, id: Uuid, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { executor.execute(id).await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the executor did not reach {at}");
}

/// A live app of `gates` configured by `configure` but without a hot wallet key refuses a
/// payout of `body` with 503 `gate_offline`, naming `[section] hot_wallet_key_file`.
pub async fn assert_refused_without_a_key(
    gates: &'static [&'static str],
    configure: impl FnOnce(&mut domain::config::Config),
    funds: (&str, &str),
    body: Value,
    section: &str,
) {
    let live = super::live::LiveApp::start(gates, configure).await;
    testkit::fund(&live.app.state.db, live.merchant, Environment::Live, funds.0, funds.1).await;
    let r = live.app.post("/v1/payouts", Some(&live.key), &body).await;
    r.assert_error(503, "gate_offline", None);
    let hint = format!("[{section}] hot_wallet_key_file");
    assert!(r.body.to_string().contains(&hint), "{}", r.body);
}
