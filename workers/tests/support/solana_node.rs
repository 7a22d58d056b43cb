//! A fake Solana JSON-RPC node: `getSlot`, `getBlock` (`jsonParsed`, skipped slots answered
//! with error -32007) and `getSignatureStatuses`, in the cluster's documented JSON shapes, over
//! slots the test fills, finalizes and forks. No registry here ships a Solana validator
//! (docs/operations.md says which chains run against real node software); the payout
//! transactions' bytes are pinned to solders, whose LiteSVM executed them against the real
//! programs (`workers/tests/fixtures/solana_vectors.py`).
//!
//! For payouts it also answers `getLatestBlockhash` (each slot's blockhash valid for 150
//! blocks), `getEpochInfo`, `getTransaction` and `sendTransaction`: a sent transaction is
//! decoded, its ed25519 signature checked against its fee payer, its blockhash judged (unknown
//! or expired: `BlockhashNotFound`) and a signature already processed refused
//! (`AlreadyProcessed`), as a node's preflight does; an accepted one enters a new slot at once,
//! unless the node is `losing` what it is sent. A USDC payout to an owner without a token
//! account creates one (its rent charged to the payer in `getTransaction`'s balances). The
//! simulation fails as the programs do (custom errors checked against the real programs in
//! LiteSVM) for a recipient's frozen token account and a hot wallet short of funds.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use workers::chain::solana::tx::{self as sol_tx, Payment};

use super::fake_node::{Chain, FakeNode, Shared};

/// What a transaction does to one watched address.
#[derive(Debug, Clone)]
pub enum Tx {
    /// `lamports` from a payer to `to` (a system transfer).
    Sol { sig: String, to: String, lamports: u64, ok: bool },
    /// `units` of `mint` into the token account of `owner`.
    Spl { sig: String, mint: String, owner: String, units: u64, ok: bool },
}

const PAYER: &str = "CktRuQ2mttgRGkXJtyksdKHjUdc2C4TgDzyB98oEzy8";

impl Tx {
    fn sig(&self) -> &str {
        match self {
            Tx::Sol { sig, .. } | Tx::Spl { sig, .. } => sig,
        }
    }

    fn ok(&self) -> bool {
        match self {
            Tx::Sol { ok, .. } | Tx::Spl { ok, .. } => *ok,
        }
    }

    fn block_json(&self) -> Value {
        let err = if self.ok() { Value::Null } else { json!({"InstructionError": [0, {"Custom": 1}]}) };
        let key =
            |k: &str, signer: bool| json!({"pubkey": k, "signer": signer, "writable": true, "source": "transaction"});
        match self {
            Tx::Sol { sig, to, lamports, ok } => {
                let moved = if *ok { *lamports } else { 0 };
                json!({
                    "transaction": {"signatures": [sig], "message": {
                        "accountKeys": [key(PAYER, true), key(to, false)],
                        "instructions": [{"program": "system", "programId": "11111111111111111111111111111111",
                            "parsed": {"type": "transfer", "info": {"source": PAYER, "destination": to, "lamports": lamports}}}]}},
                    "meta": {"err": err, "fee": 5000,
                             "preBalances": [100_000_000_000u64, 0], "postBalances": [100_000_000_000u64 - moved - 5000, moved],
                             "preTokenBalances": [], "postTokenBalances": []},
                    "version": 0
                })
            }
            Tx::Spl { sig, mint, owner, units, ok } => {
                let moved = if *ok { *units } else { 0 };
                let tb = |index: u64, owner: &str, amount: u64| {
                    json!({"accountIndex": index, "mint": mint, "owner": owner,
                    "programId": "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
                    "uiTokenAmount": {"amount": amount.to_string(), "decimals": 6}})
                };
                json!({
                    "transaction": {"signatures": [sig], "message": {
                        "accountKeys": [key(PAYER, true), key("payer-ata", false), key("pool-ata", false)],
                        "instructions": [{"program": "spl-token", "parsed": {"type": "transferChecked"}}]}},
                    "meta": {"err": err, "fee": 5000,
                             "preBalances": [1_000_000_000u64, 2_039_280, 2_039_280], "postBalances": [999_995_000u64, 2_039_280, 2_039_280],
                             "preTokenBalances": [tb(1, PAYER, 1_000_000_000)],
                             "postTokenBalances": [tb(1, PAYER, 1_000_000_000 - moved), tb(2, owner, moved)]},
                    "version": 0
                })
            }
        }
    }
}

