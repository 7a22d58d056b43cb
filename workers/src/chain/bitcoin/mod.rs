//! Live Bitcoin (`bitcoin`) over Bitcoin Core's JSON-RPC. The watch set lives in our database,
//! not in a node wallet: the scanner reads whole blocks and matches every output's script to the
//! invoice and static addresses through the `address_key` lookups, so the node needs no wallet
//! (Bitcoin Core 30 has no legacy wallets; block reading runs the same everywhere) but does need
//! `txindex=1` for the tracker's look-ups.
//!
//! - Blocks: `getblockhash` then `getblock <hash> 2`; each transaction's outputs are decoded from
//!   its raw `hex` with the `bitcoin` crate (exact satoshis, never the JSON float `value`), and
//!   matched by `scriptPubKey`: the script is turned into the mainnet address invoices store, so
//!   the node's own address format (`addresses[]` in old nodes, `address` in new ones, another
//!   HRP on Litecoin's regtest) does not matter. Coinbase outputs are not deposits.
//! - Reorganisations: the adapter remembers the hash of each block it read; a scan first walks
//!   back over the heights whose hash changed and reads them again, on top of a fixed
//!   `rescan_blocks` window. Payments are unique per transaction and output, so nothing twice.
//! - Mempool: each scan also reads the transactions that entered the mempool since the last one
//!   (`getrawmempool`, then `getrawtransaction` for the new ones); a deposit among them is
//!   recorded with 0 confirmations (the invoice shows `confirming`). The first look only takes
//!   note of what is there (a node's mempool can hold 100k transactions); those are seen when
//!   mined.
//! - Confirmations: `getrawtransaction <txid> true` answers `confirmations` for a transaction on
//!   the active chain; one back in the mempool is unconfirmed (0); one the node no longer knows,
//!   or only knows in a block that left the active chain, is `Gone`, which the tracker turns into
//!   a reversal only after it stayed gone over the gate's span and minimum checks. "Not found"
//!   counts only from a node with a synced transaction index (`getindexinfo`): without one
//!   every mined transaction is "not found", so the answer is an error instead, and nothing is
//!   reversed.

pub mod deposits;
pub mod wallet;

use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use bitcoin::consensus::encode::deserialize_hex;
use bitcoin::{Address, Network, ScriptBuf, Transaction};
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::evm::Rpc;
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus};
use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::config::BitcoinConfig;
use domain::gates::{self, Gate};

/// `RPC_INVALID_ADDRESS_OR_KEY`: "No such mempool or blockchain transaction".
const NOT_FOUND: &[i64] = &[-5];
/// Block hashes remembered for finding where a reorganisation forked.
const REMEMBERED_BLOCKS: usize = 200;

pub struct BitcoinChain {
    gate: &'static Gate,
    rpc: Rpc,
    /// The same node with `wallet_scan_timeout_ms`: `scantxoutset` reads the whole UTXO set.
    scan_rpc: Rpc,
    rescan: u64,
    mempool: bool,
    /// Height → hash of the blocks read lately.
    read: Mutex<BTreeMap<u64, String>>,
    /// The mempool's transaction ids at the last look; `None` before the first.
    in_mempool: Mutex<Option<HashSet<String>>>,
    /// Set once the node showed a synced transaction index (`getindexinfo`).
    txindex_ok: std::sync::atomic::AtomicBool,
}

/// The live Bitcoin chain configured in `cfg` (`[bitcoin]`): none when no node is set.
pub fn chains(cfg: &BitcoinConfig) -> Vec<Arc<dyn Chain>> {
    if !cfg.configured() {
        return Vec::new();
    }
    let (scan_rpc, rpc) = (rpc(cfg, cfg.wallet_scan_timeout_ms), rpc(cfg, cfg.request_timeout_ms));
    let Some(gate) = gates::GATES.iter().find(|g| g.family == AddressFamily::Bitcoin) else { return Vec::new() };
    vec![Arc::new(BitcoinChain {
        gate,
        rpc,
        scan_rpc,
        rescan: cfg.rescan_blocks,
        mempool: cfg.mempool,
        read: Mutex::new(BTreeMap::new()),
        in_mempool: Mutex::new(None),
        txindex_ok: std::sync::atomic::AtomicBool::new(false),
    })]
}

