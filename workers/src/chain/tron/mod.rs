//! Live TRON (`tron`: TRX, `tron_usdt`: TRC-20 USDT) over the node's HTTP API (java-tron full
//! node or a TronGrid-compatible service): one client shared by both gates.
//!
//! - TRX: the `TransferContract` transactions of each block (`/wallet/getblockbynum`) that
//!   succeeded (`ret[0].contractRet == "SUCCESS"`), to a watched address, with a positive
//!   amount (sun, 6 decimals). TRX moved by contract calls ("internal transactions") is not
//!   seen: documented.
//! - USDT: the TRC-20 `Transfer(address,address,uint256)` logs of the configured contract in
//!   each block's transaction infos (`/wallet/gettransactioninfobyblocknum`) whose receipt
//!   succeeded, one payment per log index: the same log layout as ERC-20.
//! - Confirmations by depth below the node's newest block (`/wallet/getnowblock`); a
//!   transaction the node no longer knows, or whose contract call failed, is `Gone`, which the
//!   tracker turns into a reversal only after it stayed gone over a span of blocks; a known
//!   transaction not yet in a block counts as unconfirmed.
//! - Every scan re-reads `rescan_blocks` blocks before the cursor (a transfer moved into a
//!   replacement block by a short fork is still recorded; payments are unique per transaction
//!   and log index, so nothing twice).
//! - Addresses arrive in the node's hex form (`41` + 20 bytes) and are matched in their base58
//!   form (`T…`), as invoices store them.
//! - Payouts (`wallet`: the hot wallet's signer; `tx`: the protobuf; `send`: what a broadcast
//!   answer means): `/wallet/broadcasthex` sends the signed bytes as they are (no JSON round
//!   trip that could change the id). [`Chain::outgoing`] reads the transaction info: in a block,
//!   its depth (a USDT call whose receipt failed, `OUT_OF_ENERGY` or `REVERT`, failed once that
//!   block is 19 deep, since a fork could still put it into another block; a TRX payout's `fee`
//!   is its network fee); pending, unconfirmed. Unknown, it expired only once the solidified
//!   block's time is past its expiration (no block that could hold it can change any more), and
//!   only by answers read after that: its id is asked again, then every block of its window (its
//!   reference block up to the first block after its expiration, all solidified) is read and
//!   searched, each from a node that holds it. One load-balanced URL may send each call to
//!   another node, and a node behind knows neither the newest blocks nor their transactions: an
//!   answer read before, or a block a node does not hold, never makes it expired. The executor
//!   then signs the payout again.
//! - Sweeping (`deposits`, payout executor only): the deposit account's key signs each deposit
//!   address's TRX or USDT transfer with the hot wallet's signing code (`wallet::sign_raw`);
//!   energy and bandwidth are priced from `/wallet/getchainparameters` and a constant run of
//!   the transfer (`/wallet/triggerconstantcontract`).
//! - Every call is a `/wallet/*` path on `api_url`: a java-tron full node's HTTP port (8090)
//!   serves them all, TronGrid too. The solidified block is read from `/wallet/getnodeinfo`
//!   (`solidityBlock`), not from `/walletsolidity/*`, which java-tron serves on another port.

mod api;
pub mod deposits;
mod send;
pub mod tx;
pub mod wallet;

use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{Value, json};

pub use api::TronApi;
pub use send::classify_broadcast;

use super::evm::{TRANSFER_TOPIC, amount};
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus, settled_failure};
use alloy_primitives::U256;
use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::chain::address::tron::{account_id_of, address_of};
use domain::config::TronConfig;
use domain::gates::{self, Gate};

/// The TRC-20 contract of a token gate and its decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trc20 {
    pub contract: [u8; 20],
    pub decimals: u32,
}

pub struct TronChain {
    gate: &'static Gate,
    api: Arc<TronApi>,
    token: Option<Trc20>,
    rescan: u64,
}