/// Blocks a blockhash stays valid for.
pub const VALIDITY: u64 = 150;
/// The rent-exempt minimum of a token account (165 bytes), in lamports.
pub const TOKEN_ACCOUNT_RENT: u64 = 2_039_280;

/// Slot `slot`'s blockhash.
pub fn blockhash(slot: u64) -> [u8; 32] {
    Sha256::new().chain_update(b"fake-solana").chain_update(slot.to_be_bytes()).finalize().into()
}

#[derive(Default)]
pub struct Cluster {
    /// `slots[s]`: `None` skipped, else its transactions. Slot 0 is the first.
    slots: Vec<Option<Vec<Tx>>>,
    /// Slots up to here are finalized.
    finalized: u64,
    /// The first slot the node's ledger holds (`minimumLedgerSlot`): older ones were pruned.
    first_held: u64,
    /// Slots `getBlocks` lists but whose `getBlock` answers "not available" (a node behind).
    unavailable: HashSet<u64>,
    /// Every transaction `sendTransaction` was given (wire bytes).
    pub broadcasts: Vec<Vec<u8>>,
    /// Accept what is sent but let it into no slot (dropped before any leader included it).
    pub losing: bool,
    /// The error object the next `sendTransaction` answers with.
    pub refuse_next: Option<Value>,
    /// The next transaction sent enters its slot failed (`err` set, nothing moved).
    pub fail_next: bool,
    /// `getSignatureStatuses` answers from this many slots behind the tip (another node behind
    /// the same load balancer, which has not processed the newest slots).
    pub status_lag: u64,
    /// (owner, mint) of every token account that exists.
    token_accounts: HashSet<(String, String)>,
    /// Rent the payer of a transaction paid for a token account it created, by signature.
    rent: HashMap<String, u64>,
    /// Addresses the SPL Token program owns (token accounts, mints) besides the token
    /// accounts payouts created, for `getAccountInfo`.
    pub token_program_owned: HashSet<String>,
    /// Owners whose token account the mint's freeze authority froze: a transfer into it fails
    /// as SPL Token does (`AccountFrozen`, custom error 17).
    pub frozen: HashSet<String>,
    /// The hot wallet is short of what a payout moves: its transfer fails as the System program
    /// (`ResultWithNegativeLamports`) or SPL Token (`InsufficientFunds`) does, custom error 1.
    pub short_of_funds: bool,
}

pub type FakeSolana = FakeNode<Cluster>;

impl Chain for Cluster {
    fn extend_empty(&mut self, n: usize) {
        self.slots.extend(std::iter::repeat_with(|| Some(Vec::new())).take(n));
    }
}

impl FakeSolana {
    /// Serves on 127.0.0.1:0 with `slots` empty, finalized slots.
    pub async fn start(slots: usize) -> FakeSolana {
        let cluster = Cluster {
            slots: vec![Some(Vec::new()); slots],
            finalized: slots.saturating_sub(1) as u64,
            ..Default::default()
        };
        FakeNode::serve(cluster, "/", post(call)).await
    }

    /// The newest slot.
    pub fn slot(&self) -> u64 {
        self.with(|c| c.slots.len() as u64 - 1)
    }

    /// Appends `n` empty slots.
    pub fn produce(&self, n: usize) {
        self.with(|c| c.extend_empty(n));
    }