/// The node's JSON-RPC endpoint with `cfg`'s credentials, retries and this call timeout.
fn rpc(cfg: &BitcoinConfig, timeout_ms: u64) -> Rpc {
    let rpc = Rpc::with("Bitcoin RPC", &cfg.rpc_url, timeout_ms, cfg.max_retries, cfg.retry_backoff_ms);
    match &cfg.rpc_user {
        Some(user) => rpc.with_basic_auth(user, cfg.rpc_password.as_ref().map(|p| p.0.as_str())),
        None => rpc,
    }
}

fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in Bitcoin RPC answer: {v}"))
}

/// The deposits `tx` makes: each output whose script is a mainnet address, keyed as invoices
/// are. `height` is the block's (or, for the mempool, the next block's).
pub fn outputs(tx: &Transaction, height: u64) -> Vec<Transfer> {
    if tx.is_coinbase() {
        return Vec::new();
    }
    let txid = tx.compute_txid().to_string();
    let mut out = Vec::new();
    for (index, o) in tx.output.iter().enumerate() {
        let sats = o.value.to_sat();
        if sats == 0 {
            continue;
        }
        let Ok(address) = Address::from_script(&o.script_pubkey, Network::Bitcoin) else { continue };
        let (Ok(amount), Ok(output_index)) = (i64::try_from(sats), i64::try_from(index)) else { continue };
        out.push(Transfer {
            tx_hash: txid.clone(),
            output_index,
            address_key: address_key(AddressFamily::Bitcoin, &address.to_string(), None),
            amount: Decimal::new(amount, 8).normalize(),
            block_height: height,
        });
    }
    out
}

/// The output script of a mainnet Bitcoin address (the form invoices store), whatever network
/// the node runs: `scantxoutset` is asked by script, so a regtest node finds it too.
pub fn address_script(address: &str) -> Result<ScriptBuf, ChainError> {
    let parsed = Address::from_str(address)
        .and_then(|a| a.require_network(Network::Bitcoin))
        .map_err(|e| ChainError::Unavailable(format!("not a Bitcoin address {address:?}: {e}")))?;
    Ok(parsed.script_pubkey())
}

/// The satoshis of a `scantxoutset` answer's unspent outputs summed per script of `scripts` (in
/// their order), each amount read exactly from its decimal text.
pub fn unspent_sums(scan: &Value, scripts: &[ScriptBuf]) -> Result<Vec<u64>, ChainError> {
    let unspents = scan["unspents"].as_array().ok_or_else(|| bad("scantxoutset", scan))?;
    let mut sums = vec![0u64; scripts.len()];
    for u in unspents {
        let script = u["scriptPubKey"].as_str().ok_or_else(|| bad("unspent output", u))?;
        let sats = wallet::sats(&u["amount"]).ok_or_else(|| bad("unspent output amount", u))?;
        for (i, s) in scripts.iter().enumerate() {
            if s.to_hex_string().eq_ignore_ascii_case(script) {
                sums[i] = sums[i].checked_add(sats).ok_or_else(|| bad("unspent output total", u))?;
            }
        }
    }
    Ok(sums)
}

/// A `getindexinfo txindex` answer: the index exists and is synced, or why a missing
/// transaction cannot be told from one the node cannot look up.
pub fn check_txindex(info: &Value) -> Result<(), ChainError> {
    match info.get("txindex") {
        None => Err(ChainError::Unavailable(
            "the Bitcoin node has no transaction index: restart it with txindex=1 (until then no \
             payment is judged missing)"
                .into(),
        )),
        Some(t) if t["synced"] != true => Err(ChainError::Unavailable(format!(
            "the Bitcoin node's transaction index is still being built (at block {}); no payment is judged missing \
             until it is synced",
            t["best_block_height"]
        ))),
        Some(_) => Ok(()),
    }
}

/// The deposits of one `getblock <hash> 2` answer.
pub fn block_outputs(block: &Value, height: u64) -> Result<Vec<Transfer>, ChainError> {
    let txs = block["tx"].as_array().ok_or_else(|| bad("block", block))?;
    let mut out = Vec::new();
    for tx in txs {
        out.extend(outputs(&decode(&tx["hex"])?, height));
    }
    Ok(out)
}

fn decode(hex: &Value) -> Result<Transaction, ChainError> {
    let s = hex.as_str().ok_or_else(|| bad("transaction hex", hex))?;
    deserialize_hex(s).map_err(|e| ChainError::Unavailable(format!("undecodable transaction from the node: {e}")))
}

impl BitcoinChain {
    async fn block_hash(&self, height: u64) -> Result<String, ChainError> {
        let v = self.rpc.call("getblockhash", json!([height])).await?;
        v.as_str().map(str::to_owned).ok_or_else(|| bad("block hash", &v))
    }