/// The live TRON chains configured in `cfg` (`[tron]`): none when no node is set.
pub fn chains(cfg: &TronConfig) -> Vec<Arc<dyn Chain>> {
    if !cfg.configured() {
        return Vec::new();
    }
    let api = Arc::new(TronApi::new(cfg));
    let mut out: Vec<Arc<dyn Chain>> = Vec::new();
    for gate in gates::GATES.iter().filter(|g| g.family == AddressFamily::Tron) {
        let token = if gate.is_token {
            let contract = cfg.usdt_contract.as_deref().or_else(|| gates::token_contract(gate));
            match contract.and_then(account_id_of) {
                Some(contract) => Some(Trc20 { contract, decimals: gate.decimals }),
                None => {
                    tracing::error!(gate = gate.id, "no usable TRC-20 contract; the gate is not watched");
                    continue;
                }
            }
        } else {
            None
        };
        out.push(Arc::new(TronChain { gate, api: api.clone(), token, rescan: cfg.rescan_blocks }));
    }
    out
}

/// Block interval: one block per 3-second slot (a slot may be missed).
const BLOCK_MS: u64 = 3_000;

fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in TRON API answer: {v}"))
}

/// 20 bytes from the node's hex form of an address or account id (`41…`, or bare 40 digits).
fn account_id(hex_str: &str) -> Option<[u8; 20]> {
    let h = hex_str.trim_start_matches("0x");
    let h = if h.len() == 42 && h.starts_with("41") { &h[2..] } else { h };
    hex::decode(h).ok()?.try_into().ok()
}

fn key(id: &[u8; 20]) -> String {
    address_key(AddressFamily::Tron, &address_of(id), None)
}

/// The height of a block as `/wallet/getnowblock` or `/wallet/getblockbynum` answer it.
fn block_number(block: &Value) -> Option<u64> {
    block["block_header"]["raw_data"]["number"].as_u64()
}

/// The successful TRX transfers of one block (`/wallet/getblockbynum`, hex addresses).
pub fn native_transfers(block: &Value, height: u64, decimals: u32) -> Result<Vec<Transfer>, ChainError> {
    let mut out = Vec::new();
    let Some(txs) = block.get("transactions").and_then(Value::as_array) else { return Ok(out) };
    for tx in txs {
        if tx["ret"][0]["contractRet"].as_str() != Some("SUCCESS") {
            continue;
        }
        let contract = &tx["raw_data"]["contract"][0];
        if contract["type"].as_str() != Some("TransferContract") {
            continue;
        }
        let value = &contract["parameter"]["value"];
        let Some(sun) = value["amount"].as_u64().filter(|a| *a > 0) else { continue };
        let receiver = value["to_address"].as_str().and_then(account_id).ok_or_else(|| bad("to_address", tx))?;
        let Some(amount) = amount(U256::from(sun), decimals) else { continue };
        out.push(Transfer {
            tx_hash: tx["txID"].as_str().ok_or_else(|| bad("txID", tx))?.to_ascii_lowercase(),
            output_index: 0,
            address_key: key(&receiver),
            amount,
            block_height: height,
        });
    }
    Ok(out)
}

/// Whether `log` is a TRC-20 `Transfer` of `contract`; its receiver and raw value if so.
fn transfer_log(log: &Value, contract: &[u8; 20]) -> Option<([u8; 20], U256)> {
    if log["address"].as_str().and_then(account_id) != Some(*contract) {
        return None;
    }
    let topics = log["topics"].as_array()?;
    let topic0 = topics.first()?.as_str()?;
    if !topic0.trim_start_matches("0x").eq_ignore_ascii_case(TRANSFER_TOPIC.trim_start_matches("0x")) {
        return None;
    }
    // Transfer(from indexed, to indexed, value): the receiver is the last 20 bytes of topic 2.
    let to = topics.get(2)?.as_str()?.trim_start_matches("0x");
    let receiver = account_id(to.get(to.len().checked_sub(40)?..)?)?;
    let data = log["data"].as_str().unwrap_or("0").trim_start_matches("0x");
    let value = U256::from_str_radix(if data.is_empty() { "0" } else { data }, 16).ok()?;
    Some((receiver, value))
}

