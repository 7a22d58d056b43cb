//! Sweeping on a real node (anvil): a live USDT invoice and a live ETH invoice paid by a payer,
//! confirmed and credited, then swept by the sweeper to the hot wallet (the token address first
//! topped up with exactly its gas from the hot wallet) with every transaction stored signed
//! before it is sent; the house books the gas; the reconciliation balances to zero; a merchant
//! payout is then paid from the swept tokens, and the books still balance. Run with
//! `--features anvil-tests`.

#![cfg(feature = "anvil-tests")]

use std::time::{Duration, Instant};

use entity::{EntryType, Environment, SweepStatus, ledger_entry, sweep};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::json;
use testkit::anvil::quantity;
use testkit::d;

use crate::support::evm_node::HOT_WALLET;
use crate::support::sweeps::{Rig, eth};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_deposits_are_swept_to_the_hot_wallet_and_pay_a_payout() {
    let rig = Rig::start().await;
    let Rig { anvil, l, token, usdt_address, eth_address, .. } = &rig;
    let db = &l.app.state.db;
    let config = &l.app.state.config;
    assert_eq!(l.balance("ethereum_usdt").await, (d("50"), d("0")));
    assert_eq!(l.balance("ethereum").await, (d("1"), d("0")));

    let sweeper = rig.sweeper();
    let deadline = Instant::now() + Duration::from_secs(90);
    let rows = loop {
        sweeper.tick().await.unwrap();
        let rows = sweep::Entity::find().order_by_asc(sweep::Column::GateId).all(db).await.unwrap();
        if rows.len() == 3 && rows.iter().all(|s| s.status == SweepStatus::Confirmed) {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "sweeps stuck: {:?}",
            rows.iter().map(|s| (s.status, s.failure_reason.clone())).collect::<Vec<_>>()
        );
        anvil.mine(2).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // On chain: the tokens and the ETH (less its gas) are in the hot wallet.
    assert_eq!(anvil.token_balance_of(token, HOT_WALLET).await, 50_000_000);
    assert_eq!(anvil.token_balance_of(token, usdt_address).await, 0);
    let eth_sweep = rows.iter().find(|s| s.gate_id == "ethereum" && s.parent_id.is_none()).unwrap();
    let usdt_sweep = rows.iter().find(|s| s.gate_id == "ethereum_usdt").unwrap();
    // The gas the top-up left over went back to the hot wallet, from the token address.
    let leftover = rows.iter().find(|s| s.parent_id == Some(usdt_sweep.id)).expect("the leftover's return");
    assert_eq!(leftover.gate_id, "ethereum");
    assert!(leftover.address.eq_ignore_ascii_case(usdt_address), "{leftover:?}");
    assert_eq!(leftover.destination, HOT_WALLET);
    assert!(leftover.amount.unwrap().0 > Decimal::ZERO);
    let swept = eth_sweep.amount.unwrap().0;
    assert!(swept > d("0.99") && swept < d("1"), "{swept}");
    // Exactly one transaction per step: the token address got one top-up from the hot wallet
    // and sent the token transfer and the leftover's return; the ETH address sent one transfer.
    assert_eq!(anvil.tx_count(usdt_address).await, 2);
    assert_eq!(anvil.tx_count(eth_address).await, 1);
    let topup = anvil.rpc("eth_getTransactionByHash", json!([usdt_sweep.topup_tx_hash.clone().unwrap()])).await;
    assert_eq!(topup["from"].as_str().unwrap().to_ascii_lowercase(), HOT_WALLET);
    assert_eq!(eth(quantity(&topup["value"])), usdt_sweep.topup_amount.unwrap().0);

    // The books: merchants untouched; the house paid the gas (top-up and its fee, the ETH sweep's fee).
    assert_eq!(l.balance("ethereum_usdt").await, (d("50"), d("0")));
    assert_eq!(l.balance("ethereum").await, (d("1"), d("0")));
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    let entries: Vec<(EntryType, Decimal)> = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .order_by_asc(ledger_entry::Column::Id)
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.entry_type, e.amount.0))
        .collect();
    let kinds: Vec<EntryType> = entries.iter().map(|(t, _)| *t).collect();
    assert_eq!(kinds.iter().filter(|t| **t == EntryType::GasTopup).count(), 2, "{entries:?}");
    assert!(entries.contains(&(EntryType::GasTopup, leftover.amount.unwrap().0)), "{entries:?}");
    assert_eq!(kinds.iter().filter(|t| **t == EntryType::SweepFee).count(), 1, "{entries:?}");
    let receipt = anvil.receipt(eth_sweep.tx_hash.as_deref().unwrap()).await;
    let fee = eth(quantity(&receipt["gasUsed"]) * quantity(&receipt["effectiveGasPrice"]));
    assert!(entries.contains(&(EntryType::SweepFee, -fee)), "{entries:?}");
    testkit::assert_ledger_sums(db, house, "ethereum").await;

    // The reconciliation balances to zero on both gates.
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    for r in &report {
        assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");
    }
    assert_eq!(report.len(), 2);

    // A new round plans nothing more (the swept addresses hold less than min_sweep).
    sweeper.tick().await.unwrap();
    assert_eq!(sweep::Entity::find().all(db).await.unwrap().len(), 3);

    // A merchant payout is paid from the swept tokens, no manual step.
    testkit::auto_approve_payouts_merchant_pays(db, l.merchant, Environment::Live).await;
    let to = alloy_primitives::Address::from([0x42; 20]).to_checksum(None);
    let body = json!({"currency": "USDT", "network": "ethereum", "amount": "30", "destination": to});
    let created = l.app.create("/v1/payouts", &l.key, body).await;
    let id = uuid::Uuid::parse_str(created["id"].as_str().unwrap()).unwrap();
    let executor = workers::executor::Executor {
        db: db.clone(),
        chains: l.new_chains(),
        signers: rig.signers.clone(),
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
        anvil.mine(4).await;
    }
    assert_eq!(anvil.token_balance_of(token, &to).await, 30_000_000);
    assert_eq!(anvil.token_balance_of(token, HOT_WALLET).await, 20_000_000);

    // Paid out of the swept funds, and the books still balance to zero on both gates: the
    // merchant's fees stayed with the house (`payout_margin`), the payout's gas in ETH is the
    // house's (`payout_gas`).
    let report = workers::treasury::report(db, &l.new_chains(), config, Environment::Live).await.unwrap();
    for r in &report {
        assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");
    }
    let kinds: Vec<EntryType> = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.entry_type)
        .collect();
    assert!(kinds.contains(&EntryType::PayoutMargin) && kinds.contains(&EntryType::PayoutGas), "{kinds:?}");
}

