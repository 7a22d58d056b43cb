//! The Solana adapter and hot wallet against real programs: solders' LiteSVM behind a small
//! JSON-RPC shim (`support/solana_shim.py`, started per test), which executes every transaction
//! against the real System, SPL Token and Associated Token Account programs and answers the
//! adapter's calls from what really happened (balances and token balances before and after).
//! Run with `--features litesvm-tests` and `pip install solders==0.29.0` (`.ci/run` does both).
//!
//! - a SOL and a USDC deposit (the USDC into the pool address's associated token account) are
//!   `confirming` when confirmed and credited once when finalized, with the exact ledger; one
//!   confirmed on a fork that is dropped is reversed only after the blockhash's 151 slots;
//! - a SOL payout and a USDC payout to an owner without a token account complete when
//!   finalized: the recipient holds exactly the amount, the token account was created, and the
//!   hot wallet paid exactly the amounts, two fees, one priority fee and one token account's
//!   rent; the
//!   recipient's token account given as a destination is refused before anything is signed;
//! - a payout whose transaction was dropped is signed again once its blockhash expired at
//!   finalized, and the recipient is paid once;
//! - a USDC payout into a token account the issuer froze is refused by the real SPL Token
//!   program's simulation (`AccountFrozen`) and fails, its funds released; one the hot wallet
//!   cannot cover (`InsufficientFunds`) waits and goes through once it is funded;
//! - SOL and USDC balances, a missing token account holding 0.
#![cfg(feature = "litesvm-tests")]

use crate::support::litesvm::LiteSvm;
use crate::support::live::{Live, d};
use crate::support::payouts::Payouts;
use crate::support::solana_node::VALIDITY;
use crate::support::solana_payouts::{destination, keypair};
use entity::{PaymentStatus, PayoutStatus};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use workers::chain::signer::Signers;
use workers::chain::solana::tx::{address as address_of, associated_token_account, pubkey};

const POOL: [&str; 3] = [
    "4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi",
    "8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR",
    "GgBaCs3NCBuZN12kCJgAW63ydqohFkHEdfdEXBPzLHq",
];
/// Rent-exempt minimum of a token account (165 bytes).
const TOKEN_ACCOUNT_RENT: u64 = 2_039_280;

/// The shim with its USDC mint (6 decimals) and a live app watching it, payouts signed with a
/// priority fee of `priority` micro-lamports per compute unit.
async fn live(priority: u64) -> Live<LiteSvm> {
    let node = LiteSvm::start().await;
    let mint = node.call("shim_createMint", json!([6])).await.as_str().unwrap().to_owned();
    Live::start(node, &["solana", "solana_usdc"], |c, url| {
        (c.solana.rpc_url, c.solana.max_retries, c.solana.retry_backoff_ms) = (url, 1, 10);
        c.solana.usdc_mint = Some(mint);
        c.solana.hot_wallet_key = Some(domain::config::Redacted(keypair()));
        c.solana.priority_fee_micro_lamports = priority;
        c.addresses.live.solana_pool = POOL.iter().map(|a| (*a).to_owned()).collect();
    })
    .await
}

fn address(inv: &Value) -> String {
    inv["deposit_address"].as_str().unwrap().to_owned()
}

fn hot_wallet() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    bs58::encode(key.verifying_key().as_bytes()).into_string()
}

#[tokio::test]
async fn real_deposits_confirm_when_finalized_and_one_dropped_from_a_fork_is_reversed() {
    let l = live(0).await;
    let a = l.invoice(json!({"currency": "SOL", "amount": "1.5"})).await;
    let b = l.invoice(json!({"currency": "USDC", "network": "solana", "amount": "12.5"})).await;
    l.node.call("shim_paySol", json!([address(&a), 1_500_000_000u64])).await;
    l.node.call("shim_payToken", json!([address(&b), 12_500_000u64])).await;
    assert_eq!(l.node.token_units(&address(&b)).await, 12_500_000, "in the pool address's token account");
    l.step_over(1).await;
    assert_eq!((l.status(&a).await, l.status(&b).await), ("confirming".into(), "confirming".into()));
    assert_eq!(l.balance("solana").await, (d("0"), d("1.5")));
    l.node.finalize().await;
    l.step().await;
    assert_eq!((l.status(&a).await, l.status(&b).await), ("paid".into(), "paid".into()));
    assert_eq!(l.balance("solana").await, (d("1.5"), d("0")));
    assert_eq!(l.balance("solana_usdc").await, (d("12.5"), d("0")));
    l.step_over(3).await;
    assert_eq!((l.credits(&a).await, l.credits(&b).await), (1, 1));

    // Confirmed on a fork the cluster then abandons: its accounts are as before.
    let c = l.invoice(json!({"currency": "SOL", "amount": "1"})).await;
    l.node.set("fork", json!(true)).await;
    l.node.call("shim_paySol", json!([address(&c), 1_000_000_000u64])).await;
    l.step().await;
    assert_eq!(l.status(&c).await, "confirming");
    l.node.call("shim_dropFork", json!([])).await;
    assert_eq!(l.node.lamports(&address(&c)).await, 0);
    l.step_over(3).await;
    assert_eq!(l.status(&c).await, "confirming", "a dropped transaction may land for 150 slots");
    for _ in 0..3 {
        l.node.produce(60).await;
        l.step().await;
    }
    assert_eq!(l.payment(&c).await.status, PaymentStatus::Reversed);
    assert_eq!(l.status(&c).await, "pending");
    assert_eq!(l.balance("solana").await, (d("1.5"), d("0")));
    l.assert_ledger_sums().await;
}