/// The TRC-20 transfers of `token` in one block's transaction infos
/// (`/wallet/gettransactioninfobyblocknum`) whose contract call succeeded.
pub fn token_transfers(infos: &Value, token: Trc20, height: u64) -> Result<Vec<Transfer>, ChainError> {
    let mut out = Vec::new();
    let Some(infos) = infos.as_array() else { return Ok(out) };
    for info in infos {
        if info["receipt"]["result"].as_str() != Some("SUCCESS") {
            continue;
        }
        let Some(logs) = info["log"].as_array() else { continue };
        for (index, log) in logs.iter().enumerate() {
            let Some((receiver, value)) = transfer_log(log, &token.contract) else { continue };
            let Some(amount) = amount(value, token.decimals).filter(|a| !a.is_zero()) else { continue };
            out.push(Transfer {
                tx_hash: info["id"].as_str().ok_or_else(|| bad("id", info))?.to_ascii_lowercase(),
                output_index: i64::try_from(index).unwrap_or(i64::MAX),
                address_key: key(&receiver),
                amount,
                block_height: height,
            });
        }
    }
    Ok(out)
}

/// The sun of a `/wallet/getaccount` answer: its `balance`, absent when 0 (and in `{}`, an
/// account never activated).
pub fn account_sun(account: &Value) -> Result<U256, ChainError> {
    match account.get("balance") {
        None => Ok(U256::ZERO),
        Some(b) => b.as_u64().map(U256::from).ok_or_else(|| bad("balance", account)),
    }
}

/// The `uint256` a constant call (`/wallet/triggerconstantcontract`) returned: the call must have
/// run (`result.result`) and returned one ABI word; anything else is an error, never 0.
pub fn constant_uint(answer: &Value) -> Result<U256, ChainError> {
    if answer["result"]["result"] != true {
        return Err(ChainError::Unavailable(format!("TRON constant call failed: {answer}")));
    }
    let word = answer["constant_result"][0].as_str().filter(|w| w.len() == 64);
    word.and_then(|w| U256::from_str_radix(w, 16).ok()).ok_or_else(|| bad("constant_result", answer))
}

impl TronChain {
    /// Block `n`. One the node does not serve (`{}`: a node behind a load balancer whose other
    /// node gave the tip) is an error, so the scan is retried from its cursor and no block is
    /// taken for empty.
    async fn block(&self, n: u64) -> Result<Value, ChainError> {
        let block = self.api.call("/wallet/getblockbynum", json!({"num": n})).await?;
        if block.get("blockID").is_none() {
            return Err(ChainError::Unavailable(format!("block {n} is not available from the TRON node yet")));
        }
        Ok(block)
    }
}

