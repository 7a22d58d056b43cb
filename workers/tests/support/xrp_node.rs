//! A fake rippled JSON-RPC node: `ledger` (the validated ledger), `account_tx` (one account's
//! transactions over a ledger range, in pages with a marker) and `tx`, in rippled's documented
//! JSON shapes (API v1: `tx` and `meta` per entry, errors as `result.status = "error"`), over
//! validated ledgers the test closes. No registry here ships rippled (docs/operations.md says
//! which chains run against real node software).

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use super::fake_node::{Chain, FakeNode, Shared};

/// The first ledger the fake holds.
pub const FIRST_LEDGER: u64 = 90_000_000;
/// rippled caps `account_tx` pages; the fake at 4, so suites cross page boundaries.
const MAX_PAGE: usize = 4;

/// A payment to `destination`.
#[derive(Debug, Clone)]
pub struct Pay {
    pub hash: String,
    pub destination: String,
    pub tag: Option<u32>,
    /// What the sender asked for (`Amount`), in drops.
    pub amount: u64,
    /// What arrived (`meta.delivered_amount`): below `amount` for a partial payment.
    pub delivered: u64,
    /// `TransactionResult`: `tesSUCCESS`, or a `tec…` code (fee taken, nothing delivered).
    pub result: &'static str,
}

impl Pay {
    pub fn new(hash: &str, destination: &str, tag: Option<u32>, drops: u64) -> Pay {
        Pay {
            hash: hash.into(),
            destination: destination.into(),
            tag,
            amount: drops,
            delivered: drops,
            result: "tesSUCCESS",
        }
    }

    fn tx_json(&self, ledger: u64) -> Value {
        let mut tx = json!({
            "Account": "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe", "Destination": self.destination,
            "Amount": self.amount.to_string(), "Fee": "12", "Flags": if self.delivered < self.amount { 131_072 } else { 0 },
            "Sequence": 7, "SigningPubKey": "02A8A44DB3D4C73EEEE11DFE54D2029103B776AA8A8D293A91D645977C9DF5F544",
            "TransactionType": "Payment", "TxnSignature": "3045", "hash": self.hash, "ledger_index": ledger, "date": 700_000_000u64 + ledger,
        });
        if let Some(tag) = self.tag {
            tx["DestinationTag"] = json!(tag);
        }
        tx
    }

    fn meta(&self) -> Value {
        let delivered = if self.result == "tesSUCCESS" { self.delivered } else { 0 };
        json!({"TransactionIndex": 0, "TransactionResult": self.result, "delivered_amount": delivered.to_string(),
               "AffectedNodes": []})
    }
}

#[derive(Default)]
pub struct Ledgers {
    /// `ledgers[i]`: the payments of validated ledger `FIRST_LEDGER + i`.
    ledgers: Vec<Vec<Pay>>,
    /// Hashes `tx` answers `txnNotFound` for with `searched_all: false` (a node that does not
    /// hold that part of the history).
    forgotten: HashSet<String>,
    /// Hashes `tx` answers `txnNotFound` for with `searched_all: true` (not in the ledger).
    missing: HashSet<String>,
    /// The first ledger the node holds (`online_delete`): older ones are not searched.
    first_held: u64,
}

pub type FakeRippled = FakeNode<Ledgers>;

impl Chain for Ledgers {
    fn extend_empty(&mut self, n: usize) {
        self.ledgers.extend(std::iter::repeat_with(Vec::new).take(n));
    }
}

impl FakeRippled {
    /// Serves on 127.0.0.1:0 with `ledgers` empty validated ledgers.
    pub async fn start(ledgers: usize) -> FakeRippled {
        let state = Ledgers { ledgers: vec![Vec::new(); ledgers.max(1)], ..Default::default() };
        FakeNode::serve(state, "/", post(call)).await
    }

    /// The newest validated ledger.
    pub fn validated(&self) -> u64 {
        self.with(|l| FIRST_LEDGER + l.ledgers.len() as u64 - 1)
    }

    /// Closes `n` empty ledgers.
    pub fn close(&self, n: usize) {
        self.with(|l| l.extend_empty(n));
    }

    /// Closes a ledger holding `pays`; returns its index.
    pub fn include(&self, pays: Vec<Pay>) -> u64 {
        self.with(|l| {
            l.ledgers.push(pays);
            FIRST_LEDGER + l.ledgers.len() as u64 - 1
        })
    }