    /// The first height to read for a scan from `from`: the rescan window, extended down over
    /// every remembered block whose hash the node no longer has at its height.
    async fn fork_point(&self, from: u64) -> Result<u64, ChainError> {
        let mut start = from.saturating_sub(self.rescan).max(1);
        loop {
            let Some(below) = start.checked_sub(1).filter(|h| *h >= 1) else { return Ok(start) };
            let remembered = self.read.lock().expect("block hashes").get(&below).cloned();
            let Some(remembered) = remembered else { return Ok(start) };
            if self.block_hash(below).await? == remembered {
                return Ok(start);
            }
            tracing::info!(height = below, "block replaced by a reorganisation; reading it again");
            start = below;
        }
    }

    /// Whether "no such transaction" from this node means the transaction is not on the chain:
    /// only with a synced transaction index. Without one, `getrawtransaction` cannot find any
    /// mined transaction outside the mempool, so every deposit would look missing and be
    /// reversed after the gone span: the answer is then an error (retried, never `Gone`).
    async fn require_txindex(&self) -> Result<(), ChainError> {
        use std::sync::atomic::Ordering;
        if self.txindex_ok.load(Ordering::Relaxed) {
            return Ok(());
        }
        let info = self.rpc.call("getindexinfo", json!(["txindex"])).await?;
        check_txindex(&info)?;
        self.txindex_ok.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Satoshis held by each of `scripts` (in their order) in the node's UTXO set, from one
    /// `scantxoutset` over their `raw(…)` descriptors. The UTXO set holds only outputs in
    /// blocks: the mempool is never counted.
    async fn unspent_sats(&self, scripts: &[ScriptBuf]) -> Result<Vec<u64>, ChainError> {
        let descriptors: Vec<Value> =
            scripts.iter().map(|s| json!({"desc": format!("raw({})", s.to_hex_string())})).collect();
        let scan = self.scan_rpc.call("scantxoutset", json!(["start", descriptors])).await?;
        if scan["success"] != true {
            return Err(ChainError::Unavailable(format!("bitcoin: scantxoutset did not complete: {scan}")));
        }
        unspent_sums(&scan, scripts)
    }

    fn remember(&self, height: u64, hash: String) {
        let mut read = self.read.lock().expect("block hashes");
        read.insert(height, hash);
        while read.len() > REMEMBERED_BLOCKS {
            read.pop_first();
        }
    }
}

#[async_trait::async_trait]
impl Chain for BitcoinChain {
    fn gate(&self) -> &'static Gate {
        self.gate
    }

    async fn tip(&self) -> Result<u64, ChainError> {
        let v = self.rpc.call("getblockcount", json!([])).await?;
        v.as_u64().ok_or_else(|| bad("block count", &v))
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let start = self.fork_point(from).await?.min(to);
        let mut out = Vec::new();
        for height in start..=to {
            let hash = self.block_hash(height).await?;
            let block = self.rpc.call("getblock", json!([hash, 2])).await?;
            out.extend(block_outputs(&block, height)?);
            self.remember(height, hash);
        }
        Ok(out)
    }