#[async_trait::async_trait]
impl Chain for TronChain {
    fn gate(&self) -> &'static Gate {
        self.gate
    }

    async fn tip(&self) -> Result<u64, ChainError> {
        let block = self.api.call("/wallet/getnowblock", json!({})).await?;
        block_number(&block).ok_or_else(|| bad("block number", &block))
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let from = from.saturating_sub(self.rescan).max(1).min(to);
        let mut out = Vec::new();
        for n in from..=to {
            match self.token {
                Some(token) => {
                    let infos = self.api.call("/wallet/gettransactioninfobyblocknum", json!({"num": n})).await?;
                    let transfers = token_transfers(&infos, token, n)?;
                    // An empty answer is also what a node without the block gives: the block
                    // must be there for "no transfers" to be believed.
                    if infos.as_array().is_none_or(Vec::is_empty) {
                        self.block(n).await?;
                    }
                    out.extend(transfers);
                }
                None => {
                    out.extend(native_transfers(&self.block(n).await?, n, self.gate.decimals)?);
                }
            }
        }
        Ok(out)
    }

    /// A transaction the node knows in no block and not pending counts as missing only when the
    /// node holds the block the payment was recorded in (`/wallet/getblockbynum` answers it): a
    /// lite full node keeps only recent blocks and knows nothing older, so for a block it lacks
    /// the answer is an error the tracker retries, never a reversal.
    async fn status(&self, tx_hash: &str, output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let info = self.api.call("/wallet/gettransactioninfobyid", json!({"value": tx_hash})).await?;
        let Some(height) = info["blockNumber"].as_u64() else {
            // Not in a block: still pending (after a fork it may be included again), or gone.
            let tx = self.api.call("/wallet/gettransactionbyid", json!({"value": tx_hash})).await?;
            if tx.get("txID").is_some() {
                return Ok(TxStatus::Confirmations(0));
            }
            if let Some(h) = seen_at {
                let block = self.api.call("/wallet/getblockbynum", json!({"num": h})).await?;
                if block.get("blockID").is_none() {
                    return Err(ChainError::Unavailable(format!(
                        "transaction {tx_hash} unknown to a TRON node that does not hold block {h} (a lite full \
                         node keeps only recent blocks); not judged missing"
                    )));
                }
            }
            return Ok(TxStatus::Gone);
        };
        if let Some(result) = info["receipt"]["result"].as_str()
            && result != "SUCCESS"
        {
            // The contract call failed: it transferred nothing.
            return Ok(TxStatus::Gone);
        }
        if let Some(token) = self.token {
            let log = usize::try_from(output_index).ok().and_then(|i| info["log"].get(i));
            if log.and_then(|l| transfer_log(l, &token.contract)).is_none() {
                return Ok(TxStatus::Gone);
            }
        }
        let tip = self.tip().await?;
        Ok(TxStatus::Confirmations(tip.saturating_sub(height) + 1))
    }

    /// TRX: `/wallet/getaccount`'s `balance` in sun (absent when 0; an account never
    /// activated is `{}`: 0). TRC-20: the contract's `balanceOf(address)` through
    /// `/wallet/triggerconstantcontract`, a read that sends nothing. Both read the node's state
    /// at its newest block.
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let holder =
            account_id_of(address).ok_or_else(|| ChainError::Unavailable(format!("not a TRON address {address:?}")))?;
        let (units, decimals) = match self.token {
            None => {
                let account = self.api.call("/wallet/getaccount", json!({"address": address, "visible": true})).await?;
                (account_sun(&account)?, self.gate.decimals)
            }
            Some(token) => {
                let body = json!({
                    "owner_address": address,
                    "contract_address": address_of(&token.contract),
                    "function_selector": "balanceOf(address)",
                    "parameter": format!("{:0>64}", hex::encode(holder)),
                    "visible": true,
                });
                let answer = self.api.call("/wallet/triggerconstantcontract", body).await?;
                (constant_uint(&answer)?, token.decimals)
            }
        };
        amount(units, decimals)
            .ok_or_else(|| ChainError::Unavailable(format!("balance of {address} too large to represent: {units}")))
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let answer = self.api.call("/wallet/broadcasthex", json!({"transaction": tx.raw})).await?;
        Ok(classify_broadcast(&answer))
    }

    /// By id first (see the module's notes). Unknown, it expired only once the solidified
    /// block's time is past its expiration, by answers read after that: its id asked again, then
    /// every block of its window read and searched (each answered by a node that holds it).
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        if let Some(known) = self.sent(&tx.tx_hash).await? {
            return Ok(known);
        }
        let pending = self.api.call("/wallet/gettransactionbyid", json!({"value": tx.tx_hash})).await?;
        if pending.get("txID").is_some() {
            return Ok(Outgoing::Confirmations { confirmations: 0, fee: None });
        }
        let (raw, _) =
            tx::decode(&tx.raw).map_err(|e| ChainError::Unavailable(format!("our own TRON transaction: {e}")))?;
        let (solid, solid_time) = self.solidified().await?;
        if solid_time <= raw.expiration_ms {
            // A block that may still include it can come (or it was never sent).
            return Ok(Outgoing::Unknown);
        }
        // Past its expiration at the solidified block. The answers above may come from a node
        // behind (one load-balanced URL can route each call to another node): asked again now,
        // and then its window searched block by block.
        if let Some(known) = self.sent(&tx.tx_hash).await? {
            return Ok(known);
        }
        if let Some(height) = self.window_holds(&tx.tx_hash, &raw, solid, solid_time).await? {
            return Err(ChainError::Unavailable(format!(
                "transaction {} is in block {height}, which the node's transaction info does not show yet; \
                 not judged expired",
                tx.tx_hash
            )));
        }
        Ok(Outgoing::Expired)
    }
}

