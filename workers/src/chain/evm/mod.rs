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

mod rpc;
mod send;
mod wallet;

use std::sync::Arc;

use alloy_primitives::{Address, U256};
use rust_decimal::Decimal;
use serde_json::{Value, json};

pub use rpc::{Rpc, amount};
use rpc::{bad, block_param, hex_u64, hex_u256};
use send::{SendClass, classify_send_error, node_error};
pub use wallet::{DepositKeys, EvmSigner, GateSigner, HotWallet, bumped_fees, signer_for_key, signers, transfer_gas};

use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus, settled_failure};
use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::chain::evm_tx::signed_terms;
use domain::config::EvmConfig;
use domain::gates::{GATES, Gate};

/// keccak256("Transfer(address,address,uint256)").
pub const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

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
    /// Block requests a scan keeps in flight.
    fetch_window: usize,
}

impl EvmChain {
    pub fn new(gate: &'static Gate, rpc: Arc<Rpc>, token: Option<Token>, rescan: u64) -> EvmChain {
        EvmChain { gate, rpc, token, rescan, fetch_window: 1 }
    }

    /// Keeps up to `window` block requests in flight while scanning (at least one).
    pub fn fetching(mut self, window: usize) -> EvmChain {
        self.fetch_window = window.max(1);
        self
    }

    fn key(address: &str) -> String {
        address_key(AddressFamily::Evm, address, None)
    }

    /// Block `n` with its full transactions. `null` (this node does not have the block yet: one
    /// behind a load balancer whose other node gave the tip) is an error, so the scan is
    /// retried from its cursor: a block is never taken for an empty one.
    async fn full_block(&self, n: u64) -> Result<Value, ChainError> {
        let block = self.rpc.call("eth_getBlockByNumber", json!([block_param(n), true])).await?;
        if block.get("transactions").and_then(Value::as_array).is_none() {
            return Err(ChainError::Unavailable(format!("block {n} is not available from the EVM node yet ({block})")));
        }
        Ok(block)
    }

    /// The native transfers of one block.
    fn block_transfers(&self, block: &Value, n: u64, out: &mut Vec<Transfer>) -> Result<(), ChainError> {
        for tx in block["transactions"].as_array().into_iter().flatten() {
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
        Ok(())
    }

    /// Blocks `from..=to`, up to `fetch_window` requests in flight, taken in order: the first
    /// block that cannot be read fails the scan.
    async fn native_transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        use futures::StreamExt;
        let mut blocks = futures::stream::iter(from..=to)
            .map(|n| async move { (n, self.full_block(n).await) })
            .buffered(self.fetch_window);
        let mut out = Vec::new();
        while let Some((n, block)) = blocks.next().await {
            self.block_transfers(&block?, n, &mut out)?;
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
        // Some nodes answer `[]` for a range past their head: the range's last block must be
        // there for "no transfers" to be believed.
        let last = self.rpc.call("eth_getBlockByNumber", json!([block_param(to), false])).await?;
        if last.is_null() {
            return Err(ChainError::Unavailable(format!("block {to} is not available from the EVM node yet")));
        }
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

    /// The coin: `eth_getBalance` at `latest` (the newest block's state, never the pending
    /// one). A token: the contract's `balanceOf(address)` through `eth_call` at `latest`, in the
    /// contract's decimals (as its transfers are read).
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let holder = evm_address(address)?;
        let (value, decimals) = match self.token {
            None => {
                let v = self.rpc.call("eth_getBalance", json!([format!("{holder:#x}"), "latest"])).await?;
                (hex_u256(&v, "balance")?, self.gate.decimals)
            }
            Some(token) => {
                let call = json!({"to": format!("{:#x}", token.contract), "data": balance_of_call(holder)});
                let v = self.rpc.call("eth_call", json!([call, "latest"])).await?;
                (balance_of_answer(&v)?, token.decimals)
            }
        };
        amount(value, decimals)
            .ok_or_else(|| ChainError::Unavailable(format!("balance of {address} too large to represent: {value}")))
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        self.broadcast_raw(tx).await
    }

    /// Dead once unknown to the node while its nonce was used by another transaction of the hot
    /// wallet at the gate's depth (replaced), or failed at depth.
    async fn dead(&self, tx: &SignedTx) -> Result<Option<String>, ChainError> {
        Ok(match self.outgoing(tx).await? {
            Outgoing::Unknown => self
                .nonce_used_at_depth(&tx.raw)
                .await?
                .map(|nonce| format!("replaced: nonce {nonce} was used by another transaction of the hot wallet")),
            Outgoing::Failed(reason) => Some(format!("failed on chain: {reason}")),
            Outgoing::Confirmations { .. } | Outgoing::Expired => None,
        })
    }

    /// Where a payout transaction stands: unknown (never sent or dropped), in the mempool,
    /// mined with its confirmations and fee (gas used × effective gas price, in the network's
    /// coin: the fee of a native payout; a token payout's fee is paid in the coin, so `None`),
    /// or failed (reverted).
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let tx_hash = tx.tx_hash.as_str();
        let receipt = self.rpc.call("eth_getTransactionReceipt", json!([tx_hash])).await?;
        if receipt.is_null() {
            return Ok(if in_mempool(&self.rpc, tx_hash).await? {
                Outgoing::Confirmations { confirmations: 0, fee: None }
            } else {
                Outgoing::Unknown
            });
        }
        let height = hex_u64(&receipt["blockNumber"], "blockNumber")?;
        let tip = self.tip().await?;
        let confirmations = tip.saturating_sub(height) + 1;
        if receipt.get("status").and_then(Value::as_str) == Some("0x0") {
            // Judged at the gate's depth: reorganised into another block (other state), the
            // same transaction may succeed. Until then it waits, never completes.
            return Ok(settled_failure(confirmations, self.gate, "evm: the transaction reverted"));
        }
        let fee = match self.token {
            Some(_) => None,
            None => {
                let gas = hex_u256(&receipt["gasUsed"], "gasUsed")?;
                let price = hex_u256(&receipt["effectiveGasPrice"], "effectiveGasPrice")?;
                amount(gas.saturating_mul(price), self.gate.decimals)
            }
        };
        Ok(Outgoing::Confirmations { confirmations, fee })
    }

