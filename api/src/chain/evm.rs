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
//!   tracker turns into a reversed deposit only once it stayed gone over a span of blocks
//!   (`tracker`'s gone span); a reversed transfer that is mined again revives its payment.
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

use super::signer::{NonceAccount, PayoutTx, Signer};
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus};
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

    /// One call. Errors never hold the endpoint's URL: providers put API keys in it (a reqwest
    /// error's text names the URL, so it is dropped with `without_url`).
    pub(crate) async fn once(&self, method: &str, params: &Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let failed = |e: reqwest::Error| format!("{method}: {}", e.without_url());
        let r = self.http.post(&self.url).json(&body).send().await.map_err(failed)?;
        let status = r.status();
        if !status.is_success() {
            return Err(format!("{method}: HTTP {status}"));
        }
        let v: Value = r.json().await.map_err(failed)?;
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

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        self.broadcast_raw(tx).await
    }

    /// Where a payout transaction stands: unknown (never sent or dropped), in the mempool,
    /// mined with its confirmations and fee (gas used × effective gas price, in the network's
    /// coin: the fee of a native payout; a token payout's fee is paid in the coin, so `None`),
    /// or failed (reverted).
    async fn outgoing(&self, tx_hash: &str) -> Result<Outgoing, ChainError> {
        let receipt = self.rpc.call("eth_getTransactionReceipt", json!([tx_hash])).await?;
        if receipt.is_null() {
            return Ok(if in_mempool(&self.rpc, tx_hash).await? {
                Outgoing::Confirmations { confirmations: 0, fee: None }
            } else {
                Outgoing::Unknown
            });
        }
        if receipt.get("status").and_then(Value::as_str) == Some("0x0") {
            return Ok(Outgoing::Failed("evm: the transaction reverted".into()));
        }
        let height = hex_u64(&receipt["blockNumber"], "blockNumber")?;
        let tip = self.tip().await?;
        let fee = match self.token {
            Some(_) => None,
            None => {
                let gas = hex_u256(&receipt["gasUsed"], "gasUsed")?;
                let price = hex_u256(&receipt["effectiveGasPrice"], "effectiveGasPrice")?;
                amount(gas.saturating_mul(price), self.gate.decimals)
            }
        };
        Ok(Outgoing::Confirmations { confirmations: tip.saturating_sub(height) + 1, fee })
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

/// Whether a receipt-less transaction is still in the node's mempool.
async fn in_mempool(rpc: &Rpc, tx_hash: &str) -> Result<bool, ChainError> {
    Ok(!rpc.call("eth_getTransactionByHash", json!([tx_hash])).await?.is_null())
}

impl EvmChain {
    async fn broadcast_raw(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        match self.rpc.once("eth_sendRawTransaction", &json!([tx.raw])).await {
            Ok(_) => Ok(Broadcast::Accepted),
            Err(e) => {
                let lower = e.to_ascii_lowercase();
                // The same transaction sent before (pending or mined: the node knows its hash).
                let known = lower.contains("already known")
                    || lower.contains("known transaction")
                    || (lower.contains("nonce too low") && in_mempool(&self.rpc, &tx.tx_hash).await?);
                if known {
                    Ok(Broadcast::AlreadyKnown)
                } else if lower.contains("insufficient funds")
                    || lower.contains("intrinsic gas")
                    || lower.contains("exceeds block gas limit")
                    || lower.contains("invalid")
                {
                    Ok(Broadcast::Rejected(format!("evm: {e}")))
                } else {
                    Err(ChainError::Unavailable(e))
                }
            }
        }
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

/// A payout hot wallet on one EVM network: signs EIP-1559 transfers (native or ERC-20) with its
/// key. The key is loaded only where signers are built (the payout executor).
pub struct HotWallet {
    key: alloy_signer_local::PrivateKeySigner,
    network: String,
    chain_id: u64,
    rpc: Arc<Rpc>,
    max_fee_per_gas: u128,
    priority_fee: u128,
    token_gas_limit: u64,
}

impl HotWallet {
    pub fn address(&self) -> String {
        format!("{:#x}", self.key.address())
    }

    /// (`maxFeePerGas`, `maxPriorityFeePerGas`): twice the latest base fee plus the tip,
    /// capped by the configured per-gas cap and by `cap_total` over `gas`.
    async fn fees(&self, gas: u64, cap_total: Option<u128>) -> Result<(u128, u128), ChainError> {
        let block = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        let base: u128 = hex_u256(&block["baseFeePerGas"], "baseFeePerGas")?.try_into().unwrap_or(u128::MAX);
        let mut max_fee = base.saturating_mul(2).saturating_add(self.priority_fee).min(self.max_fee_per_gas);
        if let Some(total) = cap_total {
            max_fee = max_fee.min(total / u128::from(gas.max(1)));
        }
        if max_fee < base {
            return Err(ChainError::Unavailable(format!(
                "the base fee ({base} wei/gas) is above the fee cap ({max_fee} wei/gas); the payout waits"
            )));
        }
        Ok((max_fee, self.priority_fee.min(max_fee)))
    }
}

/// Signs one gate's payouts from a hot wallet.
pub struct EvmSigner {
    wallet: Arc<HotWallet>,
    gate: &'static Gate,
    token: Option<Token>,
}

fn base_units(amount: Decimal, decimals: u32) -> Result<U256, ChainError> {
    let scaled = amount
        .checked_mul(Decimal::from_i128_with_scale(10i128.pow(decimals.min(28)), 0))
        .filter(|v| v.fract().is_zero() && !v.is_sign_negative())
        .ok_or_else(|| ChainError::Unavailable(format!("{amount} has more than {decimals} decimals")))?;
    U256::from_str(&scaled.trunc().normalize().to_string()).map_err(|e| ChainError::Unavailable(e.to_string()))
}

#[async_trait::async_trait]
impl Signer for EvmSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
        use alloy_eips::eip2718::Encodable2718;
        use alloy_primitives::{Bytes, TxKind};
        use alloy_signer::SignerSync;

        let nonce = tx.nonce.ok_or_else(|| ChainError::Unavailable("an EVM payout needs a nonce".into()))?;
        let to = Address::from_str(tx.destination).map_err(|e| ChainError::Unavailable(format!("destination: {e}")))?;
        let (call_to, value, input, gas) = match self.token {
            None => (to, base_units(tx.amount, self.gate.decimals)?, Bytes::new(), 21_000u64),
            Some(t) => {
                let units = base_units(tx.amount, t.decimals)?;
                let mut data = Vec::with_capacity(68);
                data.extend_from_slice(&[0xa9, 0x05, 0x9c, 0xbb]); // transfer(address,uint256)
                data.extend_from_slice(&[0u8; 12]);
                data.extend_from_slice(to.as_slice());
                data.extend_from_slice(&units.to_be_bytes::<32>());
                (t.contract, U256::ZERO, Bytes::from(data), self.wallet.token_gas_limit)
            }
        };
        // A native payout's fee is paid in its own asset: the configured estimate caps it.
        let cap_total = match self.token {
            None => base_units(tx.max_fee, self.gate.decimals)?.try_into().ok(),
            Some(_) => None,
        };
        let (max_fee, tip) = self.wallet.fees(gas, cap_total).await?;
        let unsigned = TxEip1559 {
            chain_id: self.wallet.chain_id,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: tip,
            to: TxKind::Call(call_to),
            value,
            access_list: Default::default(),
            input,
        };
        let signature = self
            .wallet
            .key
            .sign_hash_sync(&unsigned.signature_hash())
            .map_err(|e| ChainError::Unavailable(format!("signing: {e}")))?;
        let signed = unsigned.into_signed(signature);
        let tx_hash = format!("{:#x}", signed.hash());
        let raw = format!("0x{}", hex::encode(TxEnvelope::Eip1559(signed).encoded_2718()));
        Ok(SignedTx { tx_hash, raw })
    }

    async fn nonce_account(&self) -> Result<Option<NonceAccount>, ChainError> {
        let address = self.wallet.address();
        let v = self.wallet.rpc.call("eth_getTransactionCount", json!([address, "pending"])).await?;
        Ok(Some(NonceAccount {
            scope: format!("{}:{address}", self.wallet.network),
            chain_next: hex_u64(&v, "nonce")?,
        }))
    }
}

fn load_key(network: &str, net: &EvmNetworkConfig) -> Result<Option<alloy_signer_local::PrivateKeySigner>, ChainError> {
    let text = match (&net.hot_wallet_key, &net.hot_wallet_key_file) {
        (Some(k), _) => k.0.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| ChainError::Unavailable(format!("evm.networks.{network}.hot_wallet_key_file: {e}")))?,
        (None, None) => return Ok(None),
    };
    alloy_signer_local::PrivateKeySigner::from_str(text.trim()).map(Some).map_err(|_| {
        ChainError::Unavailable(format!("evm.networks.{network}: the hot wallet key is not a 32-byte hex key"))
    })
}