/// A reorganisation takes a token sweep's gas top-up and its transfer off the chain (and the
/// node forgets both): the sweeper sends the stored top-up and the stored transfer again, never
/// new ones, and the sweep confirms with the gas booked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorganised_token_sweep_is_sent_again_as_stored() {
    let rig = Rig::start().await;
    let Rig { anvil, l, token, usdt_address, .. } = &rig;
    let db = &l.app.state.db;
    let hot_nonce = anvil.tx_count(HOT_WALLET).await;
    let sweeper = rig.sweeper();
    let usdt_sweep = || async {
        sweep::Entity::find().filter(sweep::Column::GateId.eq("ethereum_usdt")).one(db).await.unwrap().unwrap()
    };
    // Planned in the first round; then the top-up, then the transfer, each mined in a block of its own.
    sweeper.tick().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while usdt_sweep().await.status != SweepStatus::Sending
        || anvil.try_rpc("eth_getTransactionReceipt", json!([usdt_sweep().await.tx_hash])).await.unwrap().is_null()
    {
        sweeper.tick().await.unwrap();
        anvil.mine(1).await;
        assert!(Instant::now() < deadline, "never sent: {:?}", usdt_sweep().await);
    }
    let sent = usdt_sweep().await;
    assert_eq!(anvil.token_balance_of(token, usdt_address).await, 0);
    // Both blocks reorganised away, both transactions forgotten by the node.
    let topup_block = quantity(&anvil.receipt(sent.topup_tx_hash.as_deref().unwrap()).await["blockNumber"]) as u64;
    anvil.reorg(anvil.tip().await - topup_block + 1).await;
    for hash in [sent.topup_tx_hash.as_deref().unwrap(), sent.tx_hash.as_deref().unwrap()] {
        let _ = anvil.try_rpc("anvil_dropTransaction", json!([hash])).await;
    }
    assert_eq!(anvil.token_balance_of(token, usdt_address).await, 50_000_000, "the sweep left the chain");

    let deadline = Instant::now() + Duration::from_secs(60);
    while usdt_sweep().await.status != SweepStatus::Confirmed {
        sweeper.tick().await.unwrap();
        anvil.mine(2).await;
        assert!(Instant::now() < deadline, "sweep stuck after the reorganisation: {:?}", usdt_sweep().await);
    }
    let done = usdt_sweep().await;
    assert_eq!((done.signed_tx, done.topup_signed_tx), (sent.signed_tx, sent.topup_signed_tx), "sent as stored");
    assert_eq!(anvil.token_balance_of(token, HOT_WALLET).await, 50_000_000);
    assert_eq!(anvil.tx_count(usdt_address).await, 1);
    assert_eq!(anvil.tx_count(HOT_WALLET).await, hot_nonce + 1, "one top-up from the hot wallet");
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    let topups = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .filter(ledger_entry::Column::EntryType.eq(EntryType::GasTopup))
        .all(db)
        .await
        .unwrap();
    assert_eq!(topups.len(), 1, "the gas is booked once");
}

