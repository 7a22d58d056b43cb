//! Ledger and balances: every change is an entry; balance rows equal the sum of their entries;
//! no bucket ever goes below zero, whatever the concurrency.

use api::auth::Permission;
use domain::ledger::{LedgerError, Posting};
use entity::{Bucket, EntryType, Environment};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Select, TransactionTrait};
use testkit::TestApp;
use testkit::d;
use uuid::Uuid;

/// Rows of `E` of one merchant's balance: `columns` are E's merchant, environment and gate.
fn of_balance<E: EntityTrait>(columns: [E::Column; 3], merchant: Uuid, env: Environment, gate: &str) -> Select<E> {
    let [m, e, g] = columns;
    E::find().filter(m.eq(merchant)).filter(e.eq(env)).filter(g.eq(gate))
}

/// Asserts the ledger invariants for one balance and returns (available, pending, reserved).
async fn assert_invariants(app: &TestApp, merchant: Uuid, env: Environment, gate: &str) -> (Decimal, Decimal, Decimal) {
    use entity::{balance, ledger_entry};
    let columns = [balance::Column::MerchantId, balance::Column::Environment, balance::Column::GateId];
    let bal = of_balance::<balance::Entity>(columns, merchant, env, gate).one(&app.state.db).await.unwrap();
    let columns = [ledger_entry::Column::MerchantId, ledger_entry::Column::Environment, ledger_entry::Column::GateId];
    let entries = of_balance::<ledger_entry::Entity>(columns, merchant, env, gate).all(&app.state.db).await.unwrap();
    let sum = |b: Bucket| entries.iter().filter(|e| e.bucket == b).map(|e| e.amount.0).sum::<Decimal>();
    for e in &entries {
        assert!(e.balance_after.0 >= Decimal::ZERO, "entry {} left {:?} at {}", e.id, e.bucket, e.balance_after);
    }
    let (a, p, r) =
        bal.map_or((Decimal::ZERO, Decimal::ZERO, Decimal::ZERO), |b| (b.available.0, b.pending.0, b.reserved.0));
    assert_eq!(
        (sum(Bucket::Available), sum(Bucket::Pending), sum(Bucket::Reserved)),
        (a, p, r),
        "balance row != sum of entries"
    );
    assert!(a >= Decimal::ZERO && p >= Decimal::ZERO && r >= Decimal::ZERO);
    (a, p, r)
}

#[tokio::test]
async fn balances_list_every_gate_with_zeros() {
    let (app, m, key) = TestApp::with_test_key().await;
    let r = app.get("/v1/balances", Some(&key)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let rows = r.data().as_array().unwrap();
    assert_eq!(rows.len(), 18);
    for row in rows {
        for f in
            ["currency", "network", "gate_id", "available", "pending", "reserved", "total", "environment", "updated_at"]
        {
            assert!(row.get(f).is_some(), "{f} missing: {row}");
        }
        assert_eq!((row["available"].as_str(), row["total"].as_str()), (Some("0"), Some("0")));
        assert_eq!(row["environment"], "test");
    }
    r.assert_page(18, 18, 0, false);

    let btc = domain::gates::find("bitcoin").unwrap();
    domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, btc, d("1.25"), "funding").await.unwrap();
    let rows = app.get("/v1/balances", Some(&key)).await.body["data"].clone();
    let row = rows.as_array().unwrap().iter().find(|r| r["gate_id"] == "bitcoin").unwrap().clone();
    assert_eq!((row["available"].as_str(), row["total"].as_str()), (Some("1.25"), Some("1.25")));
    assert!(row["updated_at"].is_string());

    // Isolation: the live key and another merchant see zeros.
    let live = app.key(m, Environment::Live, &[]).await;
    let (_, other) = app.test_key().await;
    for k in [&live, &other] {
        let rows = app.get("/v1/balances", Some(k)).await.body["data"].clone();
        assert!(rows.as_array().unwrap().iter().all(|r| r["available"] == "0"), "{rows}");
    }
    // Auth, permission and the reserved paging parameters.
    app.get("/v1/balances", None).await.assert_error(401, "unauthorized", None);
    let no_perm = app.key(m, Environment::Test, &[Permission::InvoicesRead]).await;
    app.get("/v1/balances", Some(&no_perm)).await.assert_error(403, "forbidden", None);
    app.get("/v1/balances?limit=0", Some(&key)).await.assert_error(400, "validation_error", Some("limit"));
    assert_eq!(
        app.get("/v1/balances?limit=5&offset=3&environment=live", Some(&key)).await.data().as_array().unwrap().len(),
        18
    );
}

