//! A fake TRON full node: the HTTP API the TRON adapter calls (`/wallet/getnowblock`,
//! `getblockbynum`, `gettransactioninfobyblocknum`, `gettransactioninfobyid`,
//! `gettransactionbyid`), answering in java-tron's documented JSON shapes (hex addresses
//! `41…`, amounts in sun, TRC-20 logs with bare-hex topics) over a chain the test builds block
//! by block, with forks. No registry here ships java-tron, so the adapter's tests run against
//! this (docs/operations.md says which chains run against real node software).
//!
//! For balances it answers `/wallet/getaccount` (the TRX the account's blocks paid in, in sun;
//! `{}` for an account no TRX ever reached, `balance` left out when 0, as protobuf's JSON does)
//! and `/wallet/triggerconstantcontract` for `balanceOf(address)` (the token units the blocks'
//! successful transfers paid in), both over the blocks up to the answering node's newest: what
//! is pending or queued is not counted. Senders' balances are kept only with `keep_balances`
//! (the sweeping suites turn it on; the payout suites' hot wallet is never debited otherwise):
//! then a broadcast transaction's owner pays what it sends and what it burns, as java-tron
//! charges it: its bandwidth (its size plus 64 bytes) from the account's free bandwidth
//! (`free_net`, none unless the test gives some) or burnt at [`TRANSACTION_FEE`] sun a byte
//! (refused `BANDWITH_ERROR` when it cannot pay it), and a TRC-20 transfer's [`TRC20_ENERGY`]
//! burnt at [`ENERGY_FEE`] sun a unit, at most its `fee_limit`: one that cannot pay it enters
//! its block failed (`OUT_OF_ENERGY`), burning what it could, and moves no token. The
//! transaction info's `fee` is then what it burnt. `/wallet/getchainparameters` gives both
//! prices, and `/wallet/triggerconstantcontract` runs `transfer(address,uint256)` too (its
//! `energy_used`).
//!
//! For payouts it also answers `/wallet/broadcasthex` and `/wallet/getnodeinfo` (its
//! `solidityBlock` 19 below the newest): a broadcast transaction is decoded, its signature
//! recovered and checked against its owner, its contract validated as `TransferActuator` does
//! (a transfer to the owner itself, a hot wallet short of TRX), its expiration and reference
//! block (TaPoS) judged as java-tron does; an accepted one enters the next block mined. As on a
//! java-tron full node's HTTP port, `/walletsolidity/*` is not served (404).
//!
//! One URL behind a load balancer may route each call to another node: `lagging` answers the
//! next calls, one each, from a node that many blocks behind, and `info_lag` every transaction
//! look-up. Such a node holds no later block, none of their transactions, and no pending one.

use std::collections::VecDeque;

use alloy_primitives::{B256, Signature, U256};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::fake_node::{Chain, FakeNode, Shared};
use workers::chain::tron::tx::{self as tron_tx, Call};

/// Blocks between the newest and the solidified one.
pub const SOLID_LAG: u64 = 19;
/// TRX a payout's bandwidth burns (`fee` of its transaction info), in sun.
pub const TRX_FEE_SUN: u64 = 267_000;
/// Sun burnt per byte of bandwidth (`getTransactionFee`), with `keep_balances`.
pub const TRANSACTION_FEE: u64 = 1_000;
/// Sun burnt per unit of energy (`getEnergyFee`).
pub const ENERGY_FEE: u64 = 420;
/// The energy a TRC-20 `transfer` uses.
pub const TRC20_ENERGY: u64 = 14_650;
/// The bytes java-tron adds to a transaction's size when charging its bandwidth.
pub const RESULT_BYTES: u64 = 64;

/// Who sent a transaction broadcast with `keep_balances`, and what it burnt.
#[derive(Debug, Clone)]
pub struct Sent {
    pub from: [u8; 20],
    /// Sun burnt (bandwidth and energy): its transaction info's `fee`.
    pub fee: u64,
    /// Its receipt's result.
    pub result: &'static str,
}

