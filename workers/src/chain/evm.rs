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

use super::signer::{Fees, NonceAccount, PayoutTx, Signer, Signers};
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus};
use api::addresses::address_key;
use api::chain::address::AddressFamily;
use api::chain::evm_tx::signed_terms;
use api::config::{EvmConfig, EvmNetworkConfig};
use api::gates::{self, GATES, Gate};

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

/// What a node's refusal of `eth_sendRawTransaction` means for the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendClass {
    /// The node already has this very transaction (pending or mined).
    AlreadyKnown,
    /// The nonce is below the account's: either this transaction was mined already, or another
    /// transaction took the nonce. The caller asks the chain which.
    NonceTooLow,
    /// Refused before reaching any mempool for a reason that can pass (gas funds, fee below the
    /// market or base fee, pool full, nonce ahead, rate limit): keep the signed transaction and
    /// send it again later.
    Retry,
    /// Refused for a reason that makes it impossible to mine, whatever happens later.
    Rejected,
    /// Anything else: it may have reached a mempool, so it is never treated as refused.
    Unknown,
}

/// Known refusal texts of geth, erigon, nethermind, besu and anvil (lower case, matched as
/// substrings, first match wins: the more specific texts come first).
const SEND_ERRORS: &[(&str, SendClass)] = &[
    // Already known (geth/erigon/anvil "already known", besu "known transaction", nethermind "AlreadyKnown").
    ("already known", SendClass::AlreadyKnown),
    ("alreadyknown", SendClass::AlreadyKnown),
    ("known transaction", SendClass::AlreadyKnown),
    ("already imported", SendClass::AlreadyKnown),
    ("already in the mempool", SendClass::AlreadyKnown),
    // Nonce below the account's (geth/erigon/anvil "nonce too low", besu "nonce too low"/NONCE_TOO_LOW, nethermind "OldNonce").
    ("nonce too low", SendClass::NonceTooLow),
    ("nonce_too_low", SendClass::NonceTooLow),
    ("oldnonce", SendClass::NonceTooLow),
    ("nonce is too low", SendClass::NonceTooLow),
    // Pre-mempool refusals that can pass.
    ("replacement transaction underpriced", SendClass::Retry),
    ("replacement_underpriced", SendClass::Retry),
    ("replacementnotallowed", SendClass::Retry),
    ("transaction underpriced", SendClass::Retry),
    ("underpriced", SendClass::Retry),
    ("insufficient funds", SendClass::Retry),
    ("insufficientfunds", SendClass::Retry),
    ("upfront cost exceeds account balance", SendClass::Retry),
    ("fee cap less than block base fee", SendClass::Retry),
    ("max fee per gas less than block base fee", SendClass::Retry),
    ("less than the current basefee", SendClass::Retry),
    ("gas price below configured minimum", SendClass::Retry),
    ("feetoolow", SendClass::Retry),
    ("fee too low", SendClass::Retry),
    ("gas price too low", SendClass::Retry),
    ("min fee not met", SendClass::Retry),
    ("txpool is full", SendClass::Retry),
    ("pool is full", SendClass::Retry),
    ("txpoolfull", SendClass::Retry),
    ("nonce too high", SendClass::Retry),
    ("noncegap", SendClass::Retry),
    ("nonce too far in future", SendClass::Retry),
    ("nonce_too_far_in_future", SendClass::Retry),
    ("spammer", SendClass::Retry),
    ("rate limit", SendClass::Retry),
    ("too many requests", SendClass::Retry),
    // Certainly never minable (the signed bytes themselves are wrong for this chain).
    ("intrinsic gas too low", SendClass::Rejected),
    ("intrinsic gas exceeds gas limit", SendClass::Rejected),
    ("exceeds block gas limit", SendClass::Rejected),
    ("gaslimitexceeded", SendClass::Rejected),
    ("gas limit too high", SendClass::Rejected),
    ("invalid sender", SendClass::Rejected),
    ("invalid signature", SendClass::Rejected),
    ("invalid chain id", SendClass::Rejected),
    ("wrong chainid", SendClass::Rejected),
    ("chain id mismatch", SendClass::Rejected),
    ("incorrect chain id", SendClass::Rejected),
    ("max priority fee per gas higher than max fee per gas", SendClass::Rejected),
    ("tip higher than fee cap", SendClass::Rejected),
    ("max_priority_fee_per_gas_exceeds_max_fee_per_gas", SendClass::Rejected),
    ("transaction type not supported", SendClass::Rejected),
    ("notsupportedtxtype", SendClass::Rejected),
    ("oversized data", SendClass::Rejected),
    ("negative value", SendClass::Rejected),
    ("senderiscontract", SendClass::Rejected),
    ("sender not an eoa", SendClass::Rejected),
];