impl TronChain {
    /// Where a payout transaction the node has in a block stands (`None`: in no block it
    /// knows): its depth, a failed receipt once that block is 19 deep, the TRX it burnt.
    async fn sent(&self, tx_hash: &str) -> Result<Option<Outgoing>, ChainError> {
        let info = self.api.call("/wallet/gettransactioninfobyid", json!({"value": tx_hash})).await?;
        let Some(height) = info["blockNumber"].as_u64() else { return Ok(None) };
        let tip = self.tip().await?;
        let confirmations = tip.saturating_sub(height) + 1;
        if let Some(result) = info["receipt"]["result"].as_str()
            && result != "SUCCESS"
        {
            return Ok(Some(settled_failure(confirmations, self.gate, format!("{result} in block {height}"))));
        }
        // TRX burnt for bandwidth (and energy): the network fee of a TRX payout; a USDT payout's
        // fee is paid in TRX, so it keeps its configured estimate.
        let fee = match self.token {
            None => Some(rust_decimal::Decimal::new(info["fee"].as_i64().unwrap_or(0), 6).normalize()),
            Some(_) => None,
        };
        Ok(Some(Outgoing::Confirmations { confirmations, fee }))
    }

    /// The solidified block's height and time (ms), on the full node's own HTTP port:
    /// `/wallet/getnodeinfo` names it (`solidityBlock`, `Num:<height>,ID:<id>`), and
    /// `/wallet/getblockbynum` gives its time. (`/walletsolidity/*` is served on a java-tron
    /// node's solidity port, not on the `/wallet/*` port `api_url` names.)
    async fn solidified(&self) -> Result<(u64, u64), ChainError> {
        let info = self.api.call("/wallet/getnodeinfo", json!({})).await?;
        let solid = &info["solidityBlock"];
        let height = solid.as_str().and_then(node_info_height).ok_or_else(|| bad("solidityBlock", solid))?;
        let block = self.block(height).await?;
        let header = &block["block_header"];
        let time = header["raw_data"]["timestamp"].as_u64().ok_or_else(|| bad("timestamp", header))?;
        Ok((height, time))
    }

    /// Searches every block that could hold the transaction `raw` (id `tx_hash`), all at or
    /// below the solidified block `solid` (time `solid_time`, past its expiration): from a block
    /// no later than its reference block (whose time the transaction carries) up to the first
    /// block after its expiration (java-tron may still include it in the block whose parent is
    /// older than the expiration). Each block must come from a node that holds it; the height
    /// holding the transaction, if any.
    async fn window_holds(
        &self,
        tx_hash: &str,
        raw: &tx::Raw,
        solid: u64,
        solid_time: u64,
    ) -> Result<Option<u64>, ChainError> {
        let not_held = |h: u64, e: ChainError| {
            ChainError::Unavailable(format!(
                "transaction {tx_hash} unknown, and block {h} of its window (from its reference block to its \
                 expiration) could not be read ({e}; a lite full node keeps only recent blocks); not judged expired"
            ))
        };
        // One block per 3-second slot at most: a missed slot only puts the reference block
        // higher, so this height's block is no later than it.
        let start = solid.saturating_sub(solid_time.saturating_sub(raw.timestamp_ms) / BLOCK_MS).max(1);
        for h in start..=solid {
            let block = self.block(h).await.map_err(|e| not_held(h, e))?;
            let header = &block["block_header"];
            let time = header["raw_data"]["timestamp"].as_u64().ok_or_else(|| bad("timestamp", header))?;
            if h == start && time > raw.timestamp_ms {
                return Err(ChainError::Unavailable(format!(
                    "block {h}, the earliest that could precede transaction {tx_hash}'s reference block, is \
                     later than it; not judged expired"
                )));
            }
            let txs = block["transactions"].as_array().map(Vec::as_slice).unwrap_or_default();
            if txs.iter().any(|t| t["txID"].as_str().is_some_and(|id| id.eq_ignore_ascii_case(tx_hash))) {
                return Ok(Some(h));
            }
            if time > raw.expiration_ms {
                return Ok(None);
            }
        }
        Err(ChainError::Unavailable(format!(
            "no block up to the solidified block {solid} is later than transaction {tx_hash}'s expiration; not \
             judged expired"
        )))
    }
}

