//! Live Solana (`solana`: SOL, `solana_usdc`: SPL USDC) over the cluster's JSON-RPC: one client
//! shared by both gates.
//!
//! - Deposits are read block by block (`getBlock` at `confirmed` commitment, `jsonParsed`),
//!   whose cost does not grow with the number of watched pool addresses (one call per
//!   slot, whatever the pool), unlike `getSignaturesForAddress` per address. `getBlocks` lists
//!   the slots of a range that have a block: the others were skipped and are passed over, while
//!   a listed block the node cannot serve yet is an error (the scan is retried from its
//!   cursor), never an empty slot.
//! - SOL: every account of a successful transaction (`meta.err` null) whose lamports grew
//!   (`postBalances - preBalances`), so value moved by inner instructions is seen too; one
//!   payment per account index.
//! - USDC: every token account of the mint whose balance grew (`pre/postTokenBalances`): the
//!   receiver is the token account's `owner`, the pool address (deposits arrive at its
//!   associated token account); one payment per account index.
//! - Confirmation is Solana's commitment (`getSignatureStatuses`): `confirmed` is unconfirmed
//!   (the invoice shows `confirming`), `finalized` confirms it; a signature the cluster no
//!   longer knows, or one that failed, is missing, reversed only after it stayed missing over
//!   151 slots (`gone_span`): past its blockhash's 150-slot validity a dropped transaction can
//!   never land.
//! - Every scan re-reads `rescan_slots` slots before the cursor (payments are unique per
//!   signature and account index, so nothing twice).
//! - Payouts (`wallet`: the hot wallet's signer; `tx`: the wire format; `send`: what a refusal
//!   means): `sendTransaction` with preflight (a transaction the simulation refuses was sent
//!   nowhere: retried when it can pass, the hot wallet short of SOL or USDC; refused for good
//!   when no retry can change it, a frozen or foreign-owned token account, bytes that are no
//!   valid transaction). [`Chain::outgoing`] asks for the signature's status
//!   first: found, it is judged once `finalized`: failed (`err`) or confirmed (a SOL payout's fee
//!   is its `meta.fee`; a USDC payout's fee and any token account rent are paid in SOL and
//!   logged). Unknown, it expired only once the finalized block height is past its blockhash's
//!   last valid height (no block that could include it can still come), the node that answered
//!   "unknown" had processed that finalized slot, and its ledger reaches back to the slot the
//!   blockhash was read at: the executor then signs the payout again.

pub mod deposits;
mod send;
pub mod tx;
pub mod wallet;

use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{Value, json};

pub use send::classify_send_error;

use super::evm::Rpc;
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus};
use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::config::SolanaConfig;
use domain::gates::{self, Gate};

/// A transaction's blockhash is valid for 150 slots; one missing for longer can never land.
const BLOCKHASH_VALIDITY_SLOTS: u64 = 150;

pub struct SolanaChain {
    gate: &'static Gate,
    rpc: Arc<Rpc>,
    /// The SPL mint of a token gate.
    mint: Option<String>,
    rescan: u64,
}

/// The live Solana chains configured in `cfg` (`[solana]`): none when no node is set.
pub fn chains(cfg: &SolanaConfig) -> Vec<Arc<dyn Chain>> {
    if !cfg.configured() {
        return Vec::new();
    }
    let rpc = rpc(cfg);
    let mut out: Vec<Arc<dyn Chain>> = Vec::new();
    for gate in gates::GATES.iter().filter(|g| g.family == AddressFamily::Solana) {
        let mint = gate.is_token.then(|| mint_of(cfg, gate));
        let mint = match mint {
            Some(None) => {
                tracing::error!(gate = gate.id, "no SPL mint; the gate is not watched");
                continue;
            }
            Some(Some(m)) => Some(m),
            None => None,
        };
        out.push(Arc::new(SolanaChain { gate, rpc: rpc.clone(), mint, rescan: cfg.rescan_slots }));
    }
    out
}

/// The cluster's JSON-RPC client as `cfg` configures it.
fn rpc(cfg: &SolanaConfig) -> Arc<Rpc> {
    Arc::new(Rpc::with("Solana RPC", &cfg.rpc_url, cfg.request_timeout_ms, cfg.max_retries, cfg.retry_backoff_ms))
}

/// The SPL mint of a token gate: configured, or the gate's default.
fn mint_of(cfg: &SolanaConfig, gate: &Gate) -> Option<String> {
    cfg.usdc_mint.clone().or_else(|| gates::token_contract(gate).map(Into::into))
}

fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in Solana RPC answer: {v}"))
}

fn key(address: &str) -> String {
    address_key(AddressFamily::Solana, address, None)
}

/// `units` of a token (or lamports) with `decimals` places.
fn units(units: u128, decimals: u32) -> Option<Decimal> {
    Decimal::try_from_i128_with_scale(i128::try_from(units).ok()?, decimals).ok().map(|d| d.normalize())
}

/// The cluster's answer to `getTokenAccountBalance` of an account that does not exist: invalid
/// params, "could not find account" (any other error is a failure).
fn no_such_account(error: &Value) -> bool {
    error["code"].as_i64() == Some(-32602)
        && error["message"].as_str().is_some_and(|m| m.contains("could not find account"))
}

/// The raw units of a `getTokenAccountBalance` answer (`value.amount`, a decimal string).
fn token_amount(answer: &Value) -> Result<u128, ChainError> {
    answer["value"]["amount"].as_str().and_then(|a| a.parse().ok()).ok_or_else(|| bad("getTokenAccountBalance", answer))
}

/// The successful transactions of a `getBlock` answer with their first signature.
fn successful(block: &Value) -> impl Iterator<Item = (&str, &Value, &Value)> {
    block["transactions"].as_array().into_iter().flatten().filter_map(|tx| {
        let meta = &tx["meta"];
        if !meta["err"].is_null() || meta.is_null() {
            return None;
        }
        let sig = tx["transaction"]["signatures"][0].as_str()?;
        Some((sig, &tx["transaction"], meta))
    })
}

/// SOL received in one block: every account whose lamports grew in a successful transaction.
pub fn native_transfers(block: &Value, slot: u64, decimals: u32) -> Result<Vec<Transfer>, ChainError> {
    let mut out = Vec::new();
    for (sig, tx, meta) in successful(block) {
        let keys = tx["message"]["accountKeys"].as_array().ok_or_else(|| bad("accountKeys", tx))?;
        let (pre, post) = (meta["preBalances"].as_array(), meta["postBalances"].as_array());
        let (Some(pre), Some(post)) = (pre, post) else { return Err(bad("balances", meta)) };
        for (i, account) in keys.iter().enumerate() {
            let (Some(before), Some(after)) = (pre.get(i).and_then(Value::as_u64), post.get(i).and_then(Value::as_u64))
            else {
                continue;
            };
            let Some(gained) = after.checked_sub(before).filter(|g| *g > 0) else { continue };
            // jsonParsed lists keys as objects; the other encodings as strings.
            let address =
                account["pubkey"].as_str().or_else(|| account.as_str()).ok_or_else(|| bad("account key", account))?;
            let Some(amount) = units(u128::from(gained), decimals) else { continue };
            out.push(Transfer {
                tx_hash: sig.to_owned(),
                output_index: i as i64,
                address_key: key(address),
                amount,
                block_height: slot,
            });
        }
    }
    Ok(out)
}

/// Token balance entries of `mint` by account index: (owner, raw amount).
fn token_balances<'a>(entries: &'a Value, mint: &str) -> Vec<(u64, &'a str, u128)> {
    entries
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["mint"].as_str() == Some(mint))
        .filter_map(|e| {
            let index = e["accountIndex"].as_u64()?;
            let owner = e["owner"].as_str()?;
            let amount = u128::from_str(e["uiTokenAmount"]["amount"].as_str()?).ok()?;
            Some((index, owner, amount))
        })
        .collect()
}

/// `mint` received in one block: every token account of the mint whose balance grew in a
/// successful transaction, credited to the account's owner.
pub fn token_transfers(block: &Value, slot: u64, mint: &str, decimals: u32) -> Vec<Transfer> {
    let mut out = Vec::new();
    for (sig, _, meta) in successful(block) {
        let before = token_balances(&meta["preTokenBalances"], mint);
        for (index, owner, after) in token_balances(&meta["postTokenBalances"], mint) {
            let prior = before.iter().find(|(i, _, _)| *i == index).map_or(0, |(_, _, a)| *a);
            let Some(gained) = after.checked_sub(prior).filter(|g| *g > 0) else { continue };
            let Some(amount) = units(gained, decimals) else { continue };
            out.push(Transfer {
                tx_hash: sig.to_owned(),
                output_index: index as i64,
                address_key: key(owner),
                amount,
                block_height: slot,
            });
        }
    }
    out
}

