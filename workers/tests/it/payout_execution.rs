//! The payout executor's rules in-process, on sandbox chains that move only when mined:
//! a payout completes with the real network fee (ledger exact to the last decimal), a payout to
//! the documented failure address fails and releases its reservation, a refund completes with
//! the refund fee and the real network fee, crashes between storing, broadcasting and
//! recording never make a second transaction, and concurrent executors apply every step once.

use std::sync::Arc;
use std::time::Duration;

use domain::chain::sandbox::{SandboxChain, failure_destination};
use domain::config::GateFees;
use entity::{EntryType, Environment, FeeAllocation, PayoutStatus, payout, sandbox_broadcast};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::{TRON_DEST, d};
use testkit::{TestApp, assert_ledger_sums, credit_invoice};
use uuid::Uuid;
use workers::chain::Chains;
use workers::chain::signer::{PayoutTx, Signer, Signers};
use workers::executor::{Executor, Next};

struct Exec {
    app: TestApp,
    merchant: Uuid,
    key: String,
    executor: Arc<Executor>,
}

/// tron_usdt fees: payout 1, network 2 (the sandbox charges 90 %: 1.8), refund 0.5. Blocks only
/// when mined. Auto-approval without delay; the network fee allocation as given.
async fn setup(fund: &str, network_alloc: FeeAllocation) -> Exec {
    let app = TestApp::spawn_with(|c| {
        c.fees.insert("tron_usdt".into(), GateFees { payout_fee: d("1"), network_fee: d("2"), refund_fee: d("0.5") });
        c.sandbox.block_interval_ms = 0;
    })
    .await;
    let (merchant, key) = app.test_key().await;
    testkit::set_payout_settings(&app.state.db, merchant, Environment::Test, |s| {
        s.payout_auto_approve = true;
        s.payout_delay_secs = 0;
        s.network_fee_allocation = network_alloc;
        s.payout_fee_allocation = FeeAllocation::Merchant;
        s.refund_fee_allocation = FeeAllocation::Merchant;
    })
    .await;
    if fund != "0" {
        testkit::fund(&app.state.db, merchant, Environment::Test, "tron_usdt", fund).await;
    }
    let executor = Arc::new(executor(&app, Signers::sandbox()));
    Exec { app, merchant, key, executor }
}

/// An executor on `app`'s sandbox chains with `signers`, rechecking every 10 ms.
fn executor(app: &TestApp, signers: Signers) -> Executor {
    let db = app.state.db.clone();
    Executor { chains: Chains::new(&db, &app.state.config.sandbox), signers, recheck: Duration::from_millis(10), db }
}

/// `signer` alone, for the test environment's tron USDT.
fn only(signer: Arc<dyn Signer>) -> Signers {
    let mut signers = Signers::default();
    signers.insert(Environment::Test, domain::gates::find("tron_usdt").unwrap(), signer);
    signers
}

