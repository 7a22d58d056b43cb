//! The Bitcoin adapter (`bitcoin`) against real node software: Litecoin Core regtest
//! (`support::litecoind`), which speaks Bitcoin Core's JSON-RPC and mines, reorganises and keeps
//! a mempool for real. Payments go to the witness program of the invoice's mainnet `bc1q…`
//! address (the same output script under Litecoin's `rltc` prefix), so the adapter's
//! `scriptPubKey` matching is what finds them. The live pipeline (scanner and tracker rules) runs
//! in the test against one node (two for the double spend):
//!
//! - a deposit in the mempool is `confirming` with 0 confirmations (from the scan that records
//!   it, until it is mined), follows its block, and is credited exactly once at 3
//!   confirmations, with the exact ledger; its tracking ends at 6;
//! - an underpayment; a payment to an address that is not ours credits nothing;
//! - a block disconnected sends its deposit back to the mempool: unconfirmed, never reversed;
//! - a double spend mined on a longer fork reverses the deposit only after the gone span;
//! - a deposit only in a block that replaced one the scanner had read is found by block hash;
//! - a scanner started anew resumes at its cursor and misses no block;
//! - `GET /v1/currencies?environment=live` shows the gate online only with `[bitcoin]` set;
//! - payouts from the hot wallet complete with the exact ledger and the real fee, two executors
//!   racing over them never sign two payouts over one wallet output, and a payout waits for
//!   change to confirm rather than build on an unconfirmed transaction (the crash windows around
//!   broadcast are `bitcoin_payout_crash`);
//! - balances of several addresses from one `scantxoutset`, mined outputs only.
//!
//! Selected with the `regtest-tests` feature (it needs `litecoind`; `.ci/run` installs it).
#![cfg(feature = "regtest-tests")]

use crate::support::litecoind::Litecoind;
use crate::support::live::d;
use entity::PaymentStatus;
use serde_json::{Value, json};
use testkit::TestApp;

type Live = crate::support::live::Live<Litecoind>;

async fn live_with(node: Litecoind, f: impl FnOnce(&mut domain::config::BitcoinConfig)) -> Live {
    let (user, password) = (node.user, node.password);
    Live::start(node, &["bitcoin"], |c, url| {
        c.bitcoin.rpc_user = Some(user.into());
        c.bitcoin.rpc_password = Some(domain::config::Redacted(password.into()));
        (c.bitcoin.rpc_url, c.bitcoin.max_retries, c.bitcoin.retry_backoff_ms) = (url, 1, 10);
        f(&mut c.bitcoin);
    })
    .await
}

async fn live() -> Live {
    live_with(Litecoind::start().await, |_| {}).await
}

fn address(inv: &Value) -> &str {
    inv["deposit_address"].as_str().unwrap()
}

impl Live {
    async fn btc(&self, amount: &str) -> Value {
        let inv = self.invoice(json!({"currency": "BTC", "amount": amount})).await;
        assert!(address(&inv).starts_with("bc1q"), "{inv}");
        inv
    }
}

#[tokio::test]
async fn a_mempool_deposit_is_confirming_then_credited_once_at_3_confirmations() {
    let l = live().await;
    let inv = l.btc("0.5").await;
    let txid = l.node.pay(address(&inv), "0.5").await;
    l.step().await;
    let got = l.get(&inv).await;
    assert_eq!(got["status"], "confirming", "{got}");
    assert_eq!(got["payments"][0]["confirmations"], 0, "in the mempool: 0 confirmations");
    assert_eq!(l.balance("bitcoin").await, (d("0"), d("0.5")));
    let p = l.payment(&inv).await;
    assert_eq!((p.tx_hash.as_str(), p.amount.0), (txid.as_str(), d("0.5")));

    l.step_over(1).await;
    let p = l.payment(&inv).await;
    assert_eq!(p.block_height, Some(l.node.height().await as i64), "the payment follows its block");
    assert_eq!(p.confirmations, 1);
    l.step_over(1).await;
    assert_eq!(l.status(&inv).await, "confirming");
    l.step_over(1).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.balance("bitcoin").await, (d("0.5"), d("0")));
    // Watched to twice its depth; nothing credited twice on the way.
    l.step_over(4).await;
    l.assert_credited_once(&inv).await;
}