/// The fee ceiling (`treasury.gates.<gate>.max_fee`): while the network asks more than it for a
/// sweep (a token address's top-up included), the sweep waits, planned, and nothing is signed or
/// sent; once the ceiling allows it, the sweep goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_waits_while_the_network_asks_more_than_the_fee_ceiling() {
    let rig = Rig::start().await;
    let Rig { anvil, l, usdt_address, eth_address, .. } = &rig;
    let db = &l.app.state.db;
    let mut config = (*l.app.state.config).clone();
    for gate in ["ethereum", "ethereum_usdt"] {
        config.treasury.gates.get_mut(gate).unwrap().max_fee = Some(d("0.000000001"));
    }
    let capped = workers::sweeper::Sweeper::from_config(db, &l.new_chains(), &rig.signers, &config).unwrap().unwrap();
    let hot_nonce = anvil.tx_count(HOT_WALLET).await;
    for _ in 0..3 {
        capped.tick().await.unwrap();
        anvil.mine(1).await;
    }
    let rows = sweep::Entity::find().all(db).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|s| s.status == SweepStatus::Planned && s.signed_tx.is_none()), "{rows:?}");
    assert_eq!(anvil.tx_count(HOT_WALLET).await, hot_nonce, "no top-up");
    assert_eq!((anvil.tx_count(usdt_address).await, anvil.tx_count(eth_address).await), (0, 0));

    // The ceiling raised: the same planned sweeps go.
    let deadline = Instant::now() + Duration::from_secs(90);
    let sweeper = rig.sweeper();
    while !sweep::Entity::find().all(db).await.unwrap().iter().all(|s| s.status == SweepStatus::Confirmed) {
        sweeper.tick().await.unwrap();
        anvil.mine(2).await;
        assert!(Instant::now() < deadline, "stuck: {:?}", sweep::Entity::find().all(db).await.unwrap());
    }
    let done = sweep::Entity::find().filter(sweep::Column::ParentId.is_null()).all(db).await.unwrap();
    assert_eq!(done.iter().map(|s| s.id).collect::<Vec<_>>(), rows.iter().map(|s| s.id).collect::<Vec<_>>());
}