async fn payouts(priority: u64) -> Payouts<LiteSvm> {
    let live = live(priority).await;
    live.node.call("shim_fund", json!([hot_wallet(), 10_000_000_000u64])).await;
    live.node.call("shim_mintTo", json!([hot_wallet(), 100_000_000u64])).await;
    let signers = |cfg: &domain::config::Config| Signers::default().with_solana(&cfg.solana).unwrap();
    Payouts::start(live, &[("solana", "10"), ("solana_usdc", "100")], signers).await
}

async fn payout(x: &Payouts<LiteSvm>, currency: &str, to: &str, amount: &str) -> uuid::Uuid {
    x.payout(json!({"currency": currency, "network": "solana", "amount": amount, "destination": to})).await
}

#[tokio::test]
async fn sol_and_usdc_payouts_run_on_the_real_programs_and_the_hot_wallet_pays_exactly_fees_and_rent() {
    // 50,000 micro-lamports per unit: the USDC payout's 60,000 units cost 3,000 lamports more;
    // the SOL payout's configured fee (5,000 lamports) leaves no room, so it pays none.
    let x = payouts(50_000).await;
    let node = &x.live.node;
    let before = node.lamports(&hot_wallet()).await;
    let (to_sol, to_usdc) = (destination(0x21), destination(0x22));
    let sol = payout(&x, "SOL", &to_sol, "1").await;
    let usdc = payout(&x, "USDC", &to_usdc, "25.5").await;
    let e = x.executor();
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Processing, "confirmed, not finalized");
    }
    node.finalize().await;
    for id in [sol, usdc] {
        e.execute(id).await.unwrap();
        assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    }
    assert_eq!(node.lamports(&to_sol).await, 1_000_000_000);
    assert_eq!(node.token_units(&to_usdc).await, 25_500_000, "its token account created and paid");
    assert_eq!(node.token_units(&hot_wallet()).await, 100_000_000 - 25_500_000);
    assert_eq!(before - node.lamports(&hot_wallet()).await, 1_000_000_000 + 2 * 5_000 + 3_000 + TOKEN_ACCOUNT_RENT);
    assert_eq!(x.row(sol).await.network_fee.0, d("0.000005"), "the fee it paid");
    assert_eq!(x.balance("solana").await, (d("8.999995"), Decimal::ZERO));
    assert_eq!(x.balance("solana_usdc").await, (d("74.49"), Decimal::ZERO));

    // The recipient's token account (not its wallet) given as a destination: the real account
    // is owned by the SPL Token program, so the payout is refused before anything is signed.
    let mint = pubkey(x.live.app.state.config.solana.usdc_mint.as_deref().unwrap()).unwrap();
    let token_account = address_of(&associated_token_account(&pubkey(&to_usdc).unwrap(), &mint));
    let refused = payout(&x, "USDC", &token_account, "5").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!((p.status, p.signed_tx.as_deref()), (PayoutStatus::Failed, None), "never signed");
    assert!(p.failure_reason.as_deref().unwrap_or("").contains("not a wallet address"), "{p:?}");
    assert_eq!(node.token_units(&to_usdc).await, 25_500_000, "nothing moved");
    assert_eq!(x.balance("solana_usdc").await, (d("74.49"), Decimal::ZERO));
}