/// keccak256("Transfer(address,address,uint256)"), as java-tron prints topics: bare hex.
const TRANSFER_TOPIC: &str = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// A transaction the fake chain can hold.
#[derive(Debug, Clone)]
pub enum Tx {
    /// A TRX `TransferContract` of `sun` to `to`.
    Trx { id: String, to: [u8; 20], sun: u64 },
    /// A TRC-20 `transfer` through `contract` of `units` to `to`; `ok: false` reverts.
    Token { id: String, contract: [u8; 20], to: [u8; 20], units: u64, ok: bool },
}

impl Tx {
    fn id(&self) -> &str {
        match self {
            Tx::Trx { id, .. } | Tx::Token { id, .. } => id,
        }
    }

    fn block_json(&self) -> Value {
        let sender = format!("41{}", "11".repeat(20));
        match self {
            Tx::Trx { id, to, sun } => json!({
                "txID": id,
                "ret": [{"contractRet": "SUCCESS"}],
                "raw_data": {"contract": [{"type": "TransferContract", "parameter": {
                    "type_url": "type.googleapis.com/protocol.TransferContract",
                    "value": {"amount": sun, "owner_address": sender, "to_address": format!("41{}", hex::encode(to))}}}]}
            }),
            Tx::Token { id, contract, ok, .. } => json!({
                "txID": id,
                "ret": [{"contractRet": if *ok { "SUCCESS" } else { "REVERT" }}],
                "raw_data": {"contract": [{"type": "TriggerSmartContract", "parameter": {
                    "type_url": "type.googleapis.com/protocol.TriggerSmartContract",
                    "value": {"owner_address": sender, "contract_address": format!("41{}", hex::encode(contract))}}}]}
            }),
        }
    }

    fn info_json(&self, height: u64) -> Value {
        match self {
            Tx::Trx { id, .. } => json!({
                "id": id, "blockNumber": height, "blockTimeStamp": 1_700_000_000_000u64 + height * 3000,
                "fee": TRX_FEE_SUN, "receipt": {"net_fee": TRX_FEE_SUN}
            }),
            Tx::Token { id, contract, to, units, ok } => {
                let log = json!({
                    "address": hex::encode(contract),
                    "topics": [TRANSFER_TOPIC, format!("{:0>64}", "11".repeat(20)), format!("{:0>64}", hex::encode(to))],
                    "data": format!("{units:064x}"),
                });
                let mut info = json!({
                    "id": id, "blockNumber": height, "blockTimeStamp": 1_700_000_000_000u64 + height * 3000,
                    "fee": 13_000_000u64,
                    "contract_address": format!("41{}", hex::encode(contract)),
                    "receipt": {"energy_usage_total": 14_650, "net_usage": 345,
                                "result": if *ok { "SUCCESS" } else { "REVERT" }},
                });
                if *ok {
                    info["log"] = json!([log]);
                }
                info
            }
        }
    }
}

#[derive(Default)]
pub struct Ledger {
    /// `blocks[h - 1]` is block `h`; block 1 is the first.
    blocks: Vec<Vec<Tx>>,
    /// Broadcast but in no block.
    pending: Vec<Tx>,
    /// Fork generation, mixed into block ids so a replaced block has another id.
    fork: u64,
    /// The first block the node holds (a lite full node): older blocks and their
    /// transactions are unknown to it.
    first_held: u64,
    /// Accepted by `broadcasthex`: they enter the next block mined.
    queued: Vec<Tx>,
    /// Every transaction `broadcasthex` was given (hex), in order.
    pub broadcasts: Vec<String>,
    /// Whether `broadcasthex` accepts transactions and then loses them.
    pub losing: bool,
    /// The `code` the next broadcast gets instead of being judged.
    pub refuse_next: Option<&'static str>,
    /// Whether the next broadcast TRC-20 transfer reverts in its block.
    pub revert_next: bool,
    /// Whether the hot wallet is short of TRX: a TRX transfer is refused as `TransferActuator`
    /// refuses it (`balance is not sufficient`).
    pub underfunded: bool,
    /// The next calls, one each, are answered by a node this many blocks behind.
    pub lagging: VecDeque<u64>,
    /// Every `gettransactioninfobyid` and `gettransactionbyid` is answered by a node this many
    /// blocks behind.
    pub info_lag: u64,
    /// Whether senders pay what they send and burn (see the module's notes).
    pub keep_balances: bool,
    /// The senders of the transactions broadcast with `keep_balances`, by id.
    pub sent: std::collections::HashMap<String, Sent>,
    /// Free bandwidth (bytes) each account has left; none when absent.
    pub free_net: std::collections::HashMap<[u8; 20], u64>,
}