#[tokio::test]
async fn ledger_history_paging_and_filters() {
    let (app, m, key) = TestApp::with_test_key().await;
    let btc = domain::gates::find("bitcoin").unwrap();
    for i in 1..=5 {
        domain::ledger::adjust(
            &app.state.db,
            m.into(),
            Environment::Test,
            btc,
            Decimal::from(i),
            &format!("credit {i}"),
        )
        .await
        .unwrap();
    }
    let mid = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, btc, d("-2.5"), "debit").await.unwrap();
    let usdt = domain::gates::find("tron_usdt").unwrap();
    domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, usdt, d("10"), "other gate").await.unwrap();

    let r = app.get("/v1/balances/bitcoin/ledger", Some(&key)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["meta"]["pagination"]["total"], 6);
    let first = &r.data()[0];
    assert_eq!(first["type"], "adjustment");
    assert_eq!(first["amount"], "-2.5");
    assert_eq!(first["balance_after"], "12.5"); // 15 - 2.5
    assert_eq!(first["bucket"], "available");
    assert_eq!(first["currency"], "BTC");
    assert_eq!(first["description"], "debit");
    assert_eq!(first["reference_type"], "adjustment");
    for f in ["id", "network", "gate_id", "reference_id", "created_at"] {
        assert!(first.get(f).is_some(), "{f}");
    }
    // The asset code works when it names one gate.
    assert_eq!(app.get("/v1/balances/BTC/ledger", Some(&key)).await.body["meta"]["pagination"]["total"], 6);
    let p = app.page("/v1/balances/bitcoin/ledger?limit=2&offset=2", &key, [6, 2, 2], true).await;
    assert_eq!(p.data()[0]["balance_after"], "10"); // newest first: 12.5, 15, 10, 6, 3, 1
    let since = app
        .get(&format!("/v1/balances/bitcoin/ledger?from={}", mid.to_rfc3339().replace('+', "%2B")), Some(&key))
        .await;
    assert_eq!(since.body["meta"]["pagination"]["total"], 1, "{}", since.body);
    let before =
        app.get(&format!("/v1/balances/bitcoin/ledger?to={}", mid.to_rfc3339().replace('+', "%2B")), Some(&key)).await;
    assert_eq!(before.body["meta"]["pagination"]["total"], 5);
    assert_eq!(
        app.get("/v1/balances/bitcoin/ledger?type=adjustment", Some(&key)).await.body["meta"]["pagination"]["total"],
        6
    );
    assert_eq!(
        app.get("/v1/balances/bitcoin/ledger?type=payout_fee", Some(&key)).await.body["meta"]["pagination"]["total"],
        0
    );
    assert_eq!(app.get("/v1/balances/tron_usdt/ledger", Some(&key)).await.body["meta"]["pagination"]["total"], 1);

    app.get("/v1/balances/bitcoin/ledger?type=gift", Some(&key)).await.assert_error(
        400,
        "validation_error",
        Some("type"),
    );
    app.get("/v1/balances/bitcoin/ledger?from=yesterday", Some(&key)).await.assert_error(
        400,
        "validation_error",
        Some("from"),
    );
    app.get("/v1/balances/bitcoin/ledger?limit=101", Some(&key)).await.assert_error(
        400,
        "validation_error",
        Some("limit"),
    );
    app.get("/v1/balances/USDT/ledger", Some(&key)).await.assert_error(422, "unsupported_currency", Some("currency"));
    app.get("/v1/balances/DOGE/ledger", Some(&key)).await.assert_error(422, "unsupported_currency", Some("currency"));
    let no_perm = app.key(m, Environment::Test, &[Permission::InvoicesRead]).await;
    app.get("/v1/balances/bitcoin/ledger", Some(&no_perm)).await.assert_error(403, "forbidden", None);
    // Another merchant and the other environment see nothing.
    let (_, other) = app.test_key().await;
    assert_eq!(app.get("/v1/balances/bitcoin/ledger", Some(&other)).await.body["meta"]["pagination"]["total"], 0);
    let live = app.key(m, Environment::Live, &[]).await;
    assert_eq!(app.get("/v1/balances/bitcoin/ledger", Some(&live)).await.body["meta"]["pagination"]["total"], 0);
    assert_invariants(&app, m, Environment::Test, "bitcoin").await;
}

