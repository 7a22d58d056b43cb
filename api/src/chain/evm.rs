//! Live EVM networks (ethereum, bsc, base, arbitrum, polygon) over standard JSON-RPC: one
//! client per configured endpoint, shared by the network's native gate and its token gates.
//!
//! - Native transfers: the transactions of each block (`eth_getBlockByNumber`, full) whose
//!   `to` is a watched address and whose value is positive. (Value moved by contract calls,
//!   "internal transactions", is not seen: documented.)
//! - Token transfers: ERC-20 `Transfer(address,address,uint256)` logs of the gate's contract
//!   (`eth_getLogs`), one per log index.
//! - Confirmations by block depth from the transaction's receipt; a receipt whose block is no
//!   longer the canonical block at its height, or a transaction back in the mempool, counts as
//!   unconfirmed; a transaction the node no longer knows (or that failed) is `Gone`, which the
//!   tracker turns into a reversed deposit.
//! - Every scan re-reads the last `rescan_blocks` blocks before the cursor, so a transfer that a
//!   reorganisation moved into a replacement block is still recorded (payments are unique per
//!   transaction and log index, so a re-read records nothing twice).
//! - A failing endpoint (timeout, HTTP 429/5xx, JSON-RPC error) is retried with exponential
//!   backoff; when it keeps failing the scan fails and is retried by its job, from the same
//!   cursor: no block is ever skipped.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::{Address, U256};
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::{Chain, ChainError, Transfer, TxStatus};
use crate::addresses::address_key;
use crate::chain::address::AddressFamily;
use crate::config::{EvmConfig, EvmNetworkConfig};
use crate::gates::{self, GATES, Gate};

/// keccak256("Transfer(address,address,uint256)").
pub const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// A JSON-RPC endpoint with retries.
pub struct Rpc {
    http: reqwest::Client,
    url: String,
    retries: u32,
    backoff: Duration,
}

impl Rpc {
    pub fn new(cfg: &EvmNetworkConfig) -> Rpc {
        Rpc {
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(cfg.request_timeout_ms))
                .build()
                .unwrap_or_default(),
            url: cfg.rpc_url.clone(),
            retries: cfg.max_retries,
            backoff: Duration::from_millis(cfg.retry_backoff_ms),
        }
    }

    async fn once(&self, method: &str, params: &Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = self.http.post(&self.url).json(&body).send().await.map_err(|e| format!("{method}: {e}"))?;
        let status = r.status();
        if !status.is_success() {
            return Err(format!("{method}: HTTP {status}"));
        }
        let v: Value = r.json().await.map_err(|e| format!("{method}: {e}"))?;
        if let Some(err) = v.get("error") {
            return Err(format!("{method}: {err}"));
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }

    /// Calls `method`, retrying failures `retries` times with doubling delays.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ChainError> {
        let mut delay = self.backoff;
        let mut attempt = 0;
        loop {
            match self.once(method, &params).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt >= self.retries => return Err(ChainError::Unavailable(e)),
                Err(e) => {
                    tracing::warn!(error = %e, attempt, "EVM RPC call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2).min(Duration::from_secs(30));
                    attempt += 1;
                }
            }
        }
    }
}

fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in RPC answer: {v}"))
}

fn hex_u64(v: &Value, what: &str) -> Result<u64, ChainError> {
    v.as_str().and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()).ok_or_else(|| bad(what, v))
}

fn hex_u256(v: &Value, what: &str) -> Result<U256, ChainError> {
    v.as_str().and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok()).ok_or_else(|| bad(what, v))
}

/// `value` base units as a decimal amount with `decimals` places; `None` beyond 2^96.
pub fn amount(value: U256, decimals: u32) -> Option<Decimal> {
    let v: u128 = value.try_into().ok()?;
    Decimal::try_from_i128_with_scale(i128::try_from(v).ok()?, decimals).ok().map(|d| d.normalize())
}

fn block_param(n: u64) -> Value {
    Value::String(format!("0x{n:x}"))
}

/// The ERC-20 of a token gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub contract: Address,
    pub decimals: u32,
}

pub struct EvmChain {
    gate: &'static Gate,
    rpc: Arc<Rpc>,
    token: Option<Token>,
    rescan: u64,
}

impl EvmChain {
    pub fn new(gate: &'static Gate, rpc: Arc<Rpc>, token: Option<Token>, rescan: u64) -> EvmChain {
        EvmChain { gate, rpc, token, rescan }
    }

    fn key(address: &str) -> String {
        address_key(AddressFamily::Evm, address, None)
    }