pub type FakeTron = FakeNode<Ledger>;

impl Chain for Ledger {
    /// Mines `n` blocks, the queued broadcasts in the first.
    fn extend_empty(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.blocks.push(std::mem::take(&mut self.queued));
        self.blocks.extend(std::iter::repeat_with(Vec::new).take(n - 1));
    }
}

fn timestamp(height: u64) -> u64 {
    1_700_000_000_000u64 + height * 3000
}

fn block_id(l: &Ledger, height: u64) -> String {
    format!("{height:016x}{:048x}", l.fork)
}

impl Ledger {
    /// java-tron's answer to a broadcast transaction (hex of its protobuf).
    fn broadcast(&mut self, hex_tx: &str) -> Value {
        self.broadcasts.push(hex_tx.to_owned());
        let refuse =
            |code: &str, message: &str| json!({"result": false, "code": code, "message": hex::encode(message)});
        let Ok((raw, sig)) = tron_tx::decode(hex_tx) else { return refuse("OTHER_ERROR", "cannot parse") };
        let id = hex::encode(raw.id());
        let signer =
            Signature::try_from(&sig[..]).ok().and_then(|s| s.recover_address_from_prehash(&B256::from(raw.id())).ok());
        if signer.map(|a| a.into_array()) != Some(raw.owner) {
            return refuse("SIGERROR", "validate signature error");
        }
        let known = |t: &Tx| t.id() == id;
        if self.queued.iter().any(known) || self.blocks.iter().flatten().any(known) {
            return refuse("DUP_TRANSACTION_ERROR", "Dup transaction.");
        }
        if let Some(code) = self.refuse_next.take() {
            return refuse(code, "refused by the test");
        }
        let head = self.blocks.len() as u64;
        if raw.expiration_ms <= timestamp(head) {
            return refuse("TRANSACTION_EXPIRATION_ERROR", "Transaction expired");
        }
        let reference = (1..=head).rev().find(|h| *h & 0xFFFF == raw.ref_block);
        let tapos = reference.is_some_and(|h| hex::decode(block_id(self, h)).unwrap()[8..16] == raw.ref_block_hash);
        if !tapos {
            return refuse("TAPOS_ERROR", "Tapos check error.");
        }
        // The actuator's checks come after the expiration and TaPoS (`Manager.processTransaction`).
        let validate =
            |message: &str| refuse("CONTRACT_VALIDATE_ERROR", &format!("Contract validate error : {message}"));
        if let Call::Trx { to, .. } = raw.call {
            if to == raw.owner {
                return validate("Cannot transfer TRX to yourself.");
            }
            if self.underfunded {
                return validate("Validate TransferContract error, balance is not sufficient.");
            }
        }
        let mut charged = None;
        if self.keep_balances {
            match self.charge(&raw, hex_tx.len() as u64 / 2) {
                Ok(sent) => charged = Some(sent),
                Err((code, message)) => return refuse(code, &message),
            }
        }
        if !self.losing {
            let tx = match raw.call {
                Call::Trx { to, sun } => Tx::Trx { id: id.clone(), to, sun },
                Call::Trc20 { contract, to, units, .. } => {
                    let reverted = std::mem::take(&mut self.revert_next);
                    let ok = !reverted && charged.as_ref().is_none_or(|c| c.result == "SUCCESS");
                    Tx::Token { id: id.clone(), contract, to, units: units.to(), ok }
                }
            };
            if let Some(mut sent) = charged {
                if let Tx::Token { ok: false, .. } = tx
                    && sent.result == "SUCCESS"
                {
                    sent.result = "REVERT";
                }
                self.sent.insert(id.clone(), sent);
            }
            self.queued.push(tx);
        }
        json!({"result": true, "txid": id})
    }