/// The height in a `/wallet/getnodeinfo` block id (`Num:<height>,ID:<hex>`).
fn node_info_height(id: &str) -> Option<u64> {
    id.strip_prefix("Num:")?.split(',').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use rust_decimal::Decimal;

    use super::*;

    const USDT_HEX: &str = "41a614f803b6fd780986a42c78ec9c7f77e6ded13c";
    const ALICE_HEX: &str = "41fd4f6f7d1ad5dfd4b4e4bd0a8f6a2e8b6b3b1d2c";

    #[test]
    fn balances_are_read_from_the_account_and_the_constant_call_never_taken_for_zero() {
        assert_eq!(account_sun(&json!({})).unwrap(), U256::ZERO, "never activated");
        assert_eq!(account_sun(&json!({"address": "T", "create_time": 1})).unwrap(), U256::ZERO);
        assert_eq!(account_sun(&json!({"balance": 1_500_000})).unwrap(), U256::from(1_500_000));
        assert!(account_sun(&json!({"balance": "x"})).is_err());
        let ok = json!({"result": {"result": true}, "constant_result": [format!("{:064x}", 7)]});
        assert_eq!(constant_uint(&ok).unwrap(), U256::from(7));
        let reverted = json!({"result": {"code": "CONTRACT_VALIDATE_ERROR", "message": "6e6f"}});
        assert!(constant_uint(&reverted).is_err());
        assert!(constant_uint(&json!({"result": {"result": true}, "constant_result": [""]})).is_err());
    }

    fn usdt() -> Trc20 {
        Trc20 { contract: account_id(USDT_HEX).unwrap(), decimals: 6 }
    }

    #[test]
    fn the_solidified_height_is_read_from_the_node_infos_block_id() {
        let id = "Num:23474629,ID:00000000016631c5a5e2de2cda5d7a47b7b2c6f1e7dfb0d1f7f9d8e1c1b2a3f4";
        assert_eq!(node_info_height(id), Some(23_474_629));
        assert_eq!(node_info_height("Num:7"), Some(7));
        assert_eq!(node_info_height("ID:00,Num:7"), None);
        assert_eq!(node_info_height(""), None);
    }

    #[test]
    fn trx_transfers_are_read_from_successful_transfer_contracts_only() {
        let tx = |id: &str, ret: &str, kind: &str, amount: u64| {
            json!({
                "txID": id,
                "ret": [{"contractRet": ret}],
                "raw_data": {"contract": [{"type": kind, "parameter": {"value": {
                    "amount": amount, "owner_address": USDT_HEX, "to_address": ALICE_HEX}}}]}
            })
        };
        let block = json!({
            "blockID": "00",
            "block_header": {"raw_data": {"number": 7}},
            "transactions": [
                tx("AA", "SUCCESS", "TransferContract", 1_500_000),
                tx("bb", "REVERT", "TransferContract", 2_000_000),
                tx("cc", "SUCCESS", "TriggerSmartContract", 3_000_000),
                tx("dd", "SUCCESS", "TransferContract", 0),
            ]
        });
        let t = native_transfers(&block, 7, 6).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].tx_hash, "aa");
        assert_eq!(t[0].amount, Decimal::from_str("1.5").unwrap());
        assert_eq!(t[0].address_key, key(&account_id(ALICE_HEX).unwrap()));
        assert!(t[0].address_key.starts_with("tron:T"), "{}", t[0].address_key);
        assert!(native_transfers(&json!({"block_header": {"raw_data": {"number": 8}}}), 8, 6).unwrap().is_empty());
    }

    #[test]
    fn usdt_transfers_are_read_from_the_contracts_logs_of_successful_calls() {
        let topic = TRANSFER_TOPIC.trim_start_matches("0x");
        let to = format!("000000000000000000000000{}", &ALICE_HEX[2..]);
        let log = |address: &str, value: u64| json!({"address": &address[2..], "topics": [topic, "00", to], "data": format!("{value:064x}")});
        let infos = json!([
            {"id": "T1", "blockNumber": 9, "receipt": {"result": "SUCCESS"},
             "log": [log("41000000000000000000000000000000000000dead", 5), log(USDT_HEX, 12_340_000)]},
            {"id": "t2", "blockNumber": 9, "receipt": {"result": "REVERT"}, "log": [log(USDT_HEX, 1_000_000)]},
        ]);
        let t = token_transfers(&infos, usdt(), 9).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].tx_hash.as_str(), t[0].output_index), ("t1", 1));
        assert_eq!(t[0].amount, Decimal::from_str("12.34").unwrap());
        assert_eq!(t[0].address_key, key(&account_id(ALICE_HEX).unwrap()));
    }
}