impl SolanaChain {
    /// The network fee of a finalized payout transaction in the gate's asset: a SOL payout's
    /// `meta.fee`; `None` for USDC, whose fee and any token account rent are paid in SOL. Asked of
    /// the SOL gate about a USDC payout (`moves_no_sol`: the executor's `token_gas`), it is all
    /// the SOL the fee payer spent on it: the fee and the rent of a token account it created.
    async fn fee_of(&self, signature: &str, moves_no_sol: bool) -> Result<Option<Decimal>, ChainError> {
        let opts = json!({"encoding": "json", "commitment": "finalized", "maxSupportedTransactionVersion": 0});
        let v = self.rpc.call("getTransaction", json!([signature, opts])).await?;
        let meta = &v["meta"];
        let (Some(fee), Some(before), Some(after)) =
            (meta["fee"].as_u64(), meta["preBalances"][0].as_u64(), meta["postBalances"][0].as_u64())
        else {
            return Err(bad("getTransaction", &v));
        };
        let rent = before.saturating_sub(after).saturating_sub(fee);
        if self.mint.is_none() {
            let spent = if moves_no_sol { before.saturating_sub(after) } else { fee };
            return Ok(units(u128::from(spent), self.gate.decimals));
        }
        tracing::info!(
            gate = self.gate.id,
            tx = signature,
            fee_lamports = fee,
            rent_lamports = rent,
            "SOL paid by the hot wallet for a token payout (fee, and the rent of a token account it created)"
        );
        Ok(None)
    }
}

impl SolanaChain {
    /// `getSignatureStatuses` of one signature, history searched.
    async fn signature_status(&self, signature: &str) -> Result<Value, ChainError> {
        self.rpc.call("getSignatureStatuses", json!([[signature], {"searchTransactionHistory": true}])).await
    }

    /// Where a payout transaction the node knows stands (`None`: unknown to it). Judged only
    /// once finalized: a failure on a fork the cluster may still abandon says nothing about the
    /// block that will hold it.
    async fn sent(
        &self,
        signature: &str,
        statuses: &Value,
        moves_no_sol: bool,
    ) -> Result<Option<Outgoing>, ChainError> {
        let s = &statuses["value"][0];
        if s.is_null() {
            return Ok(None);
        }
        if s["confirmationStatus"] != "finalized" {
            return Ok(Some(Outgoing::Confirmations { confirmations: 0, fee: None }));
        }
        if !s["err"].is_null() {
            return Ok(Some(Outgoing::Failed(format!("{} in slot {}", s["err"], s["slot"]))));
        }
        let fee = self.fee_of(signature, moves_no_sol).await?;
        Ok(Some(Outgoing::Confirmations { confirmations: u64::from(self.gate.confirmations), fee }))
    }
}

