//! A fake rippled JSON-RPC node: `ledger` (the validated ledger), `account_tx` (one account's
//! transactions over a ledger range, in pages with a marker) and `tx`, in rippled's documented
//! JSON shapes, over validated ledgers the test closes. Both API versions: v1 (the transaction's
//! fields at the top of a `tx` answer, `tx` and `meta` per `account_tx` entry) and v2
//! (`tx_json` beside `hash`, `ledger_index`, `close_time_iso`, `meta`; `DeliverMax` for a
//! payment's `Amount`), as the request's `api_version` asks, else `api_version` (1, rippled's
//! default). Errors as `result.status = "error"`. No registry here ships rippled (docs/operations.md says
//! which chains run against real node software).
//!
//! `account_info` answers an account's `Balance` in drops as its validated ledgers left it: what
//! it was funded with ([`FakeRippled::fund`], 100,000 XRP) plus what successful payments
//! delivered to it, less what it sent and the fees it paid; an account neither funded nor paid
//! is `actNotFound` (as one never created). At `current`, the open ledger's transactions count
//! too.
//!
//! For payouts it also answers `account_info`, `fee` and `submit`: a submitted blob is decoded,
//! its signature checked against its `SigningPubKey` and that key against its `Account`, a
//! payment to its own account refused (`temREDUNDANT`), and its `Sequence`,
//! `LastLedgerSequence` and fee judged as rippled does (`tefPAST_SEQ`, `terPRE_SEQ`,
//! `tefMAX_LEDGER`, `telINSUF_FEE_P`); an accepted one enters the next ledger the test closes,
//! unless its window passed first.

use std::collections::{HashMap, HashSet};

use workers::chain::xrp::codec::{self, Kind};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use super::fake_node::{Chain, FakeNode, Shared};
use domain::chain::address::xrp;

/// The first ledger the fake holds.
pub const FIRST_LEDGER: u64 = 90_000_000;
/// rippled caps `account_tx` pages; the fake at 4, so suites cross page boundaries.
const MAX_PAGE: usize = 4;

/// What [`FakeRippled::fund`] gives an account, in drops (100,000 XRP).
pub const FUNDED_DROPS: u64 = 100_000_000_000;

/// The account the test's payments come from.
pub const PAYER: &str = "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe";

/// A payment to `destination` (or, from a submitted blob, an `AccountSet`).
#[derive(Debug, Clone)]
pub struct Pay {
    pub hash: String,
    /// `TransactionType`.
    pub kind: &'static str,
    pub account: String,
    pub sequence: u32,
    pub fee: u64,
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
            kind: "Payment",
            account: PAYER.into(),
            sequence: 7,
            fee: 12,
            destination: destination.into(),
            tag,
            amount: drops,
            delivered: drops,
            result: "tesSUCCESS",
        }
    }

    /// The payment (or no-op) a submitted blob makes.
    fn submitted(tx: &codec::Tx) -> Pay {
        let (kind, destination, tag, drops) = match &tx.kind {
            Kind::Payment { destination, tag, drops } => ("Payment", xrp::address_of(destination), *tag, *drops),
            Kind::AccountSet => ("AccountSet", String::new(), None, 0),
        };
        Pay {
            hash: tx.hash(),
            kind,
            account: xrp::address_of(&tx.account),
            sequence: tx.sequence,
            fee: tx.fee_drops,
            destination,
            tag,
            amount: drops,
            delivered: drops,
            result: "tesSUCCESS",
        }
    }

    /// The transaction as API `version` shows it in a `tx` answer (`meta` and `validated` are
    /// the caller's): v1 flat, v2 under `tx_json` with its hash and ledger beside it.
    fn answer(&self, ledger: Option<u64>, version: u64) -> Value {
        let mut tx = self.tx_json(ledger);
        if version < 2 {
            if let Some(amount) = tx.get("Amount").cloned() {
                tx["DeliverMax"] = amount;
            }
            return tx;
        }
        let fields = tx.as_object_mut().expect("an object");
        let hash = fields.remove("hash");
        let index = fields.remove("ledger_index");
        fields.remove("date");
        if let Some(amount) = fields.remove("Amount") {
            fields.insert("DeliverMax".into(), amount);
        }
        let mut out = json!({"tx_json": tx, "hash": hash});
        if let Some(index) = index {
            out["ledger_index"] = index.clone();
            out["ledger_hash"] = json!(format!("{:064X}", index.as_u64().unwrap_or(0)));
            out["close_time_iso"] = json!("2026-01-01T00:00:00Z");
        }
        out
    }

    /// `ledger`: the validated ledger holding it; `None` while it is only in the open ledger.
    fn tx_json(&self, ledger: Option<u64>) -> Value {
        let mut tx = json!({
            "Account": self.account, "Fee": self.fee.to_string(), "Flags": if self.delivered < self.amount { 131_072 } else { 0 },
            "Sequence": self.sequence, "SigningPubKey": "02A8A44DB3D4C73EEEE11DFE54D2029103B776AA8A8D293A91D645977C9DF5F544",
            "TransactionType": self.kind, "TxnSignature": "3045", "hash": self.hash,
        });
        if self.kind == "Payment" {
            tx["Destination"] = json!(self.destination);
            tx["Amount"] = json!(self.amount.to_string());
        }
        if let Some(ledger) = ledger {
            tx["ledger_index"] = json!(ledger);
            tx["date"] = json!(700_000_000u64 + ledger);
        }
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
    /// Each funded account's next `Sequence` in the newest validated ledger.
    sequences: HashMap<String, u32>,
    /// Accepted by `submit`, in the open ledger: they enter the next ledger closed.
    open: Vec<(Pay, u32)>,
    /// Every blob `submit` was given, in order.
    pub submitted: Vec<String>,
    /// Whether `submit` accepts blobs and then loses them (they never reach a ledger).
    pub losing: bool,
    /// The open ledger's fee (`fee` answers it; a blob paying less is `telINSUF_FEE_P`).
    pub open_ledger_fee: u64,
    /// The `engine_result` the next submitted payment gets instead of being judged (`tem…`).
    pub refuse_next: Option<&'static str>,
    /// The `TransactionResult` the next submitted payment gets in its ledger (`tec…`).
    pub fail_next: Option<&'static str>,
    /// The API version a request that names none gets (rippled's default is 1).
    pub api_version: u64,
}