    /// What `raw` (`size` bytes signed) costs its owner, judged against what it holds with the
    /// queued transactions counted: its bandwidth (free, or burnt), a TRC-20 transfer's energy
    /// (at most `fee_limit`; short, it fails `OUT_OF_ENERGY` burning what it could), or a
    /// refusal (`code`, message).
    fn charge(&mut self, raw: &tron_tx::Raw, size: u64) -> Result<Sent, (&'static str, String)> {
        let holds = self.trx_of(&raw.owner, self.blocks.len() as u64, true);
        let bytes = size + RESULT_BYTES;
        let free = self.free_net.get(&raw.owner).copied().unwrap_or(0);
        let net_fee = if free >= bytes { 0 } else { bytes * TRANSACTION_FEE };
        let sent = |fee: u64, result: &'static str| Sent { from: raw.owner, fee, result };
        match raw.call {
            Call::Trx { sun, .. } => {
                if holds < sun {
                    let m = "Contract validate error : Validate TransferContract error, balance is not sufficient.";
                    return Err(("CONTRACT_VALIDATE_ERROR", m.into()));
                }
                if holds < sun + net_fee {
                    return Err(("BANDWITH_ERROR", "Account resource insufficient error.".into()));
                }
                if net_fee == 0 {
                    self.free_net.entry(raw.owner).and_modify(|f| *f -= bytes);
                }
                Ok(sent(net_fee, "SUCCESS"))
            }
            Call::Trc20 { fee_limit, contract, units, .. } => {
                if holds < net_fee {
                    return Err(("BANDWITH_ERROR", "Account resource insufficient error.".into()));
                }
                if net_fee == 0 {
                    self.free_net.entry(raw.owner).and_modify(|f| *f -= bytes);
                }
                let energy = TRC20_ENERGY * ENERGY_FEE;
                let can = fee_limit.min(holds - net_fee);
                if can < energy {
                    return Ok(sent(net_fee + can, "OUT_OF_ENERGY"));
                }
                let head = self.blocks.len() as u64;
                if U256::from(self.units_of(&contract, &raw.owner, head)) < units {
                    return Ok(sent(net_fee + energy, "REVERT"));
                }
                Ok(sent(net_fee + energy, "SUCCESS"))
            }
        }
    }

    /// The sun `id` holds at block `head` (with the queued transactions when `queued`): what
    /// TRX transfers paid it, less what its own transactions sent and burnt (those broadcast
    /// with `keep_balances`).
    pub fn trx_of(&self, id: &[u8; 20], head: u64, queued: bool) -> u64 {
        let txs = self.blocks.iter().take(head as usize).flatten().chain(self.queued.iter().filter(|_| queued));
        let (mut got, mut spent) = (0u64, 0u64);
        for t in txs {
            if let Tx::Trx { to, sun, .. } = t
                && to == id
            {
                got += sun;
            }
            if let Some(s) = self.sent.get(t.id()).filter(|s| s.from == *id) {
                spent += s.fee;
                if let Tx::Trx { sun, .. } = t {
                    spent += sun;
                }
            }
        }
        got.saturating_sub(spent)
    }

