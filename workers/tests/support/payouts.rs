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

/// Held for the whole of a crash test: fail points are process-wide, so the tests of the `crash`
/// binary take turns, and an armed point is met only by the executor of the test that armed it.
#[cfg(feature = "failpoints")]
pub async fn fail_points_alone() -> tokio::sync::MutexGuard<'static, ()> {
    static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    ALONE.lock().await
}

/// Runs one `execute` of `id` on `executor` in a task of its own, which dies at the armed fail
/// point `at`: the task must end in a panic, as a killed process ends. Fail points are
/// process-wide: only for the `crash` test binary, under [`fail_points_alone`].
#[cfg(feature = "failpoints")]
pub async fn crash(executor: Executor, id: Uuid, at: &str) {
    fail::cfg(at, "panic").unwrap();
    let died = tokio::spawn(async move { executor.execute(id).await }).await;
    fail::remove(at);
    assert!(died.is_err_and(|e| e.is_panic()), "the executor did not reach {at}");
}

/// The executor killed after storing payout `id`'s signed transaction and again after sending
/// it: nothing is sent before it is stored, the stored transaction is the only one ever sent
/// (`sent` counts what the node was given), and a new executor completes the payout with it
/// once `confirm` adds the blocks (ledgers) it needs. Returns the completed payout.
#[cfg(feature = "failpoints")]
pub async fn assert_killed_around_the_broadcast<N>(
    p: &Payouts<N>,
    id: Uuid,
    sent: impl Fn() -> usize,
    confirm: impl AsyncFn(),
) -> payout::Model {
    use entity::PayoutStatus;
    crash(p.executor(), id, "payout-after-persist").await;
    let stored = p.row(id).await;
    assert_eq!(stored.status, PayoutStatus::Queued);
    let hash = stored.tx_hash.clone().expect("the signed transaction is stored before anything is sent");
    assert_eq!(sent(), 0, "nothing was sent");
    crash(p.executor(), id, "payout-after-broadcast").await;
    let row = p.row(id).await;
    assert_eq!((row.status, row.tx_hash.as_deref()), (PayoutStatus::Queued, Some(hash.as_str())));
    assert_eq!(sent(), 1);
    let e = p.executor();
    e.execute(id).await.unwrap();
    confirm().await;
    e.execute(id).await.unwrap();
    let done = p.row(id).await;
    assert_eq!((done.status, done.signed_tx.as_deref()), (PayoutStatus::Completed, stored.signed_tx.as_deref()));
    assert_eq!(sent(), 1, "sent once, never signed again");
    done
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

/// What [`deployed_payout`] leaves for the test to check.
pub struct Deployed {
    /// The payout, completed.
    pub payout: payout::Model,
    /// (available, reserved) of the funded gate, the ledger's sums checked.
    pub balance: (Decimal, Decimal),
}

/// As deployed: the real `api` binary and a `payout-executor` process configured only through
/// `vars` (`PAYGATE_*`: the node, the deposit key, the hot wallet key). A merchant funded with
/// `funds` (gate, amount) and auto-approving payouts creates the payout `body` over HTTP; the
/// executor process signs and sends it while `advance` adds blocks (ledgers) whenever the
/// payout has a transaction, until it completes (120 s at most).
pub async fn deployed_payout(
    vars: &[(&str, &str)],
    funds: (&str, &str),
    body: Value,
    advance: impl AsyncFn(),
) -> Deployed {
    use std::time::Instant;
    use testkit::fleet::{Deployment, wait_ready};
    let mut all = vec![
        ("PAYGATE_PAYOUTS__POLL_INTERVAL_MS", "100"),
        ("PAYGATE_PAYOUTS__RECHECK_MS", "100"),
        ("PAYGATE_PAYOUTS__STALE_AFTER_SECS", "1"),
    ];
    all.extend_from_slice(vars);
    let Deployment { db: _db, conn, fleet, api, merchant, key, http } =
        Deployment::start("Payouts", Environment::Live, &all).await;
    testkit::auto_approve_payouts_merchant_pays(&conn, merchant, Environment::Live).await;
    testkit::fund(&conn, merchant, Environment::Live, funds.0, funds.1).await;
    let r = http.post(format!("{}/v1/payouts", api.url)).header("X-API-Key", &key).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let executor = fleet.worker(env!("CARGO_BIN_EXE_payout-executor"));
    wait_ready(&http, &executor).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let payout = loop {
        let rows = payout::Entity::find().all(&conn).await.unwrap();
        if rows[0].status == entity::PayoutStatus::Completed {
            break rows[0].clone();
        }
        assert!(Instant::now() < deadline, "payout stuck: {:?}", rows[0].status);
        if rows[0].tx_hash.is_some() {
            advance().await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (b, _) = testkit::assert_ledger_sums(&conn, merchant, funds.0).await;
    Deployed { payout, balance: (b.available.0, b.reserved.0) }
}