#[async_trait::async_trait]
impl Chain for SolanaChain {
    fn gate(&self) -> &'static Gate {
        self.gate
    }

    /// The newest slot at `confirmed` commitment.
    async fn tip(&self) -> Result<u64, ChainError> {
        let v = self.rpc.call("getSlot", json!([{"commitment": "confirmed"}])).await?;
        v.as_u64().ok_or_else(|| bad("slot", &v))
    }

    /// SOL: `getBalance` (lamports). USDC: `getTokenAccountBalance` of the owner's associated
    /// token account, derived as payouts derive it; one that does not exist holds 0 (the
    /// cluster answers "could not find account"). Both at `confirmed` commitment: in a block
    /// the cluster voted on, never one only processed.
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let owner =
            tx::pubkey(address).ok_or_else(|| ChainError::Unavailable(format!("not a Solana address {address:?}")))?;
        let confirmed = json!({"commitment": "confirmed"});
        let raw = match &self.mint {
            None => {
                let v = self.rpc.call("getBalance", json!([address, confirmed])).await?;
                u128::from(v["value"].as_u64().ok_or_else(|| bad("getBalance", &v))?)
            }
            Some(mint) => {
                let mint = tx::pubkey(mint).ok_or_else(|| ChainError::Unavailable(format!("SPL mint {mint:?}")))?;
                let account = tx::address(&tx::associated_token_account(&owner, &mint));
                let params = json!([account, confirmed]);
                match self.rpc.call_unless("getTokenAccountBalance", params, no_such_account).await? {
                    None => 0,
                    Some(v) => token_amount(&v)?,
                }
            }
        };
        units(raw, self.gate.decimals)
            .ok_or_else(|| ChainError::Unavailable(format!("balance of {address} too large to represent: {raw}")))
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let from = from.saturating_sub(self.rescan).min(to);
        let opts = json!({"encoding": "jsonParsed", "transactionDetails": "full", "rewards": false,
                          "maxSupportedTransactionVersion": 0, "commitment": "confirmed"});
        // The slots that have a block (`getBlocks`); the others were skipped by the cluster.
        // Each listed block must then be read: "not available" for one of them is an error (a
        // node behind), never an empty slot, so no block is passed over.
        let listed = self.rpc.call("getBlocks", json!([from, to, {"commitment": "confirmed"}])).await?;
        let listed = listed.as_array().ok_or_else(|| bad("getBlocks", &listed))?;
        let mut out = Vec::new();
        for slot in listed {
            let slot = slot.as_u64().ok_or_else(|| bad("slot", slot))?;
            let block = self.rpc.call("getBlock", json!([slot, opts])).await?;
            if block.is_null() {
                return Err(ChainError::Unavailable(format!(
                    "block of slot {slot} is not available from the node yet"
                )));
            }
            match &self.mint {
                Some(mint) => out.extend(token_transfers(&block, slot, mint, self.gate.decimals)),
                None => out.extend(native_transfers(&block, slot, self.gate.decimals)?),
            }
        }
        Ok(out)
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let stored = wallet::Stored::parse(&tx.raw)?;
        let params = json!([stored.tx, {"encoding": "base64", "preflightCommitment": "confirmed"}]);
        match self.rpc.answer("sendTransaction", &params).await.map_err(ChainError::Unavailable)? {
            Ok(_) => Ok(Broadcast::Accepted),
            Err(error) => {
                // A custom error is its program's own code: read with the instructions' programs.
                let decoded = tx::decode(&stored.bytes()?)
                    .map_err(|e| ChainError::Unavailable(format!("our own Solana transaction: {e}")))?;
                let programs: Vec<tx::Pubkey> = decoded.instructions.iter().map(|(p, _, _)| *p).collect();
                Ok(classify_send_error(&error, &programs))
            }
        }
    }

    /// By signature first; unknown, expired only when no block can include it any more and the
    /// answering node would know it (see the module's notes).
    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let stored = wallet::Stored::parse(&tx.raw)?;
        // A USDC payout moves no SOL: what its fee payer spent is all fee and rent.
        let decoded = tx::decode(&stored.bytes()?)
            .map_err(|e| ChainError::Unavailable(format!("our own Solana transaction: {e}")))?;
        let moves_no_sol = matches!(decoded.payment(), Some(tx::Payment::Spl { .. }));
        if let Some(known) = self.sent(&tx.tx_hash, &self.signature_status(&tx.tx_hash).await?, moves_no_sol).await? {
            return Ok(known);
        }
        // Unknown: the finalized slot and height.
        let epoch = self.rpc.call("getEpochInfo", json!([{"commitment": "finalized"}])).await?;
        let (Some(final_slot), Some(final_height)) = (epoch["absoluteSlot"].as_u64(), epoch["blockHeight"].as_u64())
        else {
            return Err(bad("getEpochInfo", &epoch));
        };
        if final_height <= stored.last_valid_block_height {
            // A block that may include it can still come (or it was never sent).
            return Ok(Outgoing::Unknown);
        }
        // Past its window at finalized: asked again, so that "unknown" is judged only from an
        // answer given after that slot was finalized, by a node that had processed it.
        let v = self.signature_status(&tx.tx_hash).await?;
        if let Some(known) = self.sent(&tx.tx_hash, &v, moves_no_sol).await? {
            return Ok(known);
        }
        let answered_at = v["context"]["slot"].as_u64().ok_or_else(|| bad("status context", &v))?;
        let min = self.rpc.call("minimumLedgerSlot", json!([])).await?;
        let min = min.as_u64().ok_or_else(|| bad("minimumLedgerSlot", &min))?;
        if answered_at < final_slot || min > stored.slot {
            return Err(ChainError::Unavailable(format!(
                "signature {} unknown to a Solana node at slot {answered_at} whose ledger starts at slot {min}; the \
                 finalized slot is {final_slot} and the blockhash was read at slot {}: not judged expired",
                tx.tx_hash, stored.slot
            )));
        }
        Ok(Outgoing::Expired)
    }

    fn gone_span(&self) -> u64 {
        BLOCKHASH_VALIDITY_SLOTS + 1
    }

    /// A slot read at `confirmed` commitment is not final however many slots follow it: only
    /// the cluster's `finalized` answer ([`Chain::status`]) counts.
    fn depth_counts_blocks(&self) -> bool {
        false
    }

    /// `getSignatureStatuses` with `searchTransactionHistory`: `finalized` counts the gate's
    /// confirmations (1), which are also its final depth (`pipeline::final_depth`): tracking
    /// ends there; anything less final counts 0. A signature the node does not
    /// know counts as missing only when the node's ledger still holds the payment's slot
    /// (`minimumLedgerSlot` at or below it): an RPC node keeps a bounded ledger
    /// (`--limit-ledger-size`) and one restarted from a snapshot has none before it, so for an
    /// older slot "unknown" says nothing and the answer is an error the tracker retries, never a
    /// reversal.
    async fn status(&self, tx_hash: &str, _output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let v = self.signature_status(tx_hash).await?;
        let s = &v["value"][0];
        if s.is_null()
            && let Some(slot) = seen_at
        {
            let min = self.rpc.call("minimumLedgerSlot", json!([])).await?;
            let min = min.as_u64().ok_or_else(|| bad("minimumLedgerSlot", &min))?;
            if slot < min {
                return Err(ChainError::Unavailable(format!(
                    "signature {tx_hash} unknown to a Solana node whose ledger starts at slot {min}, after the \
                     payment's slot {slot}; not judged missing"
                )));
            }
        }
        if s.is_null() || !s["err"].is_null() {
            return Ok(TxStatus::Gone);
        }
        Ok(match s["confirmationStatus"].as_str() {
            Some("finalized") => TxStatus::Confirmations(u64::from(self.gate.confirmations)),
            _ => TxStatus::Confirmations(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: &str = "4vJ9JU1bJJE96FWSJKvHsmmFADCg4gpZQff4P3bkLKi";
    const PAYER: &str = "8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR";
    const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";

    fn tx(sig: &str, err: Value, pre: [u64; 2], post: [u64; 2], tokens: (Value, Value)) -> Value {
        json!({
            "transaction": {"signatures": [sig], "message": {"accountKeys": [
                {"pubkey": PAYER, "signer": true, "writable": true},
                {"pubkey": POOL, "signer": false, "writable": true}]}},
            "meta": {"err": err, "fee": 5000, "preBalances": pre, "postBalances": post,
                     "preTokenBalances": tokens.0, "postTokenBalances": tokens.1}
        })
    }

    fn tb(index: u64, mint: &str, owner: &str, amount: &str) -> Value {
        json!({"accountIndex": index, "mint": mint, "owner": owner,
               "uiTokenAmount": {"amount": amount, "decimals": 6}})
    }

    #[test]
    fn sol_received_is_every_grown_account_of_a_successful_transaction() {
        let block = json!({"transactions": [
            tx("s1", Value::Null, [10_000_000_000, 0], [8_499_995_000, 1_500_000_000], (json!([]), json!([]))),
            tx("s2", json!({"InstructionError": [0, "Custom"]}), [5, 0], [4, 1], (json!([]), json!([]))),
        ]});
        let t = native_transfers(&block, 42, 9).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].tx_hash.as_str(), t[0].output_index, t[0].block_height), ("s1", 1, 42));
        assert_eq!(t[0].amount, Decimal::from_str("1.5").unwrap());
        assert_eq!(t[0].address_key, key(POOL));
    }

    #[test]
    fn usdc_received_is_credited_to_the_token_accounts_owner() {
        let pre = json!([tb(2, USDC, POOL, "1000000"), tb(3, USDC, PAYER, "9000000")]);
        let post = json!([tb(2, USDC, POOL, "3500000"), tb(3, USDC, PAYER, "6500000"), tb(4, PAYER, POOL, "7")]);
        let fresh = json!([tb(5, USDC, POOL, "250000")]);
        let block = json!({"transactions": [
            tx("u1", Value::Null, [1, 1], [1, 1], (pre, post)),
            tx("u2", Value::Null, [1, 1], [1, 1], (json!([]), fresh)),
        ]});
        let t = token_transfers(&block, 7, USDC, 6);
        let got: Vec<_> = t.iter().map(|t| (t.tx_hash.as_str(), t.output_index, t.amount.to_string())).collect();
        assert_eq!(got, [("u1", 2, "2.5".to_owned()), ("u2", 5, "0.25".to_owned())]);
        assert!(t.iter().all(|t| t.address_key == key(POOL)));
    }
}