    /// The token units of `contract` `holder` holds at block `head`.
    pub fn units_of(&self, contract: &[u8; 20], holder: &[u8; 20], head: u64) -> u64 {
        let (mut got, mut spent) = (0u64, 0u64);
        for t in self.blocks.iter().take(head as usize).flatten() {
            if let Tx::Token { id, contract: c, to, units, ok: true } = t
                && c == contract
            {
                if to == holder {
                    got += units;
                }
                if self.sent.get(id).is_some_and(|s| s.from == *holder) {
                    spent += units;
                }
            }
        }
        got.saturating_sub(spent)
    }

    /// A transaction's info as the node answers it: what its sender burnt, with `keep_balances`.
    fn info(&self, t: &Tx, height: u64) -> Value {
        let mut info = t.info_json(height);
        if let Some(s) = self.sent.get(t.id()) {
            info["fee"] = json!(s.fee);
            if let Tx::Token { .. } = t {
                info["receipt"]["result"] = json!(s.result);
            }
        }
        info
    }
}

impl FakeTron {
    /// Serves on 127.0.0.1:0 with `blocks` empty blocks.
    pub async fn start(blocks: usize) -> FakeTron {
        let ledger = Ledger { blocks: vec![Vec::new(); blocks], ..Default::default() };
        FakeNode::serve(ledger, "/{api}/{method}", post(call)).await
    }

    pub fn height(&self) -> u64 {
        self.with(|l| l.blocks.len() as u64)
    }

    /// Appends `n` empty blocks.
    pub fn mine(&self, n: usize) {
        self.with(|l| l.extend_empty(n));
    }

    /// Appends one block holding `txs`; returns its height.
    pub fn include(&self, txs: Vec<Tx>) -> u64 {
        self.with(|l| {
            l.pending.retain(|p| !txs.iter().any(|t| t.id() == p.id()));
            l.blocks.push(txs);
            l.blocks.len() as u64
        })
    }

    /// The transactions to `to` in the chain's blocks: (id, sun or token units).
    pub fn paid_to(&self, to: &[u8; 20]) -> Vec<(String, u64)> {
        self.with(|l| {
            l.blocks
                .iter()
                .flatten()
                .filter_map(|t| match t {
                    Tx::Trx { id, to: r, sun } if r == to => Some((id.clone(), *sun)),
                    Tx::Token { id, to: r, units, ok: true, .. } if r == to => Some((id.clone(), *units)),
                    _ => None,
                })
                .collect()
        })
    }

    /// Every transaction `owner` broadcast, decoded, once each (the same bytes sent again count
    /// once).
    pub fn sent_by(&self, owner: &[u8; 20]) -> Vec<tron_tx::Raw> {
        self.with(|l| {
            let mut seen = std::collections::HashSet::new();
            l.broadcasts
                .iter()
                .filter_map(|b| tron_tx::decode(b).ok())
                .filter(|(raw, _)| raw.owner == *owner && seen.insert(raw.id()))
                .map(|(raw, _)| raw)
                .collect()
        })
    }

    /// The sun `id` holds at the newest block.
    pub fn trx_of(&self, id: &[u8; 20]) -> u64 {
        self.with(|l| l.trx_of(id, l.blocks.len() as u64, false))
    }

    /// The units of `contract` `holder` holds at the newest block.
    pub fn units_of(&self, contract: &[u8; 20], holder: &[u8; 20]) -> u64 {
        self.with(|l| l.units_of(contract, holder, l.blocks.len() as u64))
    }

    /// What transaction `id`'s sender burnt (`keep_balances`).
    pub fn burnt(&self, id: &str) -> Option<u64> {
        self.with(|l| l.sent.get(id).map(|s| s.fee))
    }

    /// The node drops every block before `height` (a lite full node's pruning).
    pub fn prune_before(&self, height: u64) {
        self.with(|l| l.first_held = height);
    }