impl Exec {
    /// Runs `ids` on the shared executor all at once, each on its own task.
    async fn execute_all(&self, ids: &[Uuid]) {
        let mut tasks = Vec::new();
        for &id in ids {
            let e = self.executor.clone();
            tasks.push(tokio::spawn(async move { e.execute(id).await.unwrap() }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }

    async fn payout(&self, amount: &str, destination: &str) -> Uuid {
        let body = json!({"currency": "USDT", "network": "tron", "amount": amount, "destination": destination});
        let r = self.app.post("/v1/payouts", Some(&self.key), &body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.data()["status"], "approved");
        Uuid::parse_str(r.data()["id"].as_str().unwrap()).unwrap()
    }

    async fn row(&self, id: Uuid) -> payout::Model {
        payout::Entity::find_by_id(id).one(&self.app.state.db).await.unwrap().unwrap()
    }

    fn chain(&self) -> SandboxChain {
        SandboxChain::new(self.app.state.db.clone(), domain::gates::find("tron_usdt").unwrap(), 0)
    }

    async fn mine(&self, n: u64) {
        self.chain().mine(n).await.unwrap();
    }

    async fn broadcasts(&self, id: Uuid) -> Vec<sandbox_broadcast::Model> {
        sandbox_broadcast::Entity::find()
            .filter(sandbox_broadcast::Column::Reference.eq(id.to_string()))
            .all(&self.app.state.db)
            .await
            .unwrap()
    }

    async fn balance(&self) -> (Decimal, Decimal) {
        let (b, _) = assert_ledger_sums(&self.app.state.db, self.merchant, "tron_usdt").await;
        (b.available.0, b.reserved.0)
    }

    /// Signed amounts of this payout's ledger entries, by type and bucket.
    async fn entries(&self, id: Uuid) -> Vec<(EntryType, entity::Bucket, Decimal)> {
        let (_, all) = assert_ledger_sums(&self.app.state.db, self.merchant, "tron_usdt").await;
        let mut v: Vec<_> = all
            .into_iter()
            .filter(|e| e.reference_id == Some(id))
            .map(|e| (e.entry_type, e.bucket, e.amount.0))
            .collect();
        v.sort_by_key(|(t, b, a)| (t.as_str(), format!("{b:?}"), *a));
        v
    }

    async fn events(&self, kind: &str) -> Vec<Value> {
        testkit::event_payloads(&self.app.state.db, kind).await
    }
}

#[tokio::test]
async fn a_payout_completes_with_the_real_network_fee() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let id = x.payout("10", TRON_DEST).await;
    assert_eq!(x.balance().await, (d("87"), d("13")), "10 + payout fee 1 + network fee estimate 2 reserved");

    // approved → queued → signed, stored, broadcast → processing (in the next block: 0 confirmations).
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::After(Duration::from_millis(10)));
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Processing);
    assert!(p.queued_at.is_some() && p.broadcast_at.is_some());
    let tx_hash = p.tx_hash.clone().unwrap();
    assert!(p.signed_tx.as_deref().unwrap().contains(&id.to_string()));
    let sent = x.broadcasts(id).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].tx_hash.as_str(), sent[0].amount.0, sent[0].destination.as_str()),
        (tx_hash.as_str(), d("10"), TRON_DEST)
    );
    // Not deep enough yet: it waits.
    x.mine(18).await;
    assert!(matches!(x.executor.execute(id).await.unwrap(), Next::After(_)));
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    x.mine(1).await;
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done);

    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Completed);
    assert!(p.completed_at.is_some());
    assert_eq!(p.network_fee.0, d("1.8"), "the fee the chain charged, not the estimate");
    assert_eq!(p.configured_network_fee_amount.0, d("2"));
    assert_eq!(p.merchant_debit_amount.0, d("12.8"));
    assert_eq!(x.balance().await, (d("87.2"), d("0")), "100 - 10 - 1 - 1.8");
    use entity::Bucket::{Available, Reserved};
    let mut expect = vec![
        (EntryType::NetworkFee, Available, d("0.2")),
        (EntryType::NetworkFee, Reserved, d("-2")),
        (EntryType::PayoutDebit, Reserved, d("-10")),
        (EntryType::PayoutFee, Reserved, d("-1")),
        (EntryType::PayoutReserve, Available, d("-13")),
        (EntryType::PayoutReserve, Reserved, d("13")),
    ];
    expect.sort_by_key(|(t, b, a)| (t.as_str(), format!("{b:?}"), *a));
    assert_eq!(x.entries(id).await, expect);
    let completed = x.events("payout.completed").await;
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["payout_id"], json!(id));
    assert_eq!(completed[0]["network_fee"], "1.8");
    assert_eq!(completed[0]["tx_hash"], tx_hash.as_str());
    assert_eq!(completed[0]["status"], "completed");
    // The API shows it.
    let got = x.app.get(&format!("/v1/payouts/{id}"), Some(&x.key)).await;
    assert_eq!(got.data()["status"], "completed");
    assert_eq!(got.data()["network_fee"], "1.8");
    assert_eq!(got.data()["tx_hash"], tx_hash.as_str());

    // Replays change nothing.
    for _ in 0..3 {
        assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done);
    }
    assert_eq!(x.broadcasts(id).await.len(), 1);
    assert_eq!(x.entries(id).await.len(), 6);
    assert_eq!(x.events("payout.completed").await.len(), 1);
}