    async fn pending(&self) -> Result<Vec<Transfer>, ChainError> {
        if !self.mempool {
            return Ok(Vec::new());
        }
        let v = self.rpc.call("getrawmempool", json!([])).await?;
        let now: HashSet<String> = v
            .as_array()
            .ok_or_else(|| bad("mempool", &v))?
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        let before = self.in_mempool.lock().expect("mempool").clone();
        let new: Vec<&String> = match &before {
            Some(before) => now.difference(before).collect(),
            None => Vec::new(),
        };
        let mut out = Vec::new();
        let tip = if new.is_empty() { 0 } else { self.tip().await? };
        for txid in new {
            // Mined or evicted since the list was taken: the block scan (or nobody) has it.
            let Some(hex) = self.rpc.call_or_none("getrawtransaction", json!([txid, false]), NOT_FOUND).await? else {
                continue;
            };
            out.extend(outputs(&decode(&hex)?, tip + 1));
        }
        // Only once every new transaction was read: a failed look is taken again next time.
        *self.in_mempool.lock().expect("mempool") = Some(now);
        Ok(out)
    }

    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        self.balances(&[address]).await.pop().unwrap_or_else(|| Err(bad("balance", &json!(address))))
    }

    /// One `scantxoutset` for every address (a scan reads the whole UTXO set, so asking them
    /// one by one would read it once per address); an address that is not a mainnet Bitcoin
    /// address fails alone, a failed scan fails them all.
    async fn balances(&self, addresses: &[&str]) -> Vec<Result<Decimal, ChainError>> {
        let parsed: Vec<Result<ScriptBuf, ChainError>> = addresses.iter().map(|a| address_script(a)).collect();
        let mut scripts: Vec<ScriptBuf> = Vec::new();
        for s in parsed.iter().flatten() {
            if !scripts.contains(s) {
                scripts.push(s.clone());
            }
        }
        let sums = if scripts.is_empty() { Ok(Vec::new()) } else { self.unspent_sats(&scripts).await };
        parsed
            .into_iter()
            .map(|script| {
                let script = script?;
                let sums = sums.as_ref().map_err(|e| ChainError::Unavailable(e.to_string()))?;
                let sats = scripts.iter().position(|s| *s == script).map_or(0, |i| sums[i]);
                i64::try_from(sats)
                    .ok()
                    .and_then(|s| Decimal::try_from_i128_with_scale(i128::from(s), self.gate.decimals).ok())
                    .map(|d| d.normalize())
                    .ok_or_else(|| bad("balance", &json!(sats)))
            })
            .collect()
    }

    /// `testmempoolaccept` first (a refusal comes with its reason, nothing sent), then
    /// `sendrawtransaction`.
    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let test = self.rpc.call("testmempoolaccept", json!([[tx.raw]])).await?;
        let verdict = test.get(0).ok_or_else(|| bad("testmempoolaccept", &test))?;
        if verdict["allowed"] != true {
            let reason = verdict["reject-reason"].as_str().unwrap_or("refused");
            return Ok(classify_refusal(reason));
        }
        match self.rpc.once("sendrawtransaction", &json!([tx.raw])).await {
            Ok(_) => Ok(Broadcast::Accepted),
            // Between the test and the send something changed (the transaction arrived from
            // elsewhere, a conflicting one did): the node's reason decides, as above.
            Err(e) => match classify_refusal(&e) {
                Broadcast::Rejected(_) => Err(ChainError::Unavailable(e)),
                known => Ok(known),
            },
        }
    }

    /// Where a payout transaction stands: unknown to the node (never sent, dropped, or only in
    /// a block a reorganisation left behind), in the mempool, or in a block with its
    /// confirmations; at the gate's depth also the fee it paid (its inputs less its outputs,
    /// read exactly: one look-up per input, made only when the payout can complete).
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let tx_hash = tx.tx_hash.as_str();
        let Some(v) = self.rpc.call_or_none("getrawtransaction", json!([tx_hash, true]), NOT_FOUND).await? else {
            self.require_txindex().await?;
            return Ok(Outgoing::Unknown);
        };
        if v.get("blockhash").is_none() {
            return Ok(Outgoing::Confirmations { confirmations: 0, fee: None });
        }
        let Some(confirmations) = v["confirmations"].as_u64().filter(|n| *n > 0) else {
            return Ok(Outgoing::Unknown);
        };
        if confirmations < u64::from(self.gate.confirmations) {
            return Ok(Outgoing::Confirmations { confirmations, fee: None });
        }
        let tx = decode(&v["hex"])?;
        let mut inputs = 0u64;
        for i in &tx.input {
            let prev = self.rpc.call("getrawtransaction", json!([i.previous_output.txid.to_string(), false])).await?;
            let prev = decode(&prev)?;
            let out = prev.output.get(i.previous_output.vout as usize).ok_or_else(|| bad("previous output", &v))?;
            inputs = inputs.saturating_add(out.value.to_sat());
        }
        let outputs: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
        let fee = inputs.checked_sub(outputs).and_then(|f| i64::try_from(f).ok()).ok_or_else(|| bad("fee", &v))?;
        Ok(Outgoing::Confirmations { confirmations, fee: Some(Decimal::new(fee, 8).normalize()) })
    }

    /// Dead once unknown to the node while one of its inputs was spent by another transaction
    /// in a block at least the gate's confirmation count deep (double-spent): the UTXO set no
    /// longer has the input (`gettxout`, mempool left out), and no block younger than that depth
    /// spends it.
    async fn dead(&self, tx: &SignedTx) -> Result<Option<String>, ChainError> {
        if self.outgoing(tx).await? != Outgoing::Unknown {
            return Ok(None);
        }
        let ours = decode(&json!(tx.raw))?;
        let mut spent = Vec::new();
        for i in &ours.input {
            let o = i.previous_output;
            let out = self.rpc.call("gettxout", json!([o.txid.to_string(), o.vout, false])).await?;
            if out.is_null() {
                spent.push(o);
            }
        }
        let Some(first) = spent.first().copied() else { return Ok(None) };
        let tip = self.tip().await?;
        let young = u64::from(self.gate.confirmations).saturating_sub(1);
        for height in tip.saturating_sub(young).saturating_add(1)..=tip {
            let hash = self.block_hash(height).await?;
            let block = self.rpc.call("getblock", json!([hash, 2])).await?;
            let txs = block["tx"].as_array().ok_or_else(|| bad("getblock", &block))?;
            for t in txs {
                let t = decode(&t["hex"])?;
                if t.input.iter().any(|i| spent.contains(&i.previous_output)) {
                    // Spent, but not deep enough yet: a reorganisation could undo it.
                    return Ok(None);
                }
            }
        }
        Ok(Some(format!(
            "double-spent: its input {}:{} was spent by another transaction at least {} blocks deep",
            first.txid, first.vout, self.gate.confirmations
        )))
    }

    async fn status(&self, tx_hash: &str, _output_index: i64, _seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let Some(tx) = self.rpc.call_or_none("getrawtransaction", json!([tx_hash, true]), NOT_FOUND).await? else {
            // Missing only if the node could have found it.
            self.require_txindex().await?;
            return Ok(TxStatus::Gone);
        };
        if tx.get("blockhash").is_none() {
            // In the mempool (the node looks there first): unconfirmed.
            return Ok(TxStatus::Confirmations(0));
        }
        // In a block: confirmations on the active chain, 0 (or none) for a block a
        // reorganisation left behind, the transaction not in the mempool either.
        match tx["confirmations"].as_u64() {
            Some(n) if n > 0 => Ok(TxStatus::Confirmations(n)),
            _ => Ok(TxStatus::Gone),
        }
    }
}