    /// A transaction with no receipt and not in the mempool counts as missing only when the
    /// block the payment was recorded in is there without it (a reorganisation): a node whose
    /// transaction index does not reach that block (geth `--history.transactions`, an index
    /// still being built) finds no receipt for a transaction its block holds, and a node without
    /// the block cannot tell; both answers are errors the tracker retries, never a reversal.
    async fn status(&self, tx_hash: &str, output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let receipt = self.rpc.call("eth_getTransactionReceipt", json!([tx_hash])).await?;
        if receipt.is_null() {
            // Back in the mempool after a reorganisation (it may be mined again), or gone.
            let tx = self.rpc.call("eth_getTransactionByHash", json!([tx_hash])).await?;
            if !tx.is_null() {
                return Ok(TxStatus::Confirmations(0));
            }
            if let Some(height) = seen_at {
                self.require_block_without(tx_hash, height).await?;
            }
            return Ok(TxStatus::Gone);
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

/// An EVM address (`0x` and 40 hex digits, any case).
fn evm_address(address: &str) -> Result<Address, ChainError> {
    address.parse().map_err(|e| ChainError::Unavailable(format!("not an EVM address {address:?}: {e}")))
}

/// The first four bytes of keccak256("balanceOf(address)").
const BALANCE_OF: [u8; 4] = [0x70, 0xa0, 0x82, 0x31];

/// The call data of ERC-20 `balanceOf(holder)`: the selector, then the address as one ABI word.
fn balance_of_call(holder: Address) -> String {
    let mut data = Vec::with_capacity(36);
    data.extend_from_slice(&BALANCE_OF);
    data.extend_from_slice(&holder.into_word().0);
    format!("0x{}", hex::encode(data))
}

/// The `uint256` a `balanceOf` call returned: exactly one ABI word. Anything else (`0x`: no
/// contract at that address) is an error, never a zero balance.
fn balance_of_answer(v: &Value) -> Result<U256, ChainError> {
    let word = v.as_str().and_then(|s| s.strip_prefix("0x")).filter(|w| w.len() == 64);
    word.and_then(|w| U256::from_str_radix(w, 16).ok()).ok_or_else(|| bad("balanceOf answer", v))
}

/// Whether a receipt-less transaction is still in the node's mempool.
async fn in_mempool(rpc: &Rpc, tx_hash: &str) -> Result<bool, ChainError> {
    Ok(!rpc.call("eth_getTransactionByHash", json!([tx_hash])).await?.is_null())
}

impl EvmChain {
    /// Ok when block `height` is on the node without `tx_hash`: the transaction is not where
    /// it was seen. An error when the node lacks the block, or holds the transaction in it but
    /// has no receipt for it (its transaction index does not reach that far).
    async fn require_block_without(&self, tx_hash: &str, height: u64) -> Result<(), ChainError> {
        let block = self.rpc.call("eth_getBlockByNumber", json!([block_param(height), false])).await?;
        let Some(txs) = block["transactions"].as_array() else {
            return Err(ChainError::Unavailable(format!(
                "transaction {tx_hash} unknown to an EVM node that does not hold block {height}; not judged missing"
            )));
        };
        if txs.iter().any(|t| t.as_str().is_some_and(|h| h.eq_ignore_ascii_case(tx_hash))) {
            return Err(ChainError::Unavailable(format!(
                "block {height} holds transaction {tx_hash} but the EVM node finds no receipt for it: its \
                 transaction index does not reach that block (geth --history.transactions); not judged missing"
            )));
        }
        Ok(())
    }

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
            out.push(Arc::new(EvmChain::new(gate, rpc.clone(), token, rescan).fetching(net.fetch_concurrency)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balance_of_is_the_erc20_call_and_its_answer_is_one_word() {
        let selector = alloy_primitives::keccak256("balanceOf(address)");
        assert_eq!(selector[..4], BALANCE_OF);
        let holder: Address = "0x00000000000000000000000000000000000000AB".parse().unwrap();
        assert_eq!(balance_of_call(holder), format!("0x70a08231{:0>64}", "ab"));
        assert_eq!(balance_of_answer(&json!(format!("0x{:064x}", 2_500_000))).unwrap(), U256::from(2_500_000));
        assert!(balance_of_answer(&json!("0x")).is_err(), "no contract there: not a zero balance");
        assert!(balance_of_answer(&json!(null)).is_err());
    }

    #[test]
    fn the_transfer_topic_is_the_erc20_event() {
        let topic = alloy_primitives::keccak256("Transfer(address,address,uint256)");
        assert_eq!(format!("{topic:#x}"), TRANSFER_TOPIC);
    }
}