    /// Appends `n` skipped slots (no block).
    pub fn skip(&self, n: usize) {
        self.with(|c| c.slots.extend(std::iter::repeat_n(None, n)));
    }

    /// Appends a slot holding `txs`; returns it.
    pub fn include(&self, txs: Vec<Tx>) -> u64 {
        self.with(|c| {
            c.slots.push(Some(txs));
            c.slots.len() as u64 - 1
        })
    }

    /// The node's ledger drops every slot before `slot` (`--limit-ledger-size`, or a restart
    /// from a snapshot): their signatures are unknown to it.
    pub fn prune_before(&self, slot: u64) {
        self.with(|c| c.first_held = slot);
    }

    /// `getBlock` answers "Block not available" for `slot` while `unavailable` (the node has not
    /// got it yet; `getBlocks` lists it).
    pub fn set_unavailable(&self, slot: u64, unavailable: bool) {
        self.with(|c| if unavailable { c.unavailable.insert(slot) } else { c.unavailable.remove(&slot) });
    }

    /// What the chain's blocks paid `to` (see [`Cluster::paid_to`]).
    pub fn paid_to(&self, to: &str) -> Vec<(String, u64)> {
        self.with(|c| c.paid_to(to))
    }

    /// Every transaction `sendTransaction` was given, decoded.
    pub fn sent(&self) -> Vec<sol_tx::Decoded> {
        self.with(|c| c.broadcasts.iter().map(|b| sol_tx::decode(b).unwrap()).collect())
    }

    /// Finalizes every slot produced so far.
    pub fn finalize(&self) {
        self.with(|c| c.finalized = c.slots.len() as u64 - 1);
    }

    /// A fork from `slot` on (not finalized yet): those slots are replaced by empty ones, one
    /// more than were dropped; their transactions are forgotten.
    pub fn fork_from(&self, slot: u64) {
        self.with(|c| {
            assert!(slot > c.finalized, "a finalized slot cannot be forked away");
            let dropped = c.slots.drain(slot as usize..).count();
            c.slots.extend(std::iter::repeat_with(|| Some(Vec::new())).take(dropped + 1));
        });
    }
}

fn rpc_error(code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}})
}

impl Cluster {
    fn tip(&self) -> u64 {
        self.slots.len() as u64 - 1
    }

    /// The slot holding `sig`, and its transaction (within the ledger the node holds).
    fn find(&self, sig: &str) -> Option<(u64, Tx)> {
        self.slots.iter().enumerate().skip(self.first_held as usize).find_map(|(s, txs)| {
            txs.as_ref().and_then(|txs| txs.iter().find(|t| t.sig() == sig)).map(|t| (s as u64, t.clone()))
        })
    }

    /// What the chain's blocks paid `to` (an address, or a token account's owner): (signature,
    /// lamports or token units), successful transactions only.
    pub fn paid_to(&self, to: &str) -> Vec<(String, u64)> {
        let txs = self.slots.iter().flatten().flatten();
        txs.filter_map(|t| match t {
            Tx::Sol { sig, to: t, lamports, ok: true } if t == to => Some((sig.clone(), *lamports)),
            Tx::Spl { sig, owner, units, ok: true, .. } if owner == to => Some((sig.clone(), *units)),
            _ => None,
        })
        .collect()
    }