    /// A fork from `height` on: block `height` and every later one are replaced by empty
    /// blocks, one more than were dropped (the heavier chain wins). Their transactions are
    /// forgotten (a double spend), or back in the mempool with `to_mempool`.
    pub fn fork_from(&self, height: u64, to_mempool: bool) {
        self.with(|l| {
            let dropped: Vec<Vec<Tx>> = l.blocks.drain((height - 1) as usize..).collect();
            l.fork += 1;
            l.blocks.extend(std::iter::repeat_with(Vec::new).take(dropped.len() + 1));
            if to_mempool {
                l.pending.extend(dropped.into_iter().flatten());
            }
        });
    }
}

/// Block `height` as a node whose newest block is `head` answers it (`{}`: not held).
fn block_json(l: &Ledger, height: u64, head: u64) -> Value {
    let held = height >= l.first_held && height <= head;
    let Some(txs) = height.checked_sub(1).and_then(|i| l.blocks.get(i as usize)).filter(|_| held) else {
        return json!({});
    };
    json!({
        "blockID": block_id(l, height),
        "block_header": {"raw_data": {"number": height, "timestamp": timestamp(height),
                                      "parentHash": block_id(l, height.saturating_sub(1))}},
        "transactions": txs.iter().map(Tx::block_json).collect::<Vec<_>>(),
    })
}

/// The block holding transaction `id` on a node whose newest block is `head`.
fn find(l: &Ledger, id: &str, head: u64) -> Option<(u64, Tx)> {
    l.blocks
        .iter()
        .take(head as usize)
        .enumerate()
        .find_map(|(i, txs)| txs.iter().find(|t| t.id() == id).map(|t| (i as u64 + 1, t.clone())))
        .filter(|(h, _)| *h >= l.first_held)
}

/// An address of a request: base58 (`T…`) with `visible: true`, else hex (`41…`).
fn account_in(v: &Value, visible: bool) -> Option<[u8; 20]> {
    let s = v.as_str()?;
    if visible {
        return domain::chain::address::tron::account_id_of(s);
    }
    hex::decode(s.strip_prefix("41")?).ok()?.try_into().ok()
}

/// An address as an answer shows it: as the request asked (`visible`).
fn account_out(id: &[u8; 20], visible: bool) -> String {
    if visible { domain::chain::address::tron::address_of(id) } else { format!("41{}", hex::encode(id)) }
}

/// `/wallet/getaccount` on a node whose newest block is `head`.
fn account_json(l: &Ledger, body: &Value, head: u64) -> Value {
    let visible = body["visible"] == true;
    let Some(id) = account_in(&body["address"], visible) else {
        return json!({"Error": "class java.lang.IllegalArgumentException : Invalid address"});
    };
    let received = l.blocks.iter().take(head as usize).flatten().any(|t| matches!(t, Tx::Trx { to, .. } if *to == id));
    if !received {
        return json!({});
    }
    let mut account = json!({"address": account_out(&id, visible), "create_time": timestamp(1),
                              "account_resource": {}, "owner_permission": {"permission_name": "owner", "threshold": 1}});
    let sun = l.trx_of(&id, head, false);
    if sun > 0 {
        account["balance"] = json!(sun);
    }
    account
}

/// `/wallet/triggerconstantcontract` of `balanceOf(address)` on a node whose newest block is
/// `head` (every contract is taken to be a TRC-20; another function is refused).
fn constant_call_json(l: &Ledger, body: &Value, head: u64) -> Value {
    let visible = body["visible"] == true;
    let refuse =
        |message: &str| json!({"result": {"code": "CONTRACT_VALIDATE_ERROR", "message": hex::encode(message)}});
    let (Some(contract), Some(_owner)) =
        (account_in(&body["contract_address"], visible), account_in(&body["owner_address"], visible))
    else {
        return refuse("Invalid address");
    };
    let parameter = body["parameter"].as_str().unwrap_or("");
    if body["function_selector"] == "transfer(address,uint256)" && parameter.len() == 128 {
        return json!({
            "result": {"result": true},
            "energy_used": TRC20_ENERGY,
            "constant_result": [format!("{:064x}", 1)],
        });
    }
    let holder: Option<[u8; 20]> =
        parameter.get(24..64).filter(|_| parameter.len() == 64).and_then(|h| hex::decode(h).ok()?.try_into().ok());
    let (Some("balanceOf(address)"), Some(holder)) = (body["function_selector"].as_str(), holder) else {
        return refuse("REVERT opcode executed");
    };
    let units = l.units_of(&contract, &holder, head);
    json!({
        "result": {"result": true},
        "energy_used": 935,
        "constant_result": [format!("{units:064x}")],
        "transaction": {"ret": [{}], "visible": visible, "txID": format!("{:064x}", head),
                        "raw_data": {"contract": [{"type": "TriggerSmartContract", "parameter": {"value": {
                            "data": format!("70a08231{parameter}"), "owner_address": body["owner_address"],
                            "contract_address": body["contract_address"]}}}]}},
    })
}