/// A gate and the signer of its payouts.
pub type GateSigner = (&'static Gate, Arc<dyn Signer>);

/// The payout signers of `cfg`'s networks that have a hot wallet key: one per EVM gate.
pub fn signers(cfg: &EvmConfig) -> Result<Vec<GateSigner>, ChainError> {
    let mut out: Vec<GateSigner> = Vec::new();
    for (network, net) in &cfg.networks {
        let Some(key) = load_key(network, net)? else { continue };
        let gates: Vec<&'static Gate> =
            GATES.iter().filter(|g| g.network == network && g.family == AddressFamily::Evm).collect();
        let Some(chain_id) = net.chain_id.or_else(|| gates.first().and_then(|g| gates::evm_chain_id(g))) else {
            continue;
        };
        let gwei = 1_000_000_000u128;
        let wallet = Arc::new(HotWallet {
            key,
            network: network.clone(),
            chain_id,
            rpc: Arc::new(Rpc::new(net)),
            max_fee_per_gas: u128::from(net.max_fee_per_gas_gwei).saturating_mul(gwei),
            priority_fee: u128::from(net.priority_fee_gwei).saturating_mul(gwei),
            token_gas_limit: net.token_gas_limit,
        });
        for gate in gates {
            let token = if gate.is_token {
                let over = cfg.tokens.get(gate.id);
                let contract = over.map(|t| t.contract.as_str()).or_else(|| gates::token_contract(gate));
                let Some(contract) = contract.and_then(|c| Address::from_str(c).ok()) else { continue };
                Some(Token { contract, decimals: over.and_then(|t| t.decimals).unwrap_or(gate.decimals) })
            } else {
                None
            };
            out.push((gate, Arc::new(EvmSigner { wallet: wallet.clone(), gate, token }) as Arc<dyn Signer>));
        }
    }
    Ok(out)
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
    fn payout_amounts_become_exact_base_units() {
        assert_eq!(base_units(Decimal::new(15, 2), 18).unwrap(), U256::from(150_000_000_000_000_000u128));
        assert_eq!(base_units(Decimal::new(25, 0), 6).unwrap(), U256::from(25_000_000u64));
        assert!(base_units(Decimal::new(1, 7), 6).is_err(), "more decimals than the token has");
        assert!(base_units(Decimal::new(-1, 0), 6).is_err());
    }

    #[test]
    fn the_transfer_topic_is_the_erc20_event() {
        let topic = alloy_primitives::keccak256("Transfer(address,address,uint256)");
        assert_eq!(format!("{topic:#x}"), TRANSFER_TOPIC);
    }
}