#[tokio::test]
async fn a_customer_paid_network_fee_leaves_the_merchant_debit_as_reserved() {
    let x = setup("100", FeeAllocation::Customer).await;
    let id = x.payout("10", TRON_DEST).await;
    assert_eq!(x.balance().await, (d("89"), d("11")), "10 + payout fee 1; the network fee comes out of the 10");
    x.executor.execute(id).await.unwrap();
    assert_eq!(x.broadcasts(id).await[0].amount.0, d("8"), "the recipient gets 10 - 2");
    x.mine(19).await;
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done);
    let p = x.row(id).await;
    assert_eq!((p.status, p.network_fee.0, p.merchant_debit_amount.0), (PayoutStatus::Completed, d("1.8"), d("11")));
    assert_eq!(x.balance().await, (d("89"), d("0")));
}

#[tokio::test]
async fn a_payout_to_the_failure_address_fails_and_releases_its_reservation() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let fail_to = failure_destination(domain::gates::find("tron_usdt").unwrap().family);
    let id = x.payout("10", &fail_to).await;
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done);
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    assert!(p.failure_reason.as_deref().unwrap().contains("forced failure"), "{:?}", p.failure_reason);
    assert_eq!(x.balance().await, (d("100"), d("0")), "released");
    assert!(x.broadcasts(id).await.is_empty());
    let failed = x.events("payout.failed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["status"], "failed");
    assert!(failed[0]["failure_reason"].as_str().unwrap().contains("forced failure"));
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done);
    assert_eq!(x.events("payout.failed").await.len(), 1);
}