    /// `sendTransaction`, as a node's preflight judges it.
    fn send(&mut self, params: &Value) -> Result<Value, Value> {
        let refuse = |message: &str, err: Value| {
            json!({"code": -32002, "message": format!("Transaction simulation failed: {message}"),
                   "data": {"err": err, "logs": [], "accounts": null, "unitsConsumed": 0}})
        };
        let bytes = params[0].as_str().and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let decoded = bytes.as_deref().map(sol_tx::decode);
        let (Some(bytes), Some(Ok(tx))) = (bytes.clone(), decoded) else {
            return Err(json!({"code": -32602, "message": "invalid transaction: failed to deserialize"}));
        };
        self.broadcasts.push(bytes);
        if let Some(error) = self.refuse_next.take() {
            return Err(error);
        }
        let verified = tx.signatures.len() == usize::from(tx.required_signatures)
            && tx.signatures.iter().zip(&tx.keys).all(|(sig, key)| {
                VerifyingKey::from_bytes(key).is_ok_and(|k| k.verify(&tx.message, &Signature::from_bytes(sig)).is_ok())
            });
        if !verified {
            return Err(json!({"code": -32003, "message": "Transaction signature verification failure"}));
        }
        let sig = bs58::encode(tx.signatures[0]).into_string();
        if self.find(&sig).is_some() {
            return Err(refuse("This transaction has already been processed", json!("AlreadyProcessed")));
        }
        let valid = (0..=self.tip()).rev().take(VALIDITY as usize + 1).any(|s| blockhash(s) == tx.blockhash);
        if !valid {
            return Err(refuse("Blockhash not found", json!("BlockhashNotFound")));
        }
        // The payment is the last instruction; the simulation fails there as the program does.
        let last = tx.instructions.len() - 1;
        let custom = |code: u32| {
            refuse(
                &format!("Error processing Instruction {last}: custom program error: {code:#x}"),
                json!({"InstructionError": [last, {"Custom": code}]}),
            )
        };
        match tx.payment() {
            Some(Payment::Spl { owner, .. }) if self.frozen.contains(&sol_tx::address(&owner)) => {
                return Err(custom(17));
            }
            Some(_) if self.short_of_funds => return Err(custom(1)),
            _ => {}
        }
        let ok = !std::mem::take(&mut self.fail_next);
        let include = match tx.payment() {
            Some(Payment::Sol { to, lamports }) => Tx::Sol { sig: sig.clone(), to: sol_tx::address(&to), lamports, ok },
            Some(Payment::Spl { mint, owner, units, .. }) => {
                let (mint, owner) = (sol_tx::address(&mint), sol_tx::address(&owner));
                if ok && self.token_accounts.insert((owner.clone(), mint.clone())) {
                    self.rent.insert(sig.clone(), TOKEN_ACCOUNT_RENT);
                }
                Tx::Spl { sig: sig.clone(), mint, owner, units, ok }
            }
            // Sweeps run against LiteSVM (`solana_sweeps`), not this fake.
            Some(Payment::SplSweep { .. }) | None => {
                return Err(refuse(
                    "Error processing Instruction 0",
                    json!({"InstructionError": [0, "InvalidInstructionData"]}),
                ));
            }
        };
        if !self.losing {
            self.slots.push(Some(vec![include]));
        }
        Ok(json!(sig))
    }

    /// `getAccountInfo`: the owner of a token account (one a payout created, or one the test
    /// named) is the SPL Token program; any other address answers as a system account.
    fn account_info(&self, address: &str) -> Value {
        let created = self.token_accounts.iter().any(|(owner, mint)| {
            let (owner, mint) = (sol_tx::pubkey(owner), sol_tx::pubkey(mint));
            owner.zip(mint).is_some_and(|(o, m)| sol_tx::address(&sol_tx::associated_token_account(&o, &m)) == address)
        });
        let owner = if created || self.token_program_owned.contains(address) {
            sol_tx::TOKEN_PROGRAM.to_owned()
        } else {
            "11111111111111111111111111111111".to_owned()
        };
        json!({"context": {"slot": self.tip()}, "value": {"owner": owner, "lamports": 1_000_000u64,
               "data": ["", "base64"], "executable": false, "rentEpoch": 0, "space": 0}})
    }

    /// `getTransaction`: the transaction's slot and meta (its fee, the payer's balances with
    /// any token account rent it paid).
    fn transaction(&self, sig: &str) -> Value {
        let Some((slot, tx)) = self.find(sig) else { return Value::Null };
        let mut entry = tx.block_json();
        let rent = self.rent.get(sig).copied().unwrap_or(0);
        let post = entry["meta"]["postBalances"][0].as_u64().unwrap_or(0);
        entry["meta"]["postBalances"][0] = json!(post - rent);
        entry["slot"] = json!(slot);
        entry["blockTime"] = json!(1_700_000_000u64 + slot);
        entry
    }
}