/// What a node's refusal of a transaction (`reject-reason`, or a `sendrawtransaction` error)
/// means for a payout. `Rejected`, after which the payout fails and its funds are released, only
/// for reasons that make this very transaction invalid for good (bad signature, dust, an amount
/// or size out of bounds, a fee the node refuses as absurd); a missing or spent input, a
/// conflict, a fee below the market or a full mempool can pass or need an operator: `Retry`,
/// the signed transaction kept and sent again.
pub fn classify_refusal(reason: &str) -> Broadcast {
    const KNOWN: &[&str] =
        &["txn-already-in-mempool", "txn-already-known", "already in block chain", "already in utxo set"];
    const INVALID: &[&str] = &[
        "mandatory-script-verify-flag",
        "non-mandatory-script-verify-flag",
        "dust",
        "scriptpubkey",
        "bad-txns-in-belowout",
        "bad-txns-vout",
        "bad-txns-oversize",
        "bad-txns-nonstandard-inputs",
        "bad-witness",
        "tx-size",
        "version",
        "multi-op-return",
        "absurdly-high-fee",
        "max-fee-exceeded",
    ];
    if KNOWN.iter().any(|k| reason.contains(k)) {
        Broadcast::AlreadyKnown
    } else if INVALID.iter().any(|k| reason.contains(k)) {
        Broadcast::Rejected(format!("bitcoin: {reason}"))
    } else {
        Broadcast::Retry(format!("bitcoin: {reason}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_is_summed_per_script_exactly_and_foreign_addresses_fail_alone() {
        let a = address_script("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq").unwrap();
        let b = address_script("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2").unwrap();
        let none = address_script("bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4").unwrap();
        assert!(address_script("tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx").is_err(), "testnet");
        assert!(address_script("0x00000000000000000000000000000000000000ab").is_err());
        let unspent = |script: &ScriptBuf, amount: &str| {
            serde_json::from_str::<Value>(&format!(
                r#"{{"txid": "{}", "vout": 0, "scriptPubKey": "{}", "amount": {amount}}}"#,
                "ab".repeat(32),
                script.to_hex_string()
            ))
            .unwrap()
        };
        let scan = json!({"success": true, "unspents": [
            unspent(&a, "20999999.99999999"), unspent(&b, "0.1"), unspent(&a, "0.00000001"), unspent(&b, "0.2"),
        ]});
        assert_eq!(unspent_sums(&scan, &[a, b, none]).unwrap(), vec![2_100_000_000_000_000, 30_000_000, 0]);
    }

    /// A mainnet transaction paying 0.015 BTC to a P2WPKH output and change to a P2PKH one
    /// (built below from its parts, so the test states exactly what it holds).
    fn tx(outputs: &[(u64, &str)]) -> Transaction {
        use bitcoin::{Amount, OutPoint, Sequence, TxIn, TxOut, Witness, absolute::LockTime, transaction::Version};
        Transaction {
            version: Version::TWO,
            lock_time: LockTime::ZERO,
            input: vec![TxIn {
                previous_output: OutPoint { txid: "aa".repeat(32).parse().unwrap(), vout: 0 },
                script_sig: Default::default(),
                sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                witness: Witness::default(),
            }],
            output: outputs
                .iter()
                .map(|(sats, addr)| TxOut {
                    value: Amount::from_sat(*sats),
                    script_pubkey: addr
                        .parse::<Address<bitcoin::address::NetworkUnchecked>>()
                        .unwrap()
                        .assume_checked()
                        .script_pubkey(),
                })
                .collect(),
        }
    }

    const SEGWIT: &str = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";
    const LEGACY: &str = "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2";

    #[test]
    fn every_output_is_a_deposit_keyed_by_its_mainnet_address_in_exact_satoshis() {
        let t = tx(&[(1_500_000, SEGWIT), (2_099_999_999_999_999, LEGACY), (0, SEGWIT)]);
        let got = outputs(&t, 7);
        assert_eq!(got.len(), 2, "a zero-value output is no deposit");
        assert_eq!(got[0].address_key, address_key(AddressFamily::Bitcoin, SEGWIT, None));
        assert_eq!(got[0].amount.to_string(), "0.015");
        assert_eq!((got[0].output_index, got[0].block_height), (0, 7));
        assert_eq!(got[1].amount.to_string(), "20999999.99999999", "no float rounding");
        assert_eq!(got[1].output_index, 1);
        assert_eq!(got[0].tx_hash, t.compute_txid().to_string());
    }

    #[test]
    fn a_block_answer_is_decoded_from_each_transactions_hex_and_coinbases_are_skipped() {
        let paying = tx(&[(42, SEGWIT)]);
        let mut coinbase = tx(&[(5_000_000_000, SEGWIT)]);
        coinbase.input[0].previous_output = bitcoin::OutPoint::null();
        let hex = |t: &Transaction| bitcoin::consensus::encode::serialize_hex(t);
        // The float `value` the node also sends is ignored.
        let block = json!({"tx": [
            {"txid": coinbase.compute_txid().to_string(), "hex": hex(&coinbase), "vout": [{"value": 50.0}]},
            {"txid": paying.compute_txid().to_string(), "hex": hex(&paying), "vout": [{"value": 0.00000041}]},
        ]});
        let got = block_outputs(&block, 3).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].amount.to_string(), "0.00000042");
        assert!(block_outputs(&json!({"tx": [{"hex": "zz"}]}), 3).is_err());
    }

    #[test]
    fn only_reasons_that_make_the_transaction_invalid_fail_a_payout() {
        for known in ["txn-already-in-mempool", "txn-already-known", "Transaction already in block chain"] {
            assert_eq!(classify_refusal(known), Broadcast::AlreadyKnown, "{known}");
        }
        for invalid in ["mandatory-script-verify-flag-failed (Signature must be zero)", "dust", "bad-txns-in-belowout"]
        {
            assert!(matches!(classify_refusal(invalid), Broadcast::Rejected(_)), "{invalid}");
        }
        for passing in [
            "bad-txns-inputs-missingorspent",
            "missing-inputs",
            "txn-mempool-conflict",
            "min relay fee not met",
            "mempool min fee not met",
            "mempool full",
            "non-final",
            "insufficient fee",
        ] {
            assert!(matches!(classify_refusal(passing), Broadcast::Retry(_)), "{passing}");
        }
    }

    #[test]
    fn not_found_counts_only_from_a_node_with_a_synced_transaction_index() {
        assert!(check_txindex(&json!({"txindex": {"synced": true, "best_block_height": 7}})).is_ok());
        let building = check_txindex(&json!({"txindex": {"synced": false, "best_block_height": 7}})).unwrap_err();
        assert!(building.to_string().contains("still being built"), "{building}");
        let none = check_txindex(&json!({})).unwrap_err();
        assert!(none.to_string().contains("txindex=1"), "{none}");
    }
}