#[tokio::test]
async fn a_refused_posting_writes_nothing() {
    let app = TestApp::spawn().await;
    let m = app.merchant().await;
    let eth = domain::gates::find("ethereum").unwrap();
    domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, eth, d("1.000000000000000001"), "fund")
        .await
        .unwrap();
    let err =
        domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, eth, d("-1.000000000000000002"), "too much")
            .await
            .unwrap_err();
    assert!(matches!(err, LedgerError::Insufficient { bucket: Bucket::Available, .. }), "{err}");
    assert!(matches!(
        domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, eth, Decimal::ZERO, "x").await,
        Err(LedgerError::Invalid(_))
    ));
    let btc = domain::gates::find("bitcoin").unwrap();
    assert!(matches!(
        domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, btc, d("0.000000001"), "x").await,
        Err(LedgerError::Invalid(_))
    ));
    // Several postings in one transaction: the second fails, the first is rolled back too.
    let txn = app.state.db.begin().await.unwrap();
    let res = domain::ledger::post(
        &txn,
        domain::ledger::Account::of(m.into(), Environment::Test, "ethereum"),
        &[
            Posting {
                bucket: Bucket::Available,
                amount: d("-0.5"),
                entry_type: EntryType::PayoutReserve,
                reference: None,
                description: None,
            },
            Posting {
                bucket: Bucket::Pending,
                amount: d("-0.1"),
                entry_type: EntryType::DepositReversal,
                reference: None,
                description: None,
            },
        ],
    )
    .await;
    assert!(matches!(res, Err(LedgerError::Insufficient { bucket: Bucket::Pending, .. })));
    drop(txn); // rolled back
    let (a, p, r) = assert_invariants(&app, m, Environment::Test, "ethereum").await;
    assert_eq!((a, p, r), (d("1.000000000000000001"), Decimal::ZERO, Decimal::ZERO));
}