#[tokio::test]
async fn a_refund_completes_with_its_fee_and_the_real_network_fee() {
    let x = setup("0", FeeAllocation::Merchant).await;
    let invoice = x.app.create_invoice_id(&x.key, json!({"currency": "USDT", "network": "tron", "amount": "50"})).await;
    credit_invoice(&x.app, x.merchant, invoice, "tron_usdt", "50").await;
    let body =
        json!({"invoice_id": invoice, "currency": "USDT", "network": "tron", "amount": "20", "destination": TRON_DEST});
    let r = x.app.post_idempotent("/v1/refunds", &x.key, "r1", &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let refund_id = r.data()["id"].as_str().unwrap().to_owned();
    let payout_id = Uuid::parse_str(r.data()["payout_id"].as_str().unwrap()).unwrap();
    assert_eq!(x.balance().await, (d("27.5"), d("22.5")), "20 + refund fee 0.5 + network fee 2");

    x.executor.execute(payout_id).await.unwrap();
    let refund = x.app.get(&format!("/v1/refunds/{refund_id}"), Some(&x.key)).await;
    assert_eq!(refund.data()["status"], "processing");
    x.mine(19).await;
    assert_eq!(x.executor.execute(payout_id).await.unwrap(), Next::Done);
    let refund = x.app.get(&format!("/v1/refunds/{refund_id}"), Some(&x.key)).await;
    assert_eq!(refund.data()["status"], "completed", "{}", refund.body);
    assert_eq!(refund.data()["network_fee"], "1.8");
    assert!(refund.data()["tx_hash"].is_string());
    assert_eq!(x.balance().await, (d("27.7"), d("0")), "50 - 20 - 0.5 - 1.8");
    let types: Vec<EntryType> = x.entries(payout_id).await.into_iter().map(|(t, ..)| t).collect();
    assert!(types.contains(&EntryType::RefundFee) && !types.contains(&EntryType::PayoutFee), "{types:?}");
}

#[tokio::test]
async fn crashes_at_any_step_never_make_a_second_transaction() {
    let x = setup("1000", FeeAllocation::Merchant).await;
    let gate = domain::gates::find("tron_usdt").unwrap();
    let chain = x.chain();
    let sign = |p: &payout::Model| {
        let p = p.clone();
        async move {
            workers::chain::signer::SandboxSigner
                .sign(&PayoutTx {
                    gate,
                    payout_id: p.id,
                    destination: &p.destination,
                    destination_tag: None,
                    amount: p.recipient_amount.0,
                    max_fee: p.configured_network_fee_amount.0,
                    nonce: None,
                    fees: None,
                    funding: None,
                })
                .await
                .unwrap()
        }
    };
    let put = |id: Uuid, tx: &workers::chain::SignedTx| {
        use sea_orm::sea_query::Expr;
        payout::Entity::update_many()
            .col_expr(payout::Column::Status, Expr::value("queued"))
            .col_expr(payout::Column::TxHash, Expr::value(tx.tx_hash.clone()))
            .col_expr(payout::Column::SignedTx, Expr::value(tx.raw.clone()))
            .filter(payout::Column::Id.eq(id))
            .exec(&x.app.state.db)
    };
    // 1. Died after storing the signed transaction, before broadcasting.
    let a = x.payout("10", TRON_DEST).await;
    let tx_a = sign(&x.row(a).await).await;
    put(a, &tx_a).await.unwrap();
    // 2. Died after broadcasting, before recording it.
    let b = x.payout("11", TRON_DEST).await;
    let tx_b = sign(&x.row(b).await).await;
    put(b, &tx_b).await.unwrap();
    use workers::chain::Chain;
    assert_eq!(chain.broadcast(&tx_b).await.unwrap(), workers::chain::Broadcast::Accepted);
    assert_eq!(
        chain.broadcast(&tx_b).await.unwrap(),
        workers::chain::Broadcast::AlreadyKnown,
        "the same bytes are one tx"
    );
    // 3. Many executors at once on a fresh one.
    let c = x.payout("12", TRON_DEST).await;
    x.execute_all(&[a, b, c, c, c, c, c, c, a, b]).await;
    for (id, tx) in [(a, Some(&tx_a)), (b, Some(&tx_b)), (c, None)] {
        let p = x.row(id).await;
        assert_eq!(p.status, PayoutStatus::Processing, "{id}");
        if let Some(tx) = tx {
            assert_eq!(p.tx_hash.as_deref(), Some(tx.tx_hash.as_str()), "the stored transaction is the one sent");
        }
        assert_eq!(x.broadcasts(id).await.len(), 1, "exactly one transaction for {id}");
    }
    x.mine(19).await;
    x.execute_all(&[a, b, c, a, b, c, a, b, c]).await;
    for id in [a, b, c] {
        assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
        assert_eq!(x.broadcasts(id).await.len(), 1);
        assert_eq!(x.entries(id).await.len(), 6, "settled once");
    }
    assert_eq!(x.events("payout.completed").await.len(), 3);
    let total = sandbox_broadcast::Entity::find().count(&x.app.state.db).await.unwrap();
    assert_eq!(total, 3);
    // 1000 - (10 + 11 + 12) - 3 × payout fee 1 - 3 × network fee 1.8
    assert_eq!(x.balance().await, (d("958.6"), d("0")));
}

#[tokio::test]
async fn a_payout_waits_for_approval_and_its_executable_time() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let db = &x.app.state.db;
    testkit::set_payout_settings(db, x.merchant, Environment::Test, |s| s.payout_auto_approve = false).await;
    let body = json!({"currency": "USDT", "network": "tron", "amount": "5", "destination": TRON_DEST});
    let r = x.app.post("/v1/payouts", Some(&x.key), &body).await;
    let id = Uuid::parse_str(r.data()["id"].as_str().unwrap()).unwrap();
    assert_eq!(x.executor.execute(id).await.unwrap(), Next::Done, "pending approval: not the executor's");
    assert!(workers::executor::due(&x.app.state.db, Duration::from_secs(30), 10).await.unwrap().is_empty());
    testkit::set_payout_settings(db, x.merchant, Environment::Test, |s| s.payout_delay_secs = 3600).await;
    domain::payouts::operator::approve(&x.app.state.db, id.into()).await.unwrap();
    assert!(workers::executor::due(&x.app.state.db, Duration::from_secs(30), 10).await.unwrap().is_empty());
    assert!(matches!(x.executor.execute(id).await.unwrap(), Next::After(d) if d > Duration::from_secs(3500)));
    assert_eq!(x.row(id).await.status, PayoutStatus::Approved);
    assert!(x.broadcasts(id).await.is_empty());
}

