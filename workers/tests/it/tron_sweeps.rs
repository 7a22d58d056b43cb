//! TRON sweeping against the fake full node keeping real balances: a live TRX invoice and a
//! live USDT invoice paid by a payer, confirmed and credited, then swept to the hot wallet (the
//! USDT address first topped up from the hot wallet with exactly what its transfer burns), with
//! every transaction stored signed before it is sent; the house books the fees; the
//! reconciliation balances to zero; a merchant USDT payout is then paid from the swept tokens.
//! And a stored sweep transaction that expired unseen fails its sweep, the address planned again
//! and swept once.

use std::time::{Duration, Instant};

use entity::{EntryType, Environment, SweepStatus, ledger_entry, sweep};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::json;
use testkit::d;
use workers::chain::tron::tx::{self as tron_tx, Call};

use crate::support::tron_node::{ENERGY_FEE, RESULT_BYTES, TRANSACTION_FEE, TRC20_ENERGY};
use crate::support::tron_payouts::hot_wallet;
use crate::support::tron_sweeps::{HOT_FLOAT_SUN, TronRig, id, sun, trx, usdt_id};

fn size(raw: &str) -> u64 {
    raw.len() as u64 / 2
}

async fn house_entries(db: &sea_orm::DatabaseConnection) -> Vec<(String, EntryType, Decimal)> {
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .order_by_asc(ledger_entry::Column::Id)
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.gate_id, e.entry_type, e.amount.0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_trx_and_usdt_are_swept_to_the_hot_wallet_and_pay_a_payout() {
    let rig = TronRig::start().await;
    let TronRig { l, trx_address, usdt_address, .. } = &rig;
    let (db, config) = (&l.app.state.db, &l.app.state.config);
    let hot = id(&hot_wallet());
    let merchant_trx = l.balance("tron").await;
    let merchant_usdt = l.balance("tron_usdt").await;
    assert_eq!(merchant_usdt.1, d("0"));
    let house_before = house_entries(db).await.len();

    let sweeper = rig.sweeper();
    rig.tick_until(&sweeper, "sweeping", |rows| {
        rows.len() == 3 && rows.iter().all(|s| s.status == SweepStatus::Confirmed)
    })
    .await;
    let rows = rig.rows().await;
    let trx_sweep = rows.iter().find(|s| s.gate_id == "tron" && s.parent_id.is_none()).unwrap();
    let usdt_sweep = rows.iter().find(|s| s.gate_id == "tron_usdt").unwrap();
    let leftover = rows.iter().find(|s| s.parent_id == Some(usdt_sweep.id)).expect("the leftover's return");
    assert_eq!(
        (trx_sweep.address.as_str(), usdt_sweep.address.as_str()),
        (trx_address.as_str(), usdt_address.as_str())
    );

    // The USDT address got exactly what its transfer burns: the energy, and the bandwidth of the
    // transfer as priced (signed with a 5-byte `fee_limit`; the one sent has 4).
    let transfer = usdt_sweep.signed_tx.as_deref().unwrap();
    let energy = TRC20_ENERGY * ENERGY_FEE;
    let bandwidth = (size(transfer) + 1 + RESULT_BYTES) * TRANSACTION_FEE;
    let topup = usdt_sweep.topup_amount.unwrap().0;
    assert_eq!(topup, trx(energy + bandwidth));
    let (topup_raw, _) = tron_tx::decode(usdt_sweep.topup_signed_tx.as_deref().unwrap()).unwrap();
    assert_eq!(topup_raw.owner, hot, "the top-up comes from the hot wallet");
    assert_eq!(topup_raw.call, Call::Trx { to: id(usdt_address), sun: sun(topup) });
    let (transfer_raw, _) = tron_tx::decode(transfer).unwrap();
    assert_eq!(
        transfer_raw.call,
        Call::Trc20 {
            contract: usdt_id(),
            to: hot,
            units: alloy_primitives::U256::from(50_000_000u64),
            fee_limit: sun(topup)
        }
    );
    // The tokens reached the hot wallet; the transfer's bandwidth was free, its energy burnt.
    assert_eq!(l.node.units_of(&usdt_id(), &hot), 50_000_000);
    assert_eq!(l.node.units_of(&usdt_id(), &id(usdt_address)), 0);
    assert_eq!(l.node.burnt(usdt_sweep.tx_hash.as_deref().unwrap()), Some(energy));
    // What the top-up left over (the bandwidth) went back to the hot wallet, less its own burn.
    assert_eq!((leftover.gate_id.as_str(), leftover.address.as_str()), ("tron", usdt_address.as_str()));
    assert_eq!(leftover.destination, hot_wallet());
    let back_fee = l.node.burnt(leftover.tx_hash.as_deref().unwrap()).unwrap();
    assert_eq!(leftover.amount.unwrap().0, trx(bandwidth - back_fee));
    assert_eq!(l.node.trx_of(&id(usdt_address)), 0);
    // The TRX sweep moved the balance less the most its bandwidth burns (all of it: no free
    // bandwidth), its fee read from the transaction info.
    let trx_fee = (size(trx_sweep.signed_tx.as_deref().unwrap()) + RESULT_BYTES) * TRANSACTION_FEE;
    assert_eq!(trx_sweep.amount.unwrap().0, trx(100_000_000 - trx_fee));
    assert_eq!(trx_sweep.fee.unwrap().0, trx(trx_fee));
    assert_eq!(l.node.trx_of(&id(trx_address)), 0);
    // One transaction per step: the hot wallet's top-up, the USDT address's transfer and return,
    // the TRX address's sweep.
    assert_eq!(l.node.sent_by(&id(usdt_address)).len(), 2);
    assert_eq!(l.node.sent_by(&id(trx_address)).len(), 1);
    assert_eq!(l.node.sent_by(&hot).len(), 1);
    let topup_fee = l.node.burnt(usdt_sweep.topup_tx_hash.as_deref().unwrap()).unwrap();
    assert_eq!(
        l.node.trx_of(&hot),
        HOT_FLOAT_SUN - sun(topup) - topup_fee + sun(leftover.amount.unwrap().0) + 100_000_000 - trx_fee
    );

    // The books: merchants untouched; the house paid the top-up and its fee, got the leftover
    // back, and paid the TRX sweep's fee.
    assert_eq!(l.balance("tron").await, merchant_trx);
    assert_eq!(l.balance("tron_usdt").await, merchant_usdt);
    let entries = house_entries(db).await;
    let sweeping: Vec<_> = entries[house_before..].to_vec();
    let want = [
        ("tron".to_owned(), EntryType::GasTopup, -(topup + trx(topup_fee))),
        ("tron".to_owned(), EntryType::GasTopup, leftover.amount.unwrap().0),
        ("tron".to_owned(), EntryType::SweepFee, -trx(trx_fee)),
    ];
    for w in &want {
        assert!(sweeping.contains(w), "{w:?} not in {sweeping:?}");
    }
    assert_eq!(sweeping.len(), 3, "{sweeping:?}");
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    testkit::assert_ledger_sums(db, house, "tron").await;

    // The reconciliation balances to zero on both gates.
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    assert_eq!(report.len(), 2);
    for r in &report {
        assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");
    }

    // A new round plans nothing more.
    sweeper.tick().await.unwrap();
    assert_eq!(rig.rows().await.len(), 3);

    // A merchant USDT payout is paid from the swept tokens by the payout executor, no manual step.
    testkit::auto_approve_payouts_merchant_pays(db, l.merchant, Environment::Live).await;
    let to = crate::support::tron_payouts::destination(0x42);
    let body = json!({"currency": "USDT", "network": "tron", "amount": "30", "destination": to});
    let created = l.app.create("/v1/payouts", &l.key, body).await;
    let payout = uuid::Uuid::parse_str(created["id"].as_str().unwrap()).unwrap();
    let executor = workers::executor::Executor {
        db: db.clone(),
        chains: l.new_chains(),
        signers: rig.signers.clone(),
        recheck: Duration::from_millis(10),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let paid = loop {
        executor.execute(payout).await.unwrap();
        let p = entity::payout::Entity::find_by_id(payout).one(db).await.unwrap().unwrap();
        if p.status == entity::PayoutStatus::Completed {
            break p;
        }
        assert!(Instant::now() < deadline, "payout stuck at {:?}", p.status);
        l.node.mine(4);
    };
    assert_eq!(l.node.units_of(&usdt_id(), &id(&to)), 30_000_000);
    assert_eq!(l.node.units_of(&usdt_id(), &hot), 20_000_000);

    // The books still balance on both gates: the payout's energy and bandwidth, burnt from the
    // hot wallet, are the house's `payout_gas` on `tron`.
    let burn = l.node.burnt(paid.tx_hash.as_deref().unwrap()).unwrap();
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    for r in &report {
        assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");
    }
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    let gas: Vec<Decimal> = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .filter(ledger_entry::Column::EntryType.eq(EntryType::PayoutGas))
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.amount.0)
        .collect();
    assert_eq!(gas, vec![-trx(burn)]);
}

/// The TRX sweep's transaction is lost by the node and expires unseen: its sweep fails, the
/// address is planned again and swept once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_sweep_transaction_fails_its_sweep_and_the_address_is_swept_again() {
    let rig = TronRig::start().await;
    let TronRig { l, trx_address, .. } = &rig;
    let sweeper = rig.sweeper();
    let trx_rows = |rows: &[sweep::Model]| -> Vec<sweep::Model> {
        rows.iter().filter(|s| s.gate_id == "tron" && s.address == *trx_address).cloned().collect()
    };
    // The node accepts the sweep and then loses it.
    l.node.with(|n| n.losing = true);
    rig.tick_until(&sweeper, "sent", |rows| trx_rows(rows).iter().any(|s| s.status == SweepStatus::Sending)).await;
    let lost = trx_rows(&rig.rows().await).remove(0);
    // Sent again as stored (and lost again) while it may still enter a block; failed once it
    // expired unseen.
    rig.tick_until(&sweeper, "expired", |rows| trx_rows(rows).iter().any(|s| s.status == SweepStatus::Failed)).await;
    l.node.with(|n| n.losing = false);
    let failed = trx_rows(&rig.rows().await).into_iter().find(|s| s.id == lost.id).unwrap();
    assert_eq!(failed.status, SweepStatus::Failed);
    assert!(failed.failure_reason.as_deref().unwrap().contains("expired"), "{failed:?}");
    assert_eq!(failed.signed_tx, lost.signed_tx, "never signed again");
    assert_eq!(l.node.trx_of(&id(trx_address)), 100_000_000, "nothing left the address");

    // Planned again and swept once.
    rig.tick_until(&sweeper, "swept again", |rows| trx_rows(rows).iter().any(|s| s.status == SweepStatus::Confirmed))
        .await;
    let rows = trx_rows(&rig.rows().await);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let done = rows.iter().find(|s| s.status == SweepStatus::Confirmed).unwrap();
    assert_ne!(done.tx_hash, lost.tx_hash);
    let fee = l.node.burnt(done.tx_hash.as_deref().unwrap()).unwrap();
    assert_eq!(done.amount.unwrap().0 + trx(fee), d("100"));
    assert_eq!(l.node.trx_of(&id(trx_address)), 0);
    let sent: Vec<_> = l.node.sent_by(&id(trx_address));
    assert_eq!(sent.len(), 2, "the lost one and the new one");
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    let fees = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .filter(ledger_entry::Column::EntryType.eq(EntryType::SweepFee))
        .all(&l.app.state.db)
        .await
        .unwrap();
    assert_eq!(fees.len(), 1, "one fee booked, the expired sweep's none");
}