pub type FakeRippled = FakeNode<Ledgers>;

impl Chain for Ledgers {
    /// Closes `n` ledgers, the open ledger's transactions (still within their window) in the first.
    fn extend_empty(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let index = FIRST_LEDGER + self.ledgers.len() as u64;
        let mut first = Vec::new();
        for (pay, last) in std::mem::take(&mut self.open) {
            if u64::from(last) >= index {
                *self.sequences.get_mut(&pay.account).expect("a funded account") += 1;
                first.push(pay);
            }
        }
        self.ledgers.push(first);
        self.ledgers.extend(std::iter::repeat_with(Vec::new).take(n - 1));
    }
}

impl Ledgers {
    fn validated(&self) -> u64 {
        FIRST_LEDGER + self.ledgers.len() as u64 - 1
    }

    /// `account`'s drops after the validated ledgers (and, with `open`, the open ledger's
    /// transactions), and the ledger that created it; `None` if it was neither funded nor paid.
    fn drops_of(&self, account: &str, open: bool) -> Option<(u64, u64)> {
        let funded = self.sequences.contains_key(account);
        let mut drops: u64 = if funded { FUNDED_DROPS } else { 0 };
        let mut created = funded.then_some(FIRST_LEDGER);
        let open_pays = self.open.iter().filter(|_| open).map(|(p, _)| (self.validated() + 1, p));
        let validated = self
            .ledgers
            .iter()
            .enumerate()
            .flat_map(|(i, pays)| pays.iter().map(move |p| (FIRST_LEDGER + i as u64, p)));
        for (ledger, pay) in validated.chain(open_pays) {
            let delivered = if pay.result == "tesSUCCESS" && pay.kind == "Payment" { pay.delivered } else { 0 };
            if pay.destination == account && delivered > 0 {
                drops = drops.saturating_add(delivered);
                created.get_or_insert(ledger);
            }
            if pay.account == account {
                drops = drops.saturating_sub(delivered.saturating_add(pay.fee));
            }
        }
        created.map(|ledger| (drops, ledger))
    }

    /// rippled's verdict on a submitted blob: its `engine_result`.
    fn submit(&mut self, blob: &str) -> Result<&'static str, &'static str> {
        self.submitted.push(blob.to_owned());
        let tx = codec::Tx::decode(blob).map_err(|_| "invalidTransaction")?;
        if !codec::verify(&tx) {
            return Err("invalidTransaction");
        }
        let mut pay = Pay::submitted(&tx);
        // Preflight (`Payment::preflight`, before any ledger is read): XRP to its own account.
        if pay.kind == "Payment" && pay.destination == pay.account {
            return Ok("temREDUNDANT");
        }
        // As `Transactor::checkSeqProxy`: `tefALREADY` only for a transaction in the open ledger;
        // one validated before has a used `Sequence`, `tefPAST_SEQ` below.
        if self.open.iter().any(|(p, _)| p.hash == pay.hash) {
            return Ok("tefALREADY");
        }
        if let (Some(code), "Payment") = (self.refuse_next, pay.kind) {
            self.refuse_next = None;
            return Ok(code);
        }
        let Some(&validated_next) = self.sequences.get(&pay.account) else { return Ok("terNO_ACCOUNT") };
        let next = validated_next + self.open.iter().filter(|(p, _)| p.account == pay.account).count() as u32;
        if tx.sequence < next {
            return Ok("tefPAST_SEQ");
        }
        if tx.sequence > next {
            return Ok("terPRE_SEQ");
        }
        if u64::from(tx.last_ledger) <= self.validated() {
            return Ok("tefMAX_LEDGER");
        }
        if tx.fee_drops < self.open_ledger_fee {
            return Ok("telINSUF_FEE_P");
        }
        if self.losing {
            return Ok("tesSUCCESS");
        }
        if let (Some(code), "Payment") = (self.fail_next, pay.kind) {
            self.fail_next = None;
            pay.result = code;
        }
        self.open.push((pay, tx.last_ledger));
        Ok("tesSUCCESS")
    }
}