    async fn native_transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let mut out = Vec::new();
        for n in from..=to {
            let block = self.rpc.call("eth_getBlockByNumber", json!([block_param(n), true])).await?;
            let Some(txs) = block.get("transactions").and_then(Value::as_array) else { continue };
            for tx in txs {
                let Some(receiver) = tx.get("to").and_then(Value::as_str) else { continue };
                let value = hex_u256(&tx["value"], "value")?;
                if value.is_zero() {
                    continue;
                }
                let Some(amount) = amount(value, self.gate.decimals) else {
                    tracing::warn!(tx = %tx["hash"], "transfer too large to represent; skipped");
                    continue;
                };
                out.push(Transfer {
                    tx_hash: tx["hash"].as_str().ok_or_else(|| bad("hash", tx))?.to_ascii_lowercase(),
                    output_index: 0,
                    address_key: Self::key(receiver),
                    amount,
                    block_height: n,
                });
            }
        }
        Ok(out)
    }

    async fn token_transfers(&self, token: Token, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let filter = json!({
            "fromBlock": block_param(from),
            "toBlock": block_param(to),
            "address": format!("{:#x}", token.contract),
            "topics": [TRANSFER_TOPIC],
        });
        let logs = self.rpc.call("eth_getLogs", json!([filter])).await?;
        let logs = logs.as_array().ok_or_else(|| bad("logs", &logs))?;
        let mut out = Vec::with_capacity(logs.len());
        for log in logs {
            if log.get("removed").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let topics = log["topics"].as_array().ok_or_else(|| bad("topics", log))?;
            // Transfer(from indexed, to indexed, value): the receiver is the last 20 bytes of topic 2.
            let Some(receiver) = topics.get(2).and_then(Value::as_str).filter(|t| t.len() == 66) else { continue };
            let receiver = format!("0x{}", &receiver[26..]);
            let value = hex_u256(&log["data"], "data")?;
            let Some(amount) = amount(value, token.decimals).filter(|a| !a.is_zero()) else { continue };
            out.push(Transfer {
                tx_hash: log["transactionHash"]
                    .as_str()
                    .ok_or_else(|| bad("transactionHash", log))?
                    .to_ascii_lowercase(),
                output_index: i64::try_from(hex_u64(&log["logIndex"], "logIndex")?).unwrap_or(i64::MAX),
                address_key: Self::key(&receiver),
                amount,
                block_height: hex_u64(&log["blockNumber"], "blockNumber")?,
            });
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl Chain for EvmChain {
    fn gate(&self) -> &'static Gate {
        self.gate
    }

    async fn tip(&self) -> Result<u64, ChainError> {
        let v = self.rpc.call("eth_blockNumber", json!([])).await?;
        hex_u64(&v, "block number")
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let from = from.saturating_sub(self.rescan).max(1).min(to);
        match self.token {
            Some(t) => self.token_transfers(t, from, to).await,
            None => self.native_transfers(from, to).await,
        }
    }

    async fn status(&self, tx_hash: &str, output_index: i64) -> Result<TxStatus, ChainError> {
        let receipt = self.rpc.call("eth_getTransactionReceipt", json!([tx_hash])).await?;
        if receipt.is_null() {
            // Back in the mempool after a reorganisation (it may be mined again), or gone.
            let tx = self.rpc.call("eth_getTransactionByHash", json!([tx_hash])).await?;
            return Ok(if tx.is_null() { TxStatus::Gone } else { TxStatus::Confirmations(0) });
        }
        if receipt.get("status").and_then(Value::as_str) == Some("0x0") {
            return Ok(TxStatus::Gone);
        }
        if let Some(token) = self.token {
            let contract = format!("{:#x}", token.contract);
            let present = receipt["logs"].as_array().is_some_and(|logs| {
                logs.iter().any(|l| {
                    l["logIndex"].as_str().and_then(|s| i64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                        == Some(output_index)
                        && l["address"].as_str().is_some_and(|a| a.eq_ignore_ascii_case(&contract))
                        && l["topics"][0].as_str().is_some_and(|t| t.eq_ignore_ascii_case(TRANSFER_TOPIC))
                })
            });
            if !present {
                return Ok(TxStatus::Gone);
            }
        }
        let height = hex_u64(&receipt["blockNumber"], "blockNumber")?;
        let canonical = self.rpc.call("eth_getBlockByNumber", json!([block_param(height), false])).await?;
        let same_block = canonical["hash"]
            .as_str()
            .zip(receipt["blockHash"].as_str())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b));
        if !same_block {
            // The receipt belongs to a block that was replaced: not confirmed until it is mined again.
            return Ok(TxStatus::Confirmations(0));
        }
        let tip = self.tip().await?;
        Ok(TxStatus::Confirmations(tip.saturating_sub(height) + 1))
    }
}

/// The live EVM chains of `cfg`: for every configured network, its native gate and its token
/// gates (contract and decimals from `evm.tokens.<gate>`, else the mainnet defaults).
pub fn chains(cfg: &EvmConfig) -> Vec<Arc<dyn Chain>> {
    let mut out: Vec<Arc<dyn Chain>> = Vec::new();
    for (network, net) in &cfg.networks {
        let rpc = Arc::new(Rpc::new(net));
        for gate in GATES.iter().filter(|g| g.network == network && g.family == AddressFamily::Evm) {
            let token = if gate.is_token {
                let over = cfg.tokens.get(gate.id);
                let contract = over.map(|t| t.contract.as_str()).or_else(|| gates::token_contract(gate));
                let Some(contract) = contract.and_then(|c| Address::from_str(c).ok()) else {
                    tracing::warn!(gate = gate.id, "no usable token contract; gate not scanned");
                    continue;
                };
                Some(Token { contract, decimals: over.and_then(|t| t.decimals).unwrap_or(gate.decimals) })
            } else {
                None
            };
            let rescan = net.rescan_blocks.unwrap_or(u64::from(gate.confirmations));
            out.push(Arc::new(EvmChain::new(gate, rpc.clone(), token, rescan)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_keep_every_base_unit() {
        assert_eq!(amount(U256::from(1_500_000u64), 6), Some(Decimal::new(15, 1)));
        assert_eq!(amount(U256::from(10u64).pow(U256::from(18u64)), 18), Some(Decimal::ONE));
        assert_eq!(amount(U256::from(1u64), 18).unwrap().to_string(), "0.000000000000000001");
        assert_eq!(amount(U256::MAX, 18), None);
    }

    #[test]
    fn the_transfer_topic_is_the_erc20_event() {
        let topic = alloy_primitives::keccak256("Transfer(address,address,uint256)");
        assert_eq!(format!("{topic:#x}"), TRANSFER_TOPIC);
    }
}
