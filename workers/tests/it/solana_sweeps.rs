//! Solana sweeping against the real programs (LiteSVM behind the JSON-RPC shim): a live SOL
//! invoice and a live USDC invoice paid by a payer, finalized and credited, then swept to the
//! hot wallet, one transaction each: the SOL address sends its balance less its fee; the USDC
//! address's tokens move with the hot wallet paying the fees, and its token account is closed,
//! the rent back in the hot wallet. The house books the fees and the rent, the reconciliation
//! balances to zero, and a merchant USDC payout is then paid from the swept tokens with the
//! books still at zero. A sweep whose transaction was lost is failed once its blockhash expired
//! at finalized, and the address is swept again, once. Run with `--features litesvm-tests`.
#![cfg(feature = "litesvm-tests")]

use std::time::{Duration, Instant};

use entity::{EntryType, Environment, SweepStatus, ledger_entry};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::json;
use testkit::d;
use workers::chain::solana::tx::{address as address_of, associated_token_account, pubkey};

use crate::support::solana_node::VALIDITY;
use crate::support::solana_payouts::destination;
use crate::support::solana_sweeps::{HOT_LAMPORTS, SolRig, TOKEN_ACCOUNT_RENT, hot_wallet};

async fn house_entries(db: &sea_orm::DatabaseConnection) -> Vec<(String, EntryType, Decimal)> {
    let house: uuid::Uuid = domain::treasury::HOUSE.into();
    ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.eq(house))
        .order_by_asc(ledger_entry::Column::Id)
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.gate_id, e.entry_type, e.amount.0.normalize()))
        .collect()
}

