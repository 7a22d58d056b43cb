//! Bitcoin sweeping against Litecoin Core regtest: three paid invoices' deposits, confirmed and
//! credited, swept to the hot wallet in one transaction spending all of them (never a deposit
//! short of its confirmations), the fee booked to the house, the reconciliation at zero; then a
//! merchant payout paid by the payout executor from the swept output, no manual step, and the
//! books still at zero. Run with `--features regtest-tests`.
#![cfg(feature = "regtest-tests")]

use std::str::FromStr;
use std::time::{Duration, Instant};

use entity::{EntryType, Environment, SweepStatus, ledger_entry, sweep};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use testkit::d;

use crate::support::sweeps::BtcRig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_deposits_are_swept_in_one_transaction() {
    let rig = BtcRig::start().await;
    let l = &rig.l;
    let db = &l.app.state.db;
    let config = &l.app.state.config;

    let mut addresses = Vec::new();
    for amount in ["0.5", "0.25", "0.125"] {
        let inv = l.invoice(json!({"currency": "BTC", "amount": amount})).await;
        let address = inv["deposit_address"].as_str().unwrap().to_owned();
        l.node.pay(&address, amount).await;
        addresses.push(address);
    }
    l.node.mine(1).await;
    l.step().await;
    let sweeper = rig.sweeper();
    // Short of the gate's 3 confirmations: nothing is swept yet.
    sweeper.tick().await.unwrap();
    assert!(sweep::Entity::find().all(db).await.unwrap().is_empty(), "a deposit short of its depth is never spent");
    l.step_over(2).await;
    assert_eq!(l.balance("bitcoin").await, (d("0.875"), d("0")));

    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        sweeper.tick().await.unwrap();
        let rows = sweep::Entity::find().all(db).await.unwrap();
        if rows.len() == 3 && rows.iter().all(|s| s.status == SweepStatus::Confirmed) {
            break rows;
        }
        assert!(Instant::now() < deadline, "sweeps stuck: {rows:?}");
        l.node.mine(1).await;
    };
    // One transaction for the three addresses, its three inputs to one output.
    let txid = rows[0].tx_hash.clone().unwrap();
    assert!(rows.iter().all(|s| s.tx_hash.as_deref() == Some(txid.as_str())));
    let tx = l.node.tx(&txid).await;
    assert_eq!((tx.input.len(), tx.output.len()), (3, 1));
    let sent = tx.output[0].value.to_sat();
    let fee: Decimal = rows.iter().filter_map(|s| s.fee).map(|f| f.0).sum();
    assert_eq!(Decimal::from_i128_with_scale(i128::from(sent), 8) + fee, d("0.875"));
    assert_eq!(l.node.unspent_to(&rig.hot).await, vec![sent]);
    for a in &addresses {
        assert!(l.node.unspent_to(&bitcoin::Address::from_str(a).unwrap().assume_checked()).await.is_empty());
    }

    // The books: the merchant untouched, the house paid the fee, the reconciliation at zero.
    assert_eq!(l.balance("bitcoin").await, (d("0.875"), d("0")));
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    let entries: Vec<(EntryType, Decimal)> = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.entry_type, e.amount.0))
        .collect();
    assert_eq!(entries, [(EntryType::SweepFee, -fee)]);
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    assert_eq!(report.len(), 1);
    assert_eq!(report[0].difference, Some(Decimal::ZERO), "{:?}", report[0]);
    // Nothing left to sweep: another round plans nothing.
    sweeper.tick().await.unwrap();
    assert_eq!(sweep::Entity::find().all(db).await.unwrap().len(), 3);

    // A merchant payout paid from the swept output (the hot wallet held nothing else), no
    // manual step; the books still balance (the payout's fee and margin are the house's).
    testkit::auto_approve_payouts_merchant_pays(db, l.merchant, Environment::Live).await;
    let to = crate::support::btc_payouts::destination(0x61);
    let body = json!({"currency": "BTC", "amount": "0.3", "destination": to.to_string()});
    let created = l.app.create("/v1/payouts", &l.key, body).await;
    let id = uuid::Uuid::parse_str(created["id"].as_str().unwrap()).unwrap();
    let executor = workers::executor::Executor {
        db: db.clone(),
        chains: l.new_chains(),
        signers: rig.signers(),
        recheck: Duration::from_millis(10),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        executor.execute(id).await.unwrap();
        let p = entity::payout::Entity::find_by_id(id).one(db).await.unwrap().unwrap();
        if p.status == entity::PayoutStatus::Completed {
            break;
        }
        assert!(Instant::now() < deadline, "payout stuck at {:?}", p.status);
        l.node.mine(1).await;
    }
    assert_eq!(l.node.unspent_to(&to).await, vec![30_000_000]);
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    assert_eq!(report[0].difference, Some(Decimal::ZERO), "{:?}", report[0]);
}