/// A deposit seen only in the mempool shows 0 confirmations from the scan that records it, before
/// any tracker look, and while blocks pass without it (a fee too low for the miners); then its
/// block's depth.
#[tokio::test]
async fn a_mempool_deposit_shows_0_confirmations_until_it_is_mined() {
    let l = live().await;
    let inv = l.btc("0.4").await;
    let txid = l.node.pay(address(&inv), "0.4").await;
    l.scan(&l.chains, 100).await;
    let confirmations = async || l.get(&inv).await["payments"][0]["confirmations"].clone();
    assert_eq!(l.status(&inv).await, "confirming");
    assert_eq!(confirmations().await, 0, "in the mempool, before any tracker look");
    l.node.rpc("prioritisetransaction", json!([txid, 0, -100_000_000])).await;
    l.node.mine(2).await;
    l.scan(&l.chains, 100).await;
    assert_eq!(confirmations().await, 0, "two blocks without it");
    l.node.rpc("prioritisetransaction", json!([txid, 0, 200_000_000])).await;
    l.node.mine(1).await;
    l.scan(&l.chains, 100).await;
    assert_eq!(confirmations().await, 1, "in its block");
    assert_eq!(l.payment(&inv).await.block_height, Some(l.node.height().await as i64));
}

/// Tracking ends at the final depth, twice the gate's 3 blocks (a reversal is watched for until
/// there): from then on no job, no hand-over, no look at it again.
#[tokio::test]
async fn tracking_ends_at_twice_the_gates_depth() {
    let l = live().await;
    let inv = l.btc("0.2").await;
    l.node.pay(address(&inv), "0.2").await;
    l.step_over(3).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert!(l.payment(&inv).await.next_check_at.is_some(), "watched for a reversal");
    l.step_over(3).await;
    assert_eq!(l.payment(&inv).await.confirmations, 6);
    l.assert_tracking_ended(&inv, 3).await;
}