/// 200 concurrent debits of 1 against a balance of exactly 100: exactly 100 succeed.
#[tokio::test]
async fn concurrent_debits_never_overdraw() {
    let app = TestApp::spawn_with(|c| c.db.max_connections = 16).await;
    let m = app.merchant().await;
    let usdt = domain::gates::find("tron_usdt").unwrap();
    domain::ledger::adjust(&app.state.db, m.into(), Environment::Test, usdt, d("100"), "fund").await.unwrap();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..200 {
        let db = app.state.db.clone();
        set.spawn(async move {
            domain::ledger::adjust(&db, m.into(), Environment::Test, usdt, d("-1"), &format!("debit {i}")).await
        });
    }
    let (mut ok, mut refused) = (0, 0);
    while let Some(r) = set.join_next().await {
        match r.unwrap() {
            Ok(b) => {
                assert!(b.available.0 >= Decimal::ZERO);
                ok += 1;
            }
            Err(LedgerError::Insufficient { .. }) => refused += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    assert_eq!((ok, refused), (100, 100));
    let (a, _, _) = assert_invariants(&app, m, Environment::Test, "tron_usdt").await;
    assert_eq!(a, Decimal::ZERO);
}

#[derive(Debug, Clone)]
enum Op {
    Credit(u32),
    Debit(u32),
    Reserve(u32),
    Release(u32),
    Settle(u32),
    SeeDeposit(u32),
    ConfirmDeposit(u32),
}

fn postings(op: &Op) -> Vec<Posting> {
    let p = |bucket, cents: i64, entry_type| Posting {
        bucket,
        amount: Decimal::new(cents, 2),
        entry_type,
        reference: None,
        description: None,
    };
    match *op {
        Op::Credit(c) => vec![p(Bucket::Available, i64::from(c), EntryType::Adjustment)],
        Op::Debit(c) => vec![p(Bucket::Available, -i64::from(c), EntryType::Adjustment)],
        Op::Reserve(c) => vec![
            p(Bucket::Available, -i64::from(c), EntryType::PayoutReserve),
            p(Bucket::Reserved, i64::from(c), EntryType::PayoutReserve),
        ],
        Op::Release(c) => vec![
            p(Bucket::Reserved, -i64::from(c), EntryType::PayoutRelease),
            p(Bucket::Available, i64::from(c), EntryType::PayoutRelease),
        ],
        Op::Settle(c) => vec![p(Bucket::Reserved, -i64::from(c), EntryType::PayoutDebit)],
        Op::SeeDeposit(c) => vec![p(Bucket::Pending, i64::from(c), EntryType::InvoiceCredit)],
        Op::ConfirmDeposit(c) => vec![
            p(Bucket::Pending, -i64::from(c), EntryType::InvoiceCredit),
            p(Bucket::Available, i64::from(c), EntryType::InvoiceCredit),
        ],
    }
}

fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let amt = 1u32..5_000;
    prop_oneof![
        amt.clone().prop_map(Op::Credit),
        amt.clone().prop_map(Op::Debit),
        amt.clone().prop_map(Op::Reserve),
        amt.clone().prop_map(Op::Release),
        amt.clone().prop_map(Op::Settle),
        amt.clone().prop_map(Op::SeeDeposit),
        amt.prop_map(Op::ConfirmDeposit),
    ]
}

/// Random sequences of credits, debits, reservations, releases, settlements and deposits: the
/// ledger matches a simple model, refused operations change nothing, invariants always hold.
#[test]
fn ledger_invariants_hold_for_random_sequences() {
    use proptest::prelude::*;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = rt.block_on(TestApp::spawn());
    let cases = if cfg!(feature = "pg-tests") { 16 } else { 48 };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases, ..ProptestConfig::default() });
    runner
        .run(&proptest::collection::vec(op_strategy(), 1..40), |ops| {
            rt.block_on(async {
                let m = app.merchant().await;
                let mut model = [Decimal::ZERO; 3]; // available, pending, reserved
                for op in &ops {
                    let ps = postings(op);
                    let mut next = model;
                    let mut ok = true;
                    for p in &ps {
                        let i = match p.bucket {
                            Bucket::Available => 0,
                            Bucket::Pending => 1,
                            Bucket::Reserved => 2,
                        };
                        next[i] += p.amount;
                        ok &= next[i] >= Decimal::ZERO;
                    }
                    let txn = app.state.db.begin().await.unwrap();
                    let res = domain::ledger::post(
                        &txn,
                        domain::ledger::Account::of(m.into(), Environment::Test, "bitcoin"),
                        &ps,
                    )
                    .await;
                    match (res, ok) {
                        (Ok(b), true) => {
                            txn.commit().await.unwrap();
                            model = next;
                            assert_eq!([b.available.0, b.pending.0, b.reserved.0], model, "{op:?}");
                        }
                        (Err(LedgerError::Insufficient { .. }), false) => drop(txn),
                        (res, _) => panic!("{op:?}: model says ok={ok}, ledger said {:?}", res.map(|_| ())),
                    }
                }
                let (a, p, r) = assert_invariants(&app, m, Environment::Test, "bitcoin").await;
                assert_eq!([a, p, r], model);
            });
            Ok(())
        })
        .unwrap();
}