#[tokio::test]
async fn a_payout_on_a_gate_without_a_signer_stays_approved_instead_of_queued() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let id = x.payout("10", TRON_DEST).await;
    let unsigned = executor(&x.app, Signers::default());
    for _ in 0..3 {
        assert!(matches!(unsigned.execute(id).await.unwrap(), Next::After(_)));
    }
    let p = x.row(id).await;
    assert_eq!(p.status, PayoutStatus::Approved, "not queued without a signer");
    assert!(p.queued_at.is_none() && p.signed_tx.is_none());
    assert_eq!(x.balance().await, (d("87"), d("13")), "still reserved, still cancellable");
    // Once a signer exists it goes on.
    x.executor.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
}

/// A signer on an account-based chain whose network reads (`nonce_account`, `fees`) each do
/// what a slow RPC call next to another writer would: they need the database for writing, and
/// give up after 3 s. Run inside the executor's write transaction they would wait for it (on
/// SQLite every writer waits; on PostgreSQL the nonce counter's row is locked).
struct ProbingSigner {
    db: sea_orm::DatabaseConnection,
    probes: std::sync::Mutex<Vec<Result<(), String>>>,
}

impl ProbingSigner {
    const SCOPE: &'static str = "probe:0xwallet";

    async fn probe(&self) {
        use sea_orm::ConnectionTrait;
        let db = self.db.clone();
        let write = async move {
            let sql = format!("UPDATE nonce_accounts SET updated_at = updated_at WHERE scope = '{}'", Self::SCOPE);
            db.execute_unprepared(&sql).await.map(|_| ()).map_err(|e| e.to_string())
        };
        let r = match tokio::time::timeout(Duration::from_secs(3), write).await {
            Ok(r) => r,
            Err(_) => Err("blocked by an open write transaction".into()),
        };
        self.probes.lock().unwrap().push(r);
    }
}

#[async_trait::async_trait]
impl Signer for ProbingSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<workers::chain::SignedTx, workers::chain::ChainError> {
        assert!(tx.nonce.is_some() && tx.fees.is_some(), "nonce and fees are known before signing");
        workers::chain::signer::SandboxSigner.sign(tx).await
    }

    async fn fees(&self, _: &PayoutTx<'_>) -> Result<Option<workers::chain::signer::Fees>, workers::chain::ChainError> {
        self.probe().await;
        Ok(Some(gas(2, 1)))
    }

    async fn nonce_account(&self) -> Result<Option<workers::chain::signer::NonceAccount>, workers::chain::ChainError> {
        self.probe().await;
        Ok(Some(workers::chain::signer::NonceAccount { scope: Self::SCOPE.into(), chain_next: 0 }))
    }
}

#[tokio::test]
async fn no_network_read_runs_inside_the_transaction_that_stores_the_signed_payout() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let db = x.app.state.db.clone();
    let signer = Arc::new(ProbingSigner { db: db.clone(), probes: Default::default() });
    let executor = executor(&x.app, only(signer.clone()));
    // Two payouts: the second finds the nonce counter's row (created by the first) to lock.
    for amount in ["10", "11"] {
        let id = x.payout(amount, TRON_DEST).await;
        executor.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing);
    }
    let probes = signer.probes.lock().unwrap().clone();
    assert_eq!(probes.len(), 4, "nonce and fees read once per payout");
    assert!(probes.iter().all(Result::is_ok), "a network read waited for the executor's own transaction: {probes:?}");
    let counter =
        entity::nonce_account::Entity::find_by_id(ProbingSigner::SCOPE).one(&db).await.unwrap().unwrap().next_nonce;
    assert_eq!(counter, 2, "nonces 0 and 1 taken");
}