#[tokio::test]
async fn a_dropped_payout_is_signed_again_once_its_blockhash_expired_and_paid_once() {
    let x = payouts(0).await;
    let node = &x.live.node;
    let e = x.executor();
    let to = destination(0x31);
    node.set("losing", json!(true)).await;
    let id = payout(&x, "USDC", &to, "5").await;
    e.execute(id).await.unwrap();
    let first = x.row(id).await.tx_hash;
    node.produce(VALIDITY as usize + 1).await;
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.tx_hash, first, "not finalized past it: sent again, not signed again");
    node.finalize().await;
    node.set("losing", json!(false)).await;
    e.execute(id).await.unwrap();
    let again = x.row(id).await.tx_hash;
    assert_ne!(again, first);
    e.execute(id).await.unwrap();
    node.produce(1).await;
    node.finalize().await;
    e.execute(id).await.unwrap();
    assert_eq!(x.row(id).await.status, PayoutStatus::Completed);
    assert_eq!(node.token_units(&to).await, 5_000_000, "paid once");
    assert_eq!(x.balance("solana_usdc").await, (d("94.99"), Decimal::ZERO));
}

#[tokio::test]
async fn a_frozen_recipient_fails_the_payout_and_a_hot_wallet_short_of_usdc_only_delays_one() {
    let x = payouts(50_000).await;
    let node = &x.live.node;
    let e = x.executor();
    let frozen = destination(0x41);
    node.call("shim_freeze", json!([frozen])).await;
    let refused = payout(&x, "USDC", &frozen, "10").await;
    e.execute(refused).await.unwrap();
    let p = x.row(refused).await;
    assert_eq!(p.status, PayoutStatus::Failed, "{p:?}");
    let reason = p.failure_reason.clone().unwrap_or_default();
    assert!(reason.contains("InstructionError") && reason.contains("17"), "{reason}");
    assert_eq!(node.token_units(&frozen).await, 0, "nothing moved");
    assert_eq!(x.balance("solana_usdc").await, (d("100"), Decimal::ZERO), "released exactly");

    // The hot wallet holds 100 USDC on chain: a payout of more waits until it is funded.
    testkit::fund(&x.live.app.state.db, x.live.merchant, entity::Environment::Live, "solana_usdc", "100").await;
    let to = destination(0x42);
    let big = payout(&x, "USDC", &to, "150").await;
    e.execute(big).await.unwrap();
    assert_eq!(x.row(big).await.status, PayoutStatus::Queued, "kept, to be sent again");
    node.call("shim_mintTo", json!([hot_wallet(), 100_000_000u64])).await;
    e.execute(big).await.unwrap();
    e.execute(big).await.unwrap();
    node.finalize().await;
    e.execute(big).await.unwrap();
    assert_eq!(x.row(big).await.status, PayoutStatus::Completed);
    assert_eq!(node.token_units(&to).await, 150_000_000, "paid once");
    assert_eq!(node.token_units(&hot_wallet()).await, 50_000_000);
}

/// SOL from `getBalance` to the lamport; USDC from `getTokenAccountBalance` of the owner's
/// associated token account: 0 when that account does not exist (the cluster's "could not find
/// account") and when it exists empty; each answer in its address's place.
#[tokio::test]
async fn sol_and_usdc_balances_and_a_missing_token_account_holds_nothing() {
    let node = LiteSvm::start().await;
    let mint = node.call("shim_createMint", json!([6])).await.as_str().unwrap().to_owned();
    let cfg = domain::config::SolanaConfig {
        rpc_url: node.url.clone(),
        usdc_mint: Some(mint),
        max_retries: 1,
        retry_backoff_ms: 10,
        ..Default::default()
    };
    let chains = workers::chain::solana::chains(&cfg);
    let gate = |id: &str| chains.iter().find(|c| c.gate().id == id).cloned().unwrap_or_else(|| panic!("no {id}"));
    let (sol, usdc) = (gate("solana"), gate("solana_usdc"));
    let [a, b, c] = POOL;
    assert_eq!(sol.balance(a).await.unwrap(), Decimal::ZERO);
    assert_eq!(usdc.balance(a).await.unwrap(), Decimal::ZERO, "no token account");
    node.call("shim_paySol", json!([a, 1_500_000_001u64])).await;
    node.call("shim_payToken", json!([a, 12_500_000u64])).await;
    // An empty token account (created by the issuer's freeze).
    node.call("shim_freeze", json!([b])).await;
    assert_eq!(node.token_units(b).await, 0);
    assert_eq!(sol.balance(a).await.unwrap(), d("1.500000001"));
    let got = usdc.balances(&[a, b, c, "0OIl"]).await;
    assert_eq!(got[0].as_ref().unwrap(), &d("12.5"));
    assert_eq!(got[1].as_ref().unwrap(), &Decimal::ZERO, "an empty token account");
    assert_eq!(got[2].as_ref().unwrap(), &Decimal::ZERO, "no token account");
    assert!(got[3].is_err(), "not an address: fails alone");
    assert_eq!(node.token_units(a).await, 12_500_000);
}