#[tokio::test]
async fn an_underpayment_and_outputs_that_are_not_ours_are_told_apart() {
    let l = live().await;
    let short = l.btc("1").await;
    let untouched = l.btc("0.2").await;
    l.node.pay(address(&short), "0.4").await;
    // Someone else's address (the wallet's change is not ours either).
    l.node.pay("bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "0.2").await;
    l.assert_only_underpaid_after(3, (&short, "0.4"), (&untouched, ""), "bitcoin").await;
}

#[tokio::test]
async fn a_disconnected_block_sends_its_deposit_back_to_the_mempool_unconfirmed_not_reversed() {
    let l = live().await;
    let inv = l.btc("0.3").await;
    let txid = l.node.pay(address(&inv), "0.3").await;
    let block = l.node.mine(1).await.remove(0);
    l.step().await;
    assert_eq!(l.payment(&inv).await.confirmations, 1);
    // The block leaves the chain; its transaction goes back to the mempool, kept out of the
    // next blocks (a fee too low for the miners).
    l.node.rpc("invalidateblock", json!([block])).await;
    l.node.rpc("prioritisetransaction", json!([txid, 0, -100_000_000])).await;
    l.step_over(6).await;
    let p = l.payment(&inv).await;
    assert_eq!((p.status, p.confirmations, p.missing_since_height), (PaymentStatus::Confirming, 0, None), "{p:?}");
    // Mined again: confirmed and credited once.
    l.node.rpc("prioritisetransaction", json!([txid, 0, 200_000_000])).await;
    l.step_over(3).await;
    assert_eq!(l.status(&inv).await, "paid");
    assert_eq!(l.credits(&inv).await, 1);
}

#[tokio::test]
async fn a_double_spend_on_a_longer_fork_reverses_the_deposit_only_after_the_gone_span() {
    let a = Litecoind::start().await;
    let b = Litecoind::peer_of(&a).await;
    let l = live_with(a, |_| {}).await;
    let inv = l.btc("0.7").await;
    l.node.isolate().await;
    b.isolate().await;
    // Paid and mined on the scanner's node…
    let txid = l.node.pay(address(&inv), "0.7").await;
    l.step_over(1).await;
    assert_eq!((l.status(&inv).await.as_str(), l.payment(&inv).await.confirmations), ("confirming", 1));
    assert_eq!(l.balance("bitcoin").await, (d("0"), d("0.7")));
    // …while the same coins go elsewhere on a longer fork, which the node then takes.
    let double = l.node.double_spend_of(&txid).await;
    b.rpc("sendrawtransaction", json!([double])).await;
    b.mine(3).await;
    l.node.sync_with(&b).await;
    l.step().await;
    assert_eq!(l.status(&inv).await, "confirming", "one missing answer reverses nothing");
    assert!(l.payment(&inv).await.missing_since_height.is_some());
    // Missing over the gate's 3 blocks and the minimum checks: reversed, once.
    l.step_over(4).await;
    l.assert_reversed_unconfirmed(&inv, "bitcoin").await;
}

#[tokio::test]
async fn a_deposit_only_in_a_replacement_block_is_found_by_block_hash() {
    // No fixed rescan window and no mempool: only the block hashes can find it.
    let l = live_with(Litecoind::start().await, |b| {
        b.rescan_blocks = 0;
        b.mempool = false;
    })
    .await;
    let inv = l.btc("0.25").await;
    let read = l.node.mine(1).await.remove(0);
    l.step().await;
    // The block the scanner read is replaced by one holding the deposit.
    l.node.rpc("invalidateblock", json!([read])).await;
    l.node.pay(address(&inv), "0.25").await;
    let replacement = l.node.height().await + 1;
    l.step_over(1).await;
    assert!(l.live_payments().await.is_empty(), "the cursor is past that height");
    l.step_over(1).await;
    let p = l.payment(&inv).await;
    assert_eq!((p.amount.0, p.block_height), (d("0.25"), Some(replacement as i64)));
}

#[tokio::test]
async fn a_scanner_started_anew_resumes_at_its_cursor_and_misses_no_block() {
    let l = live().await;
    let inv = l.btc("0.1").await;
    // The scanner is down while 60 blocks pass, the deposit among them.
    l.node.mine(30).await;
    l.node.pay(address(&inv), "0.1").await;
    let at = l.node.mine(1).await;
    assert_eq!(at.len(), 1);
    let height = l.node.height().await;
    l.node.mine(29).await;
    l.scan_as_a_new_process().await;
    l.assert_recorded_at_then_paid(&inv, "0.1", height, "30 blocks deep: confirmed at once").await;
    assert_eq!(l.credits(&inv).await, 1);
}

#[tokio::test]
async fn the_live_bitcoin_gate_is_online_only_with_a_node() {
    live().await.assert_online_only_with_a_node(TestApp::spawn().await, Some("BTC")).await;
}

/// A node without a transaction index cannot find a mined transaction outside its mempool: the
/// adapter answers an error for it (the tracker retries), never `Gone`, so no deposit can be
/// reversed because the operator's node lacks `txindex=1`.
#[tokio::test]
async fn a_node_without_a_transaction_index_never_makes_a_deposit_look_missing() {
    use workers::chain::TxStatus;
    let node = Litecoind::start_without_txindex().await;
    let cfg = domain::config::BitcoinConfig {
        rpc_url: node.url.clone(),
        rpc_user: Some(node.user.into()),
        rpc_password: Some(domain::config::Redacted(node.password.into())),
        max_retries: 0,
        retry_backoff_ms: 1,
        ..Default::default()
    };
    let chain = workers::chain::bitcoin::chains(&cfg).remove(0);
    let txid = node.pay("bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", "0.1").await;
    assert_eq!(chain.status(&txid, 0, None).await.unwrap(), TxStatus::Confirmations(0), "in the mempool");
    node.mine(1).await;
    let err = chain.status(&txid, 0, None).await.unwrap_err();
    assert!(err.to_string().contains("txindex=1"), "{err}");
    let unknown = chain.status(&"00".repeat(32), 0, None).await;
    assert!(unknown.is_err(), "not `Gone` without an index: {unknown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_complete_with_the_real_fee_and_two_executors_never_spend_one_output_twice() {
    use crate::support::btc_payouts::{BtcPayouts, destination};
    use std::collections::HashSet;
    // Three wallet outputs for four payouts: the fourth is paid from the first change to confirm.
    let s = BtcPayouts::start(&["0.4", "0.4", "0.4"], "3").await;
    let mut ids = Vec::new();
    let mut sent = Vec::new();
    for i in 0..4u8 {
        let (to, amount) = (destination(0x31 + i), format!("0.1{i}"));
        ids.push(s.payout(&to, &amount).await);
        sent.push((to, amount));
    }
    let rows = s.complete(&[s.executor(), s.executor()], &ids).await;

    let mut spent = HashSet::new();
    let mut fees = rust_decimal::Decimal::ZERO;
    for (p, (to, amount)) in rows.iter().zip(&sent) {
        let tx = s.tx(p.tx_hash.as_deref().unwrap()).await;
        assert_eq!(tx.output[0].script_pubkey, to.script_pubkey());
        assert_eq!(rust_decimal::Decimal::new(tx.output[0].value.to_sat() as i64, 8), d(amount));
        let (fee, ours) = s.fee_of(&tx).await;
        assert!(ours, "only the hot wallet's outputs are spent");
        assert_eq!(p.network_fee.0, fee, "the payout records the fee its transaction paid");
        assert!(fee > rust_decimal::Decimal::ZERO && fee <= p.configured_network_fee_amount.0);
        fees += fee;
        for i in &tx.input {
            assert!(spent.insert(i.previous_output), "output {} spent by two payouts", i.previous_output);
        }
        assert_eq!(s.unspent_to(to).await, [tx.output[0].value.to_sat()], "paid once");
    }
    // The fourth payout spent a change output (of one of the first three payouts).
    let txids: HashSet<String> = rows.iter().map(|p| p.tx_hash.clone().unwrap()).collect();
    assert!(spent.iter().any(|o| txids.contains(&o.txid.to_string())), "{spent:?}");
    let (balance, _) = testkit::assert_ledger_sums(&s.live.app.state.db, s.live.merchant, "bitcoin").await;
    assert_eq!(balance.available.0, d("3") - d("0.46") - fees);
    assert_eq!(balance.reserved.0, rust_decimal::Decimal::ZERO);
}

/// `scantxoutset` reads the node's whole UTXO set (minutes on mainnet): the hot wallet scans once
/// per best block, and a new block (which may confirm new outputs) makes it scan again.
#[tokio::test]
async fn the_hot_wallet_scans_the_utxo_set_once_per_block() {
    use crate::support::btc_payouts::BtcPayouts;
    use workers::chain::signer::Signer;
    let s = BtcPayouts::start(&["0.3"], "1").await;
    let signer =
        workers::chain::bitcoin::wallet::BitcoinSigner::load(&s.live.app.state.config.bitcoin).unwrap().unwrap();
    let first = signer.funding().await.unwrap().unwrap();
    assert_eq!(first.outputs.iter().map(|o| o.sats).collect::<Vec<_>>(), [30_000_000]);
    assert_eq!(signer.funding().await.unwrap().unwrap(), first);
    assert_eq!(signer.scans(), 1, "the same best block: no second scan");
    s.live.node.pay(&s.hot_wallet.to_string(), "0.2").await;
    assert_eq!(signer.funding().await.unwrap().unwrap().outputs.len(), 1, "unconfirmed: not listed");
    s.live.node.mine(1).await;
    let mut sats: Vec<u64> = signer.funding().await.unwrap().unwrap().outputs.iter().map(|o| o.sats).collect();
    sats.sort();
    assert_eq!(sats, [20_000_000, 30_000_000]);
    assert_eq!(signer.scans(), 2);
}

/// Mainnet SegWit address `n` (a P2WPKH program of `n` bytes): the output script the node's
/// `rltc` address pays.
fn segwit_address(n: u8) -> String {
    use bitcoin::bech32::{Fe32, hrp, segwit};
    segwit::encode(hrp::BC, Fe32::Q, &[n; 20]).unwrap()
}

/// Balances from one `scantxoutset` over several addresses, each answer in its address's place:
/// outputs in blocks summed exactly, an output still in the mempool not counted until mined, a
/// foreign address failing alone and a repeated one answered twice.
#[tokio::test]
async fn balances_of_several_addresses_count_their_mined_outputs_only() {
    let node = Litecoind::start().await;
    let cfg = domain::config::BitcoinConfig {
        rpc_url: node.url.clone(),
        rpc_user: Some(node.user.into()),
        rpc_password: Some(domain::config::Redacted(node.password.into())),
        max_retries: 1,
        retry_backoff_ms: 10,
        ..Default::default()
    };
    let chain = workers::chain::bitcoin::chains(&cfg).pop().expect("the bitcoin chain");
    let (a, b, c) = (segwit_address(1), segwit_address(2), segwit_address(3));
    node.pay(&a, "0.5").await;
    node.pay(&a, "0.25000001").await;
    node.pay(&b, "1.2").await;
    node.mine(1).await;
    let waiting = node.pay(&c, "0.3").await;
    node.pay(&a, "0.1").await;
    let mempool = node.rpc("getrawmempool", json!([])).await;
    assert!(mempool.as_array().unwrap().iter().any(|t| t == waiting.as_str()), "{mempool}");
    let got = chain.balances(&[&a, &b, &c, "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx", &a]).await;
    assert_eq!(got[0].as_ref().unwrap(), &d("0.75000001"));
    assert_eq!(got[1].as_ref().unwrap(), &d("1.2"));
    assert_eq!(got[2].as_ref().unwrap(), &d("0"), "only in the mempool");
    assert!(got[3].is_err(), "a testnet address fails alone");
    assert_eq!(got[4].as_ref().unwrap(), &d("0.75000001"));
    node.mine(1).await;
    assert_eq!(chain.balance(&c).await.unwrap(), d("0.3"));
    assert_eq!(chain.balance(&a).await.unwrap(), d("0.85000001"));
}