impl FakeRippled {
    /// Serves on 127.0.0.1:0 with `ledgers` empty validated ledgers.
    pub async fn start(ledgers: usize) -> FakeRippled {
        let state = Ledgers {
            ledgers: vec![Vec::new(); ledgers.max(1)],
            open_ledger_fee: 10,
            api_version: 1,
            ..Default::default()
        };
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

    /// `account` exists, its next `Sequence` `sequence`.
    pub fn fund(&self, account: &str, sequence: u32) {
        self.with(|l| l.sequences.insert(account.to_owned(), sequence));
    }

    /// A transaction the operator sends from `account` by hand (an `AccountSet`), validated in
    /// a new ledger: it takes the account's next `Sequence`.
    pub fn by_hand(&self, account: &str) -> u64 {
        self.with(|l| {
            let sequence = l.sequences[account];
            let mut pay = Pay::new(&format!("HAND{sequence:060}"), "", None, 0);
            (pay.kind, pay.account, pay.sequence, pay.fee) = ("AccountSet", account.to_owned(), sequence, 10);
            *l.sequences.get_mut(account).unwrap() += 1;
            l.ledgers.push(vec![pay]);
            l.validated()
        })
    }

    /// The validated transactions of `account`, oldest first.
    pub fn sent_by(&self, account: &str) -> Vec<Pay> {
        self.with(|l| l.ledgers.iter().flatten().filter(|p| p.account == account).cloned().collect())
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
    let mut l = state.lock().unwrap();
    let p = &req["params"][0];
    let validated = FIRST_LEDGER + l.ledgers.len() as u64 - 1;
    let version = p["api_version"].as_u64().unwrap_or(l.api_version);
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
                        .map(move |pay| {
                            let mut entry = if version < 2 {
                                json!({"tx": pay.tx_json(Some(ledger))})
                            } else {
                                pay.answer(Some(ledger), version)
                            };
                            entry["meta"] = pay.meta();
                            entry["validated"] = json!(true);
                            entry
                        })
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
                    let mut tx = pay.answer(Some(ledger), version);
                    tx["meta"] = pay.meta();
                    tx["validated"] = json!(true);
                    tx
                }
                Some((_, pay)) if l.forgotten.contains(&pay.hash) => return Json(error("txnNotFound", p)),
                None if l.open.iter().any(|(pay, _)| pay.hash.eq_ignore_ascii_case(hash)) => {
                    let (pay, _) = l.open.iter().find(|(pay, _)| pay.hash.eq_ignore_ascii_case(hash)).unwrap();
                    let mut tx = pay.answer(None, version);
                    tx["validated"] = json!(false);
                    tx
                }
                _ => {
                    let mut e = error("txnNotFound", p);
                    if let (Some(min), Some(max)) = range {
                        e["result"]["searched_all"] = json!(max <= validated && min >= l.first_held);
                    }
                    return Json(e);
                }
            }
        }
        "account_info" => {
            let account = p["account"].as_str().unwrap_or("");
            let current = match p["ledger_index"].as_str() {
                Some("current") => true,
                Some("validated") => false,
                _ => return Json(error("invalidParams", p)),
            };
            let Some((drops, created)) = l.drops_of(account, current) else { return Json(error("actNotFound", p)) };
            // A funded account's `Sequence` is the test's; one created by a payment starts at the
            // index of the ledger that created it.
            let next = l.sequences.get(account).copied().unwrap_or(created as u32);
            let pending = l.open.iter().filter(|(pay, _)| pay.account == account).count() as u32;
            let sequence = if current { next + pending } else { next };
            let mut r = json!({"account_data": {"Account": account, "Balance": drops.to_string(), "Sequence": sequence,
                                                "Flags": 0, "OwnerCount": 0, "LedgerEntryType": "AccountRoot"},
                               "validated": !current});
            if p["ledger_index"] == "validated" {
                r["ledger_index"] = json!(validated);
            } else {
                r["ledger_current_index"] = json!(validated + 1);
            }
            r
        }
        "fee" => json!({"current_ledger_size": "0", "current_queue_size": "0",
                        "drops": {"base_fee": "10", "median_fee": "5000", "minimum_fee": "10",
                                  "open_ledger_fee": l.open_ledger_fee.to_string()},
                        "ledger_current_index": validated + 1}),
        "submit" => {
            let blob = p["tx_blob"].as_str().unwrap_or("").to_owned();
            match l.submit(&blob) {
                Ok(code) => json!({"engine_result": code, "engine_result_message": format!("the fake's {code}"),
                                   "tx_blob": blob, "accepted": code == "tesSUCCESS"}),
                Err(e) => return Json(error(e, p)),
            }
        }
        _ => return Json(error("unknownCmd", p)),
    };
    let mut result = result;
    result["status"] = json!("success");
    Json(json!({"result": result}))
}
