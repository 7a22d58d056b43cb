//! A fake Solana JSON-RPC node: `getSlot`, `getBlock` (`jsonParsed`, skipped slots answered
//! with error -32007) and `getSignatureStatuses`, in the cluster's documented JSON shapes, over
//! slots the test fills, finalizes and forks. No registry here ships a Solana validator; the
//! issue's LiteSVM shim is not built yet (docs/operations.md says which chains run against
//! real node software).

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

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

#[derive(Default)]
pub struct Cluster {
    /// `slots[s]`: `None` skipped, else its transactions. Slot 0 is the first.
    slots: Vec<Option<Vec<Tx>>>,
    /// Slots up to here are finalized.
    finalized: u64,
    /// The first slot the node's ledger holds (`minimumLedgerSlot`): older ones were pruned.
    first_held: u64,
    /// Slots `getBlocks` lists but whose `getBlock` answers "not available" (a node behind).
    unavailable: std::collections::HashSet<u64>,
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

async fn call(State(state): State<Shared<Cluster>>, Json(req): Json<Value>) -> Json<Value> {
    let c = state.lock().unwrap();
    let params = &req["params"];
    let result = match req["method"].as_str().unwrap_or("") {
        "getSlot" => json!(c.slots.len() as u64 - 1),
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
                    "blockhash": format!("hash{slot}"), "parentSlot": slot.saturating_sub(1),
                    "previousBlockhash": format!("hash{}", slot.saturating_sub(1)),
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
                    let sig = sig.as_str().unwrap_or("");
                    let found = c.slots.iter().enumerate().skip(c.first_held as usize).find_map(|(s, txs)| {
                        txs.as_ref().and_then(|txs| txs.iter().find(|t| t.sig() == sig)).map(|t| (s as u64, t.clone()))
                    });
                    match found {
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
            json!({"context": {"slot": c.slots.len() as u64 - 1}, "value": statuses})
        }
        other => return Json(rpc_error(-32601, &format!("Method not found: {other}"))),
    };
    Json(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result}))
}