/// `Num:<height>,ID:<block id>`, as `/wallet/getnodeinfo` names a block.
fn node_info_block(l: &Ledger, height: u64) -> String {
    format!("Num:{height},ID:{}", block_id(l, height))
}

async fn call(
    State(state): State<Shared<Ledger>>,
    Path((api, method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    let mut l = state.lock().unwrap();
    if api != "wallet" {
        // A java-tron full node's HTTP port serves `/wallet/*` only.
        return StatusCode::NOT_FOUND.into_response();
    }
    let num = body["num"].as_u64().unwrap_or(0);
    let id = body["value"].as_str().unwrap_or("").to_owned();
    // The node (behind the load balancer) this call reaches: `lag` blocks behind the newest.
    let mut lag = l.lagging.pop_front().unwrap_or(0);
    if matches!(method.as_str(), "gettransactioninfobyid" | "gettransactionbyid") {
        lag = lag.max(l.info_lag);
    }
    let head = (l.blocks.len() as u64).saturating_sub(lag);
    Json(match method.as_str() {
        "broadcasthex" => l.broadcast(body["transaction"].as_str().unwrap_or("")),
        "getnowblock" => block_json(&l, head, head),
        "getnodeinfo" => json!({
            "beginSyncNum": head, "block": node_info_block(&l, head),
            "solidityBlock": node_info_block(&l, head.saturating_sub(SOLID_LAG).max(1)),
            "currentConnectCount": 3, "activeConnectCount": 2, "passiveConnectCount": 1, "totalFlow": 0,
            "peerInfoList": [], "configNodeInfo": {"codeVersion": "4.8.0"}, "machineInfo": {}, "cheatWitnessInfoMap": {},
        }),
        "getblockbynum" => block_json(&l, num, head),
        "getaccount" => account_json(&l, &body, head),
        "triggerconstantcontract" => constant_call_json(&l, &body, head),
        "gettransactioninfobyblocknum" => {
            let txs = num.checked_sub(1).filter(|_| num <= head).and_then(|i| l.blocks.get(i as usize));
            Value::Array(txs.into_iter().flatten().map(|t| l.info(t, num)).collect())
        }
        "gettransactioninfobyid" => find(&l, &id, head).map_or(json!({}), |(h, t)| l.info(&t, h)),
        "getchainparameters" => json!({"chainParameter": [
            {"key": "getMaintenanceTimeInterval", "value": 21_600_000},
            {"key": "getTransactionFee", "value": TRANSACTION_FEE},
            {"key": "getEnergyFee", "value": ENERGY_FEE},
            {"key": "getCreateAccountFee", "value": 100_000},
        ]}),
        "gettransactionbyid" => {
            let waiting = l.pending.iter().chain(&l.queued).filter(|_| lag == 0).find(|t| t.id() == id).cloned();
            match find(&l, &id, head).map(|(_, t)| t).or(waiting) {
                Some(t) => t.block_json(),
                None => json!({}),
            }
        }
        other => json!({"Error": format!("unknown method {other}")}),
    })
    .into_response()
}