    /// `tx` answers `txnNotFound` for `hash` until [`FakeRippled::recall`].
    pub fn forget(&self, hash: &str) {
        self.with(|l| l.forgotten.insert(hash.to_owned()));
    }

    pub fn recall(&self, hash: &str) {
        self.with(|l| {
            l.forgotten.remove(hash);
            l.missing.remove(hash)
        });
    }

    /// The node keeps no ledger before `ledger` (`online_delete`).
    pub fn prune_before(&self, ledger: u64) {
        self.with(|l| l.first_held = ledger);
    }

    /// `tx` answers `txnNotFound` for `hash` having searched all of the ledgers asked about,
    /// until [`FakeRippled::recall`].
    pub fn lose(&self, hash: &str) {
        self.with(|l| l.missing.insert(hash.to_owned()));
    }
}

fn error(name: &str, request: &Value) -> Value {
    json!({"result": {"error": name, "status": "error", "request": request}})
}

async fn call(State(state): State<Shared<Ledgers>>, Json(req): Json<Value>) -> Json<Value> {
    let l = state.lock().unwrap();
    let p = &req["params"][0];
    let validated = FIRST_LEDGER + l.ledgers.len() as u64 - 1;
    let result = match req["method"].as_str().unwrap_or("") {
        "ledger" => {
            if p["ledger_index"] != "validated" {
                return Json(error("invalidParams", p));
            }
            json!({"ledger": {"ledger_index": validated.to_string(), "closed": true}, "ledger_hash": format!("{validated:064X}"),
                   "ledger_index": validated, "validated": true})
        }
        "account_tx" => {
            let account = p["account"].as_str().unwrap_or("");
            let min = p["ledger_index_min"].as_u64().unwrap_or(FIRST_LEDGER).max(FIRST_LEDGER).max(l.first_held);
            let max = p["ledger_index_max"].as_u64().unwrap_or(validated).min(validated);
            let limit = (p["limit"].as_u64().unwrap_or(200) as usize).clamp(1, MAX_PAGE);
            let skip = p["marker"]["seq"].as_u64().unwrap_or(0) as usize;
            let all: Vec<Value> = (min..=max)
                .flat_map(|ledger| {
                    l.ledgers[(ledger - FIRST_LEDGER) as usize]
                        .iter()
                        .filter(|pay| pay.destination == account)
                        .map(move |pay| json!({"tx": pay.tx_json(ledger), "meta": pay.meta(), "validated": true}))
                        .collect::<Vec<_>>()
                })
                .collect();
            let page: Vec<Value> = all.iter().skip(skip).take(limit).cloned().collect();
            let mut r = json!({"account": account, "ledger_index_min": min, "ledger_index_max": max, "limit": limit,
                               "transactions": page, "validated": true});
            if skip + limit < all.len() {
                r["marker"] = json!({"ledger": max, "seq": skip + limit});
            }
            r
        }
        "tx" => {
            let hash = p["transaction"].as_str().unwrap_or("");
            let found = l.ledgers.iter().enumerate().find_map(|(i, pays)| {
                pays.iter().find(|pay| pay.hash.eq_ignore_ascii_case(hash)).map(|pay| (FIRST_LEDGER + i as u64, pay))
            });
            // As rippled: with a ledger range, a miss says whether the node holds all of it.
            let range = (p["min_ledger"].as_u64(), p["max_ledger"].as_u64());
            match found {
                Some((ledger, pay))
                    if !l.forgotten.contains(&pay.hash)
                        && !l.missing.contains(&pay.hash)
                        && range.0.is_none_or(|min| min <= ledger)
                        && range.1.is_none_or(|max| ledger <= max) =>
                {
                    let mut tx = pay.tx_json(ledger);
                    tx["meta"] = pay.meta();
                    tx["validated"] = json!(true);
                    tx
                }
                Some((_, pay)) if l.forgotten.contains(&pay.hash) => return Json(error("txnNotFound", p)),
                _ => {
                    let mut e = error("txnNotFound", p);
                    if let (Some(_), Some(max)) = range {
                        e["result"]["searched_all"] = json!(max <= validated);
                    }
                    return Json(e);
                }
            }
        }
        _ => return Json(error("unknownCmd", p)),
    };
    let mut result = result;
    result["status"] = json!("success");
    Json(json!({"result": result}))
}