/// Classifies a node's refusal by its text (table above), else by its JSON-RPC code: -32602
/// (invalid params: the node cannot decode the transaction) and -32003 with no known text
/// stay `Unknown` unless the text says more; -32005 (limit exceeded) is `Retry`. Nethermind's
/// bare `Invalid` is `Rejected`. Everything else is `Unknown`.
pub fn classify_send_error(code: Option<i64>, message: &str) -> SendClass {
    let lower = message.to_ascii_lowercase();
    if let Some((_, class)) = SEND_ERRORS.iter().find(|(text, _)| lower.contains(text)) {
        return *class;
    }
    if lower.trim() == "invalid" || lower.starts_with("invalid,") {
        return SendClass::Rejected;
    }
    match code {
        Some(-32602) => SendClass::Rejected,
        Some(-32005) => SendClass::Retry,
        _ => SendClass::Unknown,
    }
}

/// The JSON-RPC error (code, message) inside an `Rpc::once` failure, `None` for a transport
/// failure (timeout, HTTP status): the node may or may not have taken the transaction.
fn node_error(e: &str) -> Option<(Option<i64>, String)> {
    let body = e.split_once(": ").map_or(e, |(_, rest)| rest);
    let v: Value = serde_json::from_str(body).ok()?;
    let message = v.get("message").and_then(Value::as_str)?.to_owned();
    let data = v.get("data").and_then(Value::as_str).map(|d| format!(" ({d})")).unwrap_or_default();
    Some((v.get("code").and_then(Value::as_i64), format!("{message}{data}")))
}

impl EvmChain {
    /// `Some(nonce)` when the sender of `raw` has a transaction with that nonce in a block at
    /// least the gate's confirmation count deep (so `raw` can never be mined).
    async fn nonce_used_at_depth(&self, raw: &str) -> Result<Option<u64>, ChainError> {
        use alloy_consensus::TxEnvelope;
        use alloy_consensus::transaction::SignerRecoverable;
        use alloy_eips::eip2718::Decodable2718;
        let Some((nonce, _)) = signed_terms(raw) else { return Ok(None) };
        let bytes = hex::decode(raw.trim_start_matches("0x")).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        let envelope =
            TxEnvelope::decode_2718(&mut bytes.as_slice()).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        let sender = envelope.recover_signer().map_err(|e| ChainError::Unavailable(format!("sender: {e}")))?;
        let deep = self.tip().await?.saturating_sub(u64::from(self.gate.confirmations).saturating_sub(1));
        let count =
            self.rpc.call("eth_getTransactionCount", json!([format!("{sender:#x}"), block_param(deep)])).await?;
        Ok((hex_u64(&count, "nonce")? > nonce).then_some(nonce))
    }