async fn call(State(state): State<Shared<Cluster>>, Json(req): Json<Value>) -> Json<Value> {
    let mut c = state.lock().unwrap();
    let params = &req["params"];
    let result = match req["method"].as_str().unwrap_or("") {
        "getSlot" => json!(c.slots.len() as u64 - 1),
        "getLatestBlockhash" => json!({"context": {"slot": c.tip()}, "value": {
            "blockhash": bs58::encode(blockhash(c.tip())).into_string(), "lastValidBlockHeight": c.tip() + VALIDITY}}),
        // Block height = slot here (no skipped slot in a payout test).
        "getEpochInfo" => json!({"absoluteSlot": c.finalized, "blockHeight": c.finalized, "epoch": 0,
                                 "slotIndex": c.finalized, "slotsInEpoch": 432_000, "transactionCount": null}),
        "getTransaction" => c.transaction(params[0].as_str().unwrap_or("")),
        "getAccountInfo" => c.account_info(params[0].as_str().unwrap_or("")),
        "sendTransaction" => match c.send(params) {
            Ok(sig) => sig,
            Err(error) => return Json(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "error": error})),
        },
        "minimumLedgerSlot" => json!(c.first_held),
        "getBlocks" => {
            let (from, to) = (params[0].as_u64().unwrap_or(0), params[1].as_u64().unwrap_or(0));
            let to = to.min(c.slots.len() as u64 - 1);
            json!((from..=to).filter(|s| c.slots[*s as usize].is_some()).collect::<Vec<u64>>())
        }
        "getBlock" if c.unavailable.contains(&params[0].as_u64().unwrap_or(u64::MAX)) => {
            return Json(rpc_error(-32004, &format!("Block not available for slot {}", params[0])));
        }
        "getBlock" => {
            let slot = params[0].as_u64().unwrap_or(u64::MAX);
            match c.slots.get(slot as usize) {
                Some(Some(txs)) => json!({
                    "blockHeight": slot, "blockTime": 1_700_000_000u64 + slot,
                    "blockhash": bs58::encode(blockhash(slot)).into_string(), "parentSlot": slot.saturating_sub(1),
                    "previousBlockhash": bs58::encode(blockhash(slot.saturating_sub(1))).into_string(),
                    "transactions": txs.iter().map(Tx::block_json).collect::<Vec<_>>(),
                }),
                Some(None) => {
                    return Json(rpc_error(
                        -32007,
                        &format!("Slot {slot} was skipped, or missing due to ledger jump to recent snapshot"),
                    ));
                }
                None => return Json(rpc_error(-32004, &format!("Block not available for slot {slot}"))),
            }
        }
        "getSignatureStatuses" => {
            let statuses: Vec<Value> = params[0]
                .as_array()
                .into_iter()
                .flatten()
                .map(|sig| {
                    match c.find(sig.as_str().unwrap_or("")) {
                        None => Value::Null,
                        Some((slot, tx)) => {
                            let finalized = slot <= c.finalized;
                            let err = if tx.ok() { Value::Null } else { json!({"InstructionError": [0, {"Custom": 1}]}) };
                            json!({"slot": slot, "confirmations": if finalized { Value::Null } else { json!(c.slots.len() as u64 - 1 - slot) },
                                   "err": err, "status": if tx.ok() { json!({"Ok": null}) } else { json!({"Err": err}) },
                                   "confirmationStatus": if finalized { "finalized" } else { "confirmed" }})
                        }
                    }
                })
                .collect();
            json!({"context": {"slot": c.tip() - c.status_lag}, "value": statuses})
        }
        other => return Json(rpc_error(-32601, &format!("Method not found: {other}"))),
    };
    Json(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result}))
}