#[tokio::test]
async fn an_operator_fails_an_unsigned_payout_releasing_its_funds_but_never_a_signed_one() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let db = x.app.state.db.clone();
    // Queued without a signer: never signed.
    let queued = x.payout("10", TRON_DEST).await;
    {
        use sea_orm::sea_query::Expr;
        payout::Entity::update_many()
            .col_expr(payout::Column::Status, Expr::value("queued"))
            .filter(payout::Column::Id.eq(queued))
            .exec(&db)
            .await
            .unwrap();
    }
    let approved = x.payout("5", TRON_DEST).await;
    let signed = x.payout("20", TRON_DEST).await;
    x.executor.execute(signed).await.unwrap();
    assert_eq!(x.balance().await, (d("56"), d("44")), "13 + 8 + 23 reserved");

    let p = domain::payouts::operator::fail(&db, queued.into(), "hot wallet key lost", None).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    assert_eq!(p.failure_reason.as_deref(), Some("failed by operator: hot wallet key lost"));
    let p = domain::payouts::operator::fail(&db, approved.into(), "merchant asked", None).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    assert_eq!(x.balance().await, (d("77"), d("23")), "both released exactly; the signed one still held");
    let failed = x.events("payout.failed").await;
    assert_eq!(failed.len(), 2);
    assert!(failed.iter().any(|e| e["failure_reason"] == "failed by operator: hot wallet key lost"), "{failed:?}");

    let err = domain::payouts::operator::fail(&db, signed.into(), "no", None).await.unwrap_err().to_string();
    assert!(err.contains("signed transaction") && err.contains("replace"), "{err}");
    assert_eq!(x.row(signed).await.status, PayoutStatus::Processing);
    // A sandbox transaction has no account nonce: nothing could displace it, so no replacement.
    let err = domain::payouts::operator::request_replace(&db, signed.into()).await.unwrap_err().to_string();
    assert!(err.contains("cannot be replaced"), "{err}");
    assert!(domain::payouts::operator::fail(&db, queued.into(), "again", None).await.is_err(), "already failed");
    assert_eq!(x.balance().await, (d("77"), d("23")));
    assert_eq!(x.events("payout.failed").await.len(), 2);

    // A node's verdict about another transaction than the one the payout holds changes nothing.
    use domain::payouts::operator::DeadTx;
    let held = x.row(signed).await.tx_hash.unwrap();
    let other = DeadTx { tx_hash: "0xother".into(), why: "expired".into() };
    let err = domain::payouts::operator::fail(&db, signed.into(), "no", Some(&other)).await.unwrap_err().to_string();
    assert!(err.contains("may still be mined"), "{err}");
    assert_eq!(x.row(signed).await.status, PayoutStatus::Processing);
    // Provably dead (what the node said of exactly its transaction): failed, funds released.
    let dead = DeadTx { tx_hash: held.clone(), why: "expired unseen past its window".into() };
    let p = domain::payouts::operator::fail(&db, signed.into(), "stuck", Some(&dead)).await.unwrap();
    assert_eq!(p.status, PayoutStatus::Failed);
    assert_eq!(
        p.failure_reason.as_deref(),
        Some(format!("failed by operator: stuck (transaction {held}: expired unseen past its window)").as_str())
    );
    assert_eq!(x.balance().await, (d("100"), d("0")), "every reservation released exactly");
    assert_eq!(x.events("payout.failed").await.len(), 3);
}

/// EIP-1559 fees of `max_fee_per_gas` and `priority_fee_per_gas`.
const fn gas(max_fee_per_gas: u128, priority_fee_per_gas: u128) -> workers::chain::signer::Fees {
    workers::chain::signer::Fees::Gas(workers::chain::signer::GasFees { max_fee_per_gas, priority_fee_per_gas })
}

/// The sandbox signer as if on an account-based chain: nonces from the counter, fees, and
/// replacements (a zero-amount sandbox transaction standing for the hot wallet's self-transfer).
#[derive(Default)]
struct NoncedSigner {
    nonces: std::sync::Mutex<std::collections::HashMap<String, (u64, workers::chain::signer::Fees)>>,
}

impl NoncedSigner {
    const FEES: workers::chain::signer::Fees = gas(10, 2);

    fn remember(&self, tx: &workers::chain::SignedTx, nonce: u64, fees: workers::chain::signer::Fees) {
        self.nonces.lock().unwrap().insert(tx.raw.clone(), (nonce, fees));
    }
}