    async fn broadcast_raw(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let e = match self.rpc.once("eth_sendRawTransaction", &json!([tx.raw])).await {
            Ok(_) => return Ok(Broadcast::Accepted),
            Err(e) => e,
        };
        let Some((code, message)) = node_error(&e) else {
            return Err(ChainError::Unavailable(e));
        };
        match classify_send_error(code, &message) {
            SendClass::AlreadyKnown => Ok(Broadcast::AlreadyKnown),
            // Mined or pending already (the node knows its hash), or the nonce went to another transaction.
            SendClass::NonceTooLow if in_mempool(&self.rpc, &tx.tx_hash).await? => Ok(Broadcast::AlreadyKnown),
            SendClass::NonceTooLow => match self.nonce_used_at_depth(&tx.raw).await? {
                Some(nonce) => Ok(Broadcast::Displaced(format!(
                    "evm: nonce {nonce} was used by another transaction of the hot wallet ({message})"
                ))),
                None => Ok(Broadcast::Retry(format!("evm: {message} (the nonce was taken by another transaction)"))),
            },
            SendClass::Retry => Ok(Broadcast::Retry(format!("evm: {message}"))),
            SendClass::Rejected => Ok(Broadcast::Rejected(format!("evm: {message}"))),
            SendClass::Unknown => Err(ChainError::Unavailable(format!("eth_sendRawTransaction: {message}"))),
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
                let Some((contract, decimals)) = cfg.token(gate) else {
                    tracing::warn!(gate = gate.id, "no usable token contract; gate not scanned");
                    continue;
                };
                Some(Token { contract, decimals })
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
    async fn fees(&self, gas: u64, cap_total: Option<u128>) -> Result<Fees, ChainError> {
        let base = self.base_fee().await?;
        let mut max_fee = base.saturating_mul(2).saturating_add(self.priority_fee).min(self.max_fee_per_gas);
        if let Some(total) = cap_total {
            max_fee = max_fee.min(total / u128::from(gas.max(1)));
        }
        if max_fee < base {
            return Err(ChainError::Unavailable(format!(
                "the base fee ({base} wei/gas) is above the fee cap ({max_fee} wei/gas); the payout waits"
            )));
        }
        Ok(Fees { max_fee_per_gas: max_fee, priority_fee_per_gas: self.priority_fee.min(max_fee) })
    }

    async fn base_fee(&self) -> Result<u128, ChainError> {
        let block = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        Ok(hex_u256(&block["baseFeePerGas"], "baseFeePerGas")?.try_into().unwrap_or(u128::MAX))
    }

    /// Signs `unsigned` locally (no network access).
    fn sign_local(&self, unsigned: alloy_consensus::TxEip1559) -> Result<SignedTx, ChainError> {
        use alloy_consensus::{SignableTransaction, TxEnvelope};
        use alloy_eips::eip2718::Encodable2718;
        use alloy_signer::SignerSync;
        let signature = self
            .key
            .sign_hash_sync(&unsigned.signature_hash())
            .map_err(|e| ChainError::Unavailable(format!("signing: {e}")))?;
        let signed = unsigned.into_signed(signature);
        let tx_hash = format!("{:#x}", signed.hash());
        let raw = format!("0x{}", hex::encode(TxEnvelope::Eip1559(signed).encoded_2718()));
        Ok(SignedTx { tx_hash, raw })
    }
}

impl Signers {
    /// Adds the hot wallets of `cfg`'s live EVM networks (those with a key configured).
    pub fn with_evm(mut self, cfg: &EvmConfig) -> Result<Signers, ChainError> {
        for (gate, signer) in signers(cfg)? {
            self.insert(entity::Environment::Live, gate, signer);
        }
        Ok(self)
    }
}

/// The fees of a replacement: twice the original's max fee and tip (nodes require at least
/// +10 %), at least the current market (twice the base fee plus the configured tip), bounded
/// by the configured per-gas cap. Refused when the cap leaves no room for a +10 % bump.
pub fn bumped_fees(original: Fees, market: Fees, cap: u128) -> Result<Fees, ChainError> {
    let max_fee = original.max_fee_per_gas.saturating_mul(2).max(market.max_fee_per_gas).min(cap);
    let tip = original.priority_fee_per_gas.saturating_mul(2).max(market.priority_fee_per_gas).min(max_fee);
    let enough = |new: u128, old: u128| new >= old.saturating_add(old.div_ceil(10)).max(old.saturating_add(1));
    if !enough(max_fee, original.max_fee_per_gas) || !enough(tip, original.priority_fee_per_gas) {
        return Err(ChainError::Unavailable(format!(
            "the fee cap ({cap} wei/gas) leaves no room to replace a transaction paying {} wei/gas (tip {}); raise max_fee_per_gas_gwei",
            original.max_fee_per_gas, original.priority_fee_per_gas
        )));
    }
    Ok(Fees { max_fee_per_gas: max_fee, priority_fee_per_gas: tip })
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

impl EvmSigner {
    /// (receiver of the call, value, input, gas limit) of a payout of `amount` to `to`.
    fn call(&self, to: Address, amount: Decimal) -> Result<(Address, U256, alloy_primitives::Bytes, u64), ChainError> {
        use alloy_primitives::Bytes;
        Ok(match self.token {
            None => (to, base_units(amount, self.gate.decimals)?, Bytes::new(), 21_000u64),
            Some(t) => {
                let units = base_units(amount, t.decimals)?;
                let mut data = Vec::with_capacity(68);
                data.extend_from_slice(&[0xa9, 0x05, 0x9c, 0xbb]); // transfer(address,uint256)
                data.extend_from_slice(&[0u8; 12]);
                data.extend_from_slice(to.as_slice());
                data.extend_from_slice(&units.to_be_bytes::<32>());
                (t.contract, U256::ZERO, Bytes::from(data), self.wallet.token_gas_limit)
            }
        })
    }

    fn destination(tx: &PayoutTx<'_>) -> Result<Address, ChainError> {
        Address::from_str(tx.destination).map_err(|e| ChainError::Unavailable(format!("destination: {e}")))
    }
}

#[async_trait::async_trait]
impl Signer for EvmSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        use alloy_consensus::TxEip1559;
        use alloy_primitives::TxKind;

        let nonce = tx.nonce.ok_or_else(|| ChainError::Unavailable("an EVM payout needs a nonce".into()))?;
        let fees = tx.fees.ok_or_else(|| ChainError::Unavailable("an EVM payout needs its fees".into()))?;
        let (call_to, value, input, gas) = self.call(Self::destination(tx)?, tx.amount)?;
        self.wallet.sign_local(TxEip1559 {
            chain_id: self.wallet.chain_id,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.priority_fee_per_gas,
            to: TxKind::Call(call_to),
            value,
            access_list: Default::default(),
            input,
        })
    }

    async fn fees(&self, tx: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        let (_, _, _, gas) = self.call(Self::destination(tx)?, tx.amount)?;
        // A native payout's fee is paid in its own asset: the configured estimate caps it.
        let cap_total = match self.token {
            None => base_units(tx.max_fee, self.gate.decimals)?.try_into().ok(),
            Some(_) => None,
        };
        self.wallet.fees(gas, cap_total).await.map(Some)
    }

    fn signed_terms(&self, raw: &str) -> Option<(u64, Fees)> {
        signed_terms(raw)
    }

    async fn replacement_fees(&self, original: Fees) -> Result<Fees, ChainError> {
        let market = self.wallet.fees(21_000, None).await?;
        bumped_fees(original, market, self.wallet.max_fee_per_gas)
    }

    async fn sign_replacement(&self, nonce: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        use alloy_consensus::TxEip1559;
        use alloy_primitives::{Bytes, TxKind};
        self.wallet.sign_local(TxEip1559 {
            chain_id: self.wallet.chain_id,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.priority_fee_per_gas,
            to: TxKind::Call(self.wallet.key.address()),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::new(),
        })
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
                let Some((contract, decimals)) = cfg.token(gate) else { continue };
                Some(Token { contract, decimals })
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
    fn send_errors_of_every_client_are_classified() {
        use SendClass::*;
        let cases: &[(Option<i64>, &str, SendClass)] = &[
            // geth
            (Some(-32000), "already known", AlreadyKnown),
            (Some(-32000), "nonce too low: next nonce 5, tx nonce 3", NonceTooLow),
            (Some(-32000), "replacement transaction underpriced", Retry),
            (Some(-32000), "transaction underpriced: tip needed 1, tip permitted 0", Retry),
            (Some(-32000), "insufficient funds for gas * price + value: balance 0, tx cost 21000", Retry),
            (Some(-32000), "intrinsic gas too low: gas 20000, minimum needed 21000", Rejected),
            (Some(-32000), "max fee per gas less than block base fee: address 0x1, maxFeePerGas: 1, baseFee: 7", Retry),
            (Some(-32000), "exceeds block gas limit", Rejected),
            (Some(-32000), "invalid sender", Rejected),
            (Some(-32000), "txpool is full", Retry),
            (Some(-32000), "nonce too high", Retry),
            (Some(-32000), "max priority fee per gas higher than max fee per gas", Rejected),
            (Some(-32000), "transaction type not supported", Rejected),
            (Some(-32000), "oversized data", Rejected),
            // erigon
            (Some(-32000), "fee cap less than block base fee", Retry),
            (Some(-32000), "fee too low", Retry),
            (Some(-32000), "spammer", Retry),
            // nethermind
            (Some(-32010), "AlreadyKnown", AlreadyKnown),
            (Some(-32010), "OldNonce, Current nonce: 5, nonce of rejected tx: 3", NonceTooLow),
            (Some(-32010), "InsufficientFunds, Account balance: 0, cumulative cost: 21000", Retry),
            (Some(-32010), "FeeTooLow, MaxFeePerGas too low", Retry),
            (Some(-32010), "NonceGap, Future nonce", Retry),
            (Some(-32010), "Invalid", Rejected),
            (Some(-32010), "GasLimitExceeded", Rejected),
            // besu
            (Some(-32000), "Known transaction", AlreadyKnown),
            (Some(-32000), "Nonce too low", NonceTooLow),
            (Some(-32000), "Upfront cost exceeds account balance", Retry),
            (Some(-32000), "Gas price below configured minimum gas price", Retry),
            (Some(-32000), "Intrinsic gas exceeds gas limit", Rejected),
            (Some(-32000), "Invalid signature", Rejected),
            (Some(-32000), "Wrong chainId", Rejected),
            // anvil
            (Some(-32003), "Insufficient funds for gas * price + value", Retry),
            (Some(-32003), "max fee per gas less than block base fee", Retry),
            (Some(-32003), "transaction already imported", AlreadyKnown),
            (Some(-32003), "invalid chain id for signer", Rejected),
            // by code only, and unknown texts: never refused for good
            (Some(-32602), "rlp: expected input list", Rejected),
            (Some(-32005), "request limit reached", Retry),
            (Some(-32000), "something new went wrong", Unknown),
            (None, "internal error", Unknown),
            (Some(-32603), "timeout", Unknown),
        ];
        for (code, message, class) in cases {
            assert_eq!(classify_send_error(*code, message), *class, "{code:?} {message}");
        }
    }

    #[test]
    fn node_errors_are_read_from_the_rpc_failure_and_transport_failures_are_not() {
        let e = r#"eth_sendRawTransaction: {"code":-32000,"message":"nonce too low"}"#;
        assert_eq!(node_error(e), Some((Some(-32000), "nonce too low".to_owned())));
        assert_eq!(node_error("eth_sendRawTransaction: HTTP 502 Bad Gateway"), None);
        assert_eq!(node_error("eth_sendRawTransaction: error sending request"), None);
    }

    #[test]
    fn replacement_fees_double_the_original_within_the_cap() {
        let gwei = 1_000_000_000u128;
        let f = |m: u128, t: u128| Fees { max_fee_per_gas: m * gwei, priority_fee_per_gas: t * gwei };
        assert_eq!(bumped_fees(f(10, 2), f(5, 2), 200 * gwei).unwrap(), f(20, 4));
        assert_eq!(bumped_fees(f(10, 2), f(50, 2), 200 * gwei).unwrap(), f(50, 4), "at least the market");
        assert_eq!(bumped_fees(f(10, 2), f(5, 2), 15 * gwei).unwrap(), f(15, 4), "bounded by the cap");
        assert!(bumped_fees(f(10, 2), f(5, 2), 10 * gwei).is_err(), "no room under the cap");
    }

    #[tokio::test]
    async fn signed_terms_read_back_the_nonce_and_fees() {
        let key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
        let wallet = HotWallet {
            key: alloy_signer_local::PrivateKeySigner::from_str(key).unwrap(),
            network: "ethereum".into(),
            chain_id: 1,
            rpc: Arc::new(Rpc::new(&EvmNetworkConfig::default())),
            max_fee_per_gas: 1,
            priority_fee: 1,
            token_gas_limit: 1,
        };
        let signer = EvmSigner { wallet: Arc::new(wallet), gate: gates::find("ethereum").unwrap(), token: None };
        let fees = Fees { max_fee_per_gas: 7, priority_fee_per_gas: 3 };
        let tx = signer.sign_replacement(42, fees).await.unwrap();
        assert_eq!(signer_terms(&signer, &tx.raw), Some((42, fees)));
    }

    fn signer_terms(s: &EvmSigner, raw: &str) -> Option<(u64, Fees)> {
        Signer::signed_terms(s, raw)
    }

    #[test]
    fn the_transfer_topic_is_the_erc20_event() {
        let topic = alloy_primitives::keccak256("Transfer(address,address,uint256)");
        assert_eq!(format!("{topic:#x}"), TRANSFER_TOPIC);
    }
}