async fn assert_books_balance(rig: &SolRig) {
    let (db, config) = (&rig.l.app.state.db, &rig.l.app.state.config);
    let report = workers::treasury::report(db, &rig.l.new_chains(), config, Environment::Live).await.unwrap();
    assert_eq!(report.len(), 2, "{report:?}");
    for r in &report {
        assert_eq!(r.difference, Some(Decimal::ZERO), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sol_and_usdc_deposits_are_swept_closed_and_pay_a_payout() {
    let rig = SolRig::start().await;
    let SolRig { l, sol_address, usdc_address, .. } = &rig;
    let (db, node) = (&l.app.state.db, &l.node);
    assert_eq!(l.balance("solana").await, (d("1.5"), d("0")));
    assert_eq!(l.balance("solana_usdc").await, (d("12.5"), d("0")));
    assert_books_balance(&rig).await;
    let mint = pubkey(l.app.state.config.solana.usdc_mint.as_deref().unwrap()).unwrap();
    let deposit_account = address_of(&associated_token_account(&pubkey(usdc_address).unwrap(), &mint));
    assert_eq!(node.call("shim_accountExists", json!([deposit_account])).await, json!(true));

    let sweeper = rig.sweeper();
    let rows = rig.swept(&sweeper, 2).await;
    let (sol, usdc) = (&rows[0], &rows[1]);
    assert_eq!((sol.gate_id.as_str(), usdc.gate_id.as_str()), ("solana", "solana_usdc"));
    assert_eq!((&sol.address, &usdc.address), (sol_address, usdc_address));
    assert!(rows.iter().all(|s| s.destination == hot_wallet() && s.parent_id.is_none()), "{rows:?}");

    // On chain: the SOL address sent all it held less one signature's fee; the USDC moved and
    // the deposit's token account is gone, its rent back with the hot wallet, which paid the
    // two signatures of that transaction.
    assert_eq!(sol.amount.unwrap().0, d("1.499995"));
    assert_eq!(usdc.amount.unwrap().0, d("12.5"));
    assert_eq!(node.lamports(sol_address).await, 0);
    assert_eq!(node.token_units(usdc_address).await, 0);
    assert_eq!(node.call("shim_accountExists", json!([deposit_account])).await, json!(false), "closed");
    assert_eq!(node.token_units(&hot_wallet()).await, 12_500_000);
    let hot = node.lamports(&hot_wallet()).await;
    assert_eq!(hot, HOT_LAMPORTS + 1_499_995_000 + TOKEN_ACCOUNT_RENT - 10_000);

    // The books: merchants untouched; the house paid both fees and got the rent back.
    assert_eq!(l.balance("solana").await, (d("1.5"), d("0")));
    assert_eq!(l.balance("solana_usdc").await, (d("12.5"), d("0")));
    let entries = house_entries(db).await;
    assert_eq!(
        entries[1..].to_vec(),
        vec![
            ("solana".into(), EntryType::SweepFee, d("-0.000005")),
            ("solana".into(), EntryType::SweepFee, d("-0.00001")),
            ("solana".into(), EntryType::RentReclaimed, d("0.00203928")),
        ],
        "{entries:?}"
    );
    testkit::assert_ledger_sums(db, domain::treasury::HOUSE.into(), "solana").await;
    assert_books_balance(&rig).await;

    // Nothing more to plan: the swept addresses hold nothing.
    sweeper.tick().await.unwrap();
    assert_eq!(rig.rows().await.len(), 2);

    // A merchant payout paid from the swept USDC, no manual step; its fee and the recipient's
    // token account's rent are the house's (`payout_gas`), and the books still balance.
    testkit::auto_approve_payouts_merchant_pays(db, l.merchant, Environment::Live).await;
    let to = destination(0x42);
    let body = json!({"currency": "USDC", "network": "solana", "amount": "5", "destination": to});
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
        node.produce(1).await;
        node.finalize().await;
    }
    assert_eq!(node.token_units(&to).await, 5_000_000);
    assert_eq!(node.token_units(&hot_wallet()).await, 7_500_000);
    let gas = house_entries(db).await.into_iter().filter(|(_, t, _)| *t == EntryType::PayoutGas).collect::<Vec<_>>();
    assert_eq!(gas, vec![("solana".into(), EntryType::PayoutGas, d("-0.00204428"))], "fee and the new account's rent");
    assert_books_balance(&rig).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_sweep_fails_once_its_blockhash_expired_and_the_address_is_swept_again_once() {
    let rig = SolRig::start().await;
    let (l, node) = (&rig.l, &rig.l.node);
    let sweeper = rig.sweeper();
    // Planned, then signed, stored and sent to a node that loses what it is sent.
    node.set("losing", json!(true)).await;
    sweeper.tick().await.unwrap();
    sweeper.tick().await.unwrap();
    let lost = rig.rows().await;
    assert_eq!(lost.len(), 2);
    assert!(lost.iter().all(|s| s.status == SweepStatus::Sending && s.signed_tx.is_some()), "{lost:?}");

    // Its blockhash is past its last valid height, but not yet at finalized: sent again, the same bytes.
    node.produce(VALIDITY as usize + 1).await;
    sweeper.tick().await.unwrap();
    assert_eq!(rig.rows().await, lost, "not judged before finalized");
    node.finalize().await;
    node.set("losing", json!(false)).await;
    sweeper.tick().await.unwrap();
    // Failed, nothing moved, and planned again in the same round.
    let rows = rig.rows().await;
    let failed: Vec<_> = rows.iter().filter(|s| s.status == SweepStatus::Failed).collect();
    assert_eq!(failed.iter().map(|s| s.id).collect::<Vec<_>>(), lost.iter().map(|s| s.id).collect::<Vec<_>>());
    assert!(failed.iter().all(|s| s.failure_reason.as_deref().unwrap().contains("expired")), "{failed:?}");
    assert_eq!(rows.iter().filter(|s| s.status == SweepStatus::Planned).count(), 2, "{rows:?}");
    assert_eq!(node.lamports(&rig.sol_address).await, 1_500_000_000, "nothing moved");

    // The addresses are planned again and swept once.
    let rows = rig.swept(&sweeper, 2).await;
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|s| lost.iter().all(|f| f.tx_hash != s.tx_hash)), "signed anew");
    assert_eq!(node.lamports(&rig.sol_address).await, 0);
    assert_eq!(node.token_units(&hot_wallet()).await, 12_500_000, "swept once");
    assert_eq!(node.lamports(&hot_wallet()).await, HOT_LAMPORTS + 1_499_995_000 + TOKEN_ACCOUNT_RENT - 10_000);
    assert_eq!(l.balance("solana_usdc").await, (d("12.5"), d("0")));
    assert_books_balance(&rig).await;
}