#[async_trait::async_trait]
impl Signer for NoncedSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<workers::chain::SignedTx, workers::chain::ChainError> {
        let signed = workers::chain::signer::SandboxSigner.sign(tx).await?;
        self.remember(&signed, tx.nonce.unwrap(), tx.fees.unwrap());
        Ok(signed)
    }

    async fn fees(&self, _: &PayoutTx<'_>) -> Result<Option<workers::chain::signer::Fees>, workers::chain::ChainError> {
        Ok(Some(Self::FEES))
    }

    async fn nonce_account(&self) -> Result<Option<workers::chain::signer::NonceAccount>, workers::chain::ChainError> {
        Ok(Some(workers::chain::signer::NonceAccount { scope: "nonced:wallet".into(), chain_next: 0 }))
    }

    fn signed_terms(&self, raw: &str) -> Option<(u64, workers::chain::signer::Fees)> {
        self.nonces.lock().unwrap().get(raw).copied()
    }

    async fn replacement_fees(
        &self,
        f: workers::chain::signer::Fees,
    ) -> Result<workers::chain::signer::Fees, workers::chain::ChainError> {
        let f = f.gas()?;
        Ok(gas(f.max_fee_per_gas * 2, f.priority_fee_per_gas * 2))
    }

    async fn sign_replacement(
        &self,
        nonce: u64,
        fees: workers::chain::signer::Fees,
    ) -> Result<workers::chain::SignedTx, workers::chain::ChainError> {
        let tx = PayoutTx {
            gate: domain::gates::find("tron_usdt").unwrap(),
            payout_id: Uuid::from_u128(u128::from(nonce)),
            destination: TRON_DEST,
            destination_tag: None,
            amount: Decimal::ZERO,
            max_fee: Decimal::ZERO,
            nonce: Some(nonce),
            fees: Some(fees),
            funding: None,
        };
        let signed = workers::chain::signer::SandboxSigner.sign(&tx).await?;
        self.remember(&signed, nonce, fees);
        Ok(signed)
    }
}

#[tokio::test]
async fn a_transaction_refused_for_good_has_its_nonce_filled_before_its_payout_fails() {
    let x = setup("100", FeeAllocation::Merchant).await;
    let db = x.app.state.db.clone();
    let signer = Arc::new(NoncedSigner::default());
    let executor = executor(&x.app, only(signer.clone()));
    // The sandbox refuses this one for good (forced failure address) after it took nonce 0.
    let refused = x.payout("10", &failure_destination(domain::gates::find("tron_usdt").unwrap().family)).await;
    assert!(matches!(executor.execute(refused).await.unwrap(), Next::After(_)));
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Queued, "not failed while its nonce is a hole: {:?}", p.failure_reason);
    assert_eq!(signer.signed_terms(p.signed_tx.as_deref().unwrap()).unwrap().0, 0);
    let filler = entity::payout_replacement::Entity::find_by_id(refused).one(&db).await.unwrap().unwrap();
    let (nonce, fees) = signer.signed_terms(filler.signed_tx.as_deref().unwrap()).unwrap();
    assert_eq!((nonce, fees.gas().unwrap().max_fee_per_gas), (0, 20), "the same nonce, a higher fee");
    assert!(filler.broadcast_at.is_some());

    // The next payout takes nonce 1 and is not stuck behind a hole: nonce 0 is being filled.
    let next = x.payout("5", TRON_DEST).await;
    executor.execute(next).await.unwrap();
    let n = x.row(next).await;
    assert_eq!(n.status, PayoutStatus::Processing);
    assert_eq!(signer.signed_terms(n.signed_tx.as_deref().unwrap()).unwrap().0, 1);

    x.mine(19).await;
    assert_eq!(executor.execute(refused).await.unwrap(), Next::Done);
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Failed);
    let reason = p.failure_reason.unwrap();
    assert!(reason.contains("forced failure") && reason.contains("nonce filled"), "{reason}");
    assert_eq!(executor.execute(next).await.unwrap(), Next::Done);
    assert_eq!(x.row(next).await.status, PayoutStatus::Completed);
    // 100 - (5 + payout fee 1 + real network fee 1.8); the refused payout's 13 released in full.
    assert_eq!(x.balance().await, (d("92.2"), d("0")));
    assert_eq!(x.events("payout.failed").await.len(), 1);
}
