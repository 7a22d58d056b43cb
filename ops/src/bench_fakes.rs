//! In-process fake nodes for `ops bench-scan` on chains without node software here (TRON,
//! Solana, XRP): each answers exactly the calls its live adapter makes while scanning, with
//! blocks computed from the height alone. Blocks `start + 1 ..= start + blocks` hold the
//! pre-generated receivers in order, `per_block` to a block, one transfer each; every other
//! block is empty. Nothing is stored per block, so the answers cost little next to the
//! scanner measured (though they are built on the same runtime, inside the measured time).

use std::ops::Range;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::post;
use serde_json::{Value, json};

/// Which receivers the blocks pay.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The last empty block before the transfers.
    pub start: u64,
    /// The tip: `start + blocks`.
    pub end: u64,
    pub per_block: usize,
    pub transfers: usize,
}

impl Layout {
    pub fn new(start: u64, blocks: u64, transfers: usize) -> Layout {
        Layout { start, end: start + blocks, per_block: transfers.div_ceil(blocks.max(1) as usize), transfers }
    }

    /// The indices of the receivers paid in blocks `min..=max`.
    fn span(&self, min: u64, max: u64) -> Range<usize> {
        // The transfers in blocks up to `h`.
        let upto = |h: u64| {
            let blocks = usize::try_from(h.clamp(self.start, self.end) - self.start).unwrap_or(usize::MAX);
            blocks.saturating_mul(self.per_block).min(self.transfers)
        };
        let lo = upto(min.saturating_sub(1));
        lo..upto(max).max(lo)
    }

    /// The block holding transfer `i`.
    fn block_of(&self, i: usize) -> u64 {
        self.start + 1 + (i / self.per_block.max(1)) as u64
    }

    /// The smallest amount of transfer `i` in base units: one whole unit plus `i`.
    fn units(i: usize, decimals: u32) -> u64 {
        10u64.pow(decimals) + i as u64
    }
}

/// A fake node serving on 127.0.0.1, stopped when dropped.
pub struct FakeNode {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(router: axum::Router) -> anyhow::Result<FakeNode> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(FakeNode { url, task })
}

/// A JSON-RPC 2.0 answer to `request` (Solana, rippled).
fn rpc_answer(request: &Value, result: Result<Value, &str>) -> Json<Value> {
    Json(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": request["id"], "result": result}),
        Err(message) => json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": message}}),
    })
}

/// A 32-byte hash as 64 hex digits, unique per (block, position).
fn hash64(h: u64, i: usize) -> String {
    format!("{h:016x}{:048x}", i)
}

// TRON: java-tron's HTTP API (`POST /wallet/<method>`), addresses in hex (`41` + 20 bytes).

struct Tron {
    layout: Layout,
    /// The receivers' 20-byte ids, hex.
    receivers: Vec<String>,
    /// The TRC-20 contract's id, hex (`tron_usdt`); `None` pays TRX.
    token: Option<String>,
}

const TRON_SENDER: &str = "41f0cc5a2a84cd0f68ed1667070934542d673acbd8";

/// A fake java-tron node paying `receivers` (20-byte ids) TRX, or with `token` (the contract's
/// id) TRC-20 tokens.
pub async fn tron(layout: Layout, receivers: &[[u8; 20]], token: Option<[u8; 20]>) -> anyhow::Result<FakeNode> {
    let state = Tron { layout, receivers: receivers.iter().map(hex::encode).collect(), token: token.map(hex::encode) };
    serve(axum::Router::new().route("/wallet/{method}", post(tron_call)).with_state(Arc::new(state))).await
}

async fn tron_call(State(s): State<Arc<Tron>>, Path(method): Path<String>, Json(body): Json<Value>) -> Json<Value> {
    let n = body["num"].as_u64().unwrap_or(0);
    Json(match method.as_str() {
        "getnowblock" => tron_block(&s, s.layout.end, false),
        "getblockbynum" if n > s.layout.end => json!({}),
        "getblockbynum" => tron_block(&s, n, s.token.is_none()),
        "gettransactioninfobyblocknum" => match &s.token {
            Some(contract) => tron_infos(&s, contract, n),
            None => json!([]),
        },
        other => json!({"Error": format!("the bench node does not serve {other}")}),
    })
}

fn tron_block(s: &Tron, h: u64, with_trx: bool) -> Value {
    let txs: Vec<Value> = if with_trx {
        s.layout
            .span(h, h)
            .map(|i| {
                let transfer = json!({"amount": Layout::units(i, 6), "owner_address": TRON_SENDER,
                                      "to_address": format!("41{}", s.receivers[i])});
                json!({"txID": hash64(h, i), "ret": [{"contractRet": "SUCCESS"}],
                       "raw_data": {"contract": [{"type": "TransferContract", "parameter": {"value": transfer}}]}})
            })
            .collect()
    } else {
        Vec::new()
    };
    json!({"blockID": hash64(h, usize::MAX), "block_header": {"raw_data": {"number": h}}, "transactions": txs})
}

fn tron_infos(s: &Tron, contract: &str, h: u64) -> Value {
    let topic = workers::chain::evm::TRANSFER_TOPIC.trim_start_matches("0x");
    let from = format!("{:0>64}", &TRON_SENDER[2..]);
    s.layout
        .span(h, h)
        .map(|i| {
            let log = json!({"address": contract, "topics": [topic, from, format!("{:0>64}", s.receivers[i])],
                             "data": format!("{:064x}", Layout::units(i, 6))});
            json!({"id": hash64(h, i), "blockNumber": h, "receipt": {"result": "SUCCESS"}, "log": [log]})
        })
        .collect()
}

// Solana: JSON-RPC, `getBlock` in jsonParsed form.

struct Solana {
    layout: Layout,
    /// Each receiver's address and (USDC) a stand-in for its associated token account: the
    /// adapter credits a token balance's `owner`, whatever the account.
    receivers: Vec<(String, String)>,
    mint: Option<String>,
}

const SOL_PAYER: &str = "8qbHbw2BbbTHBW1sbeqakYXVKRQM8Ne7pLK7m6CVfeR";
const SOL_PAYER_TOKENS: &str = "3emsAVdmGKERbHjmGfQ6oZ1e35dkf5iYcS6U4CPKFVaa";
const PAYER_FUNDS: u64 = 1 << 60;

/// A fake Solana RPC node paying `receivers` (32-byte keys) SOL, or with `mint` that token.
pub async fn solana(layout: Layout, receivers: &[[u8; 32]], mint: Option<String>) -> anyhow::Result<FakeNode> {
    let receivers = receivers
        .iter()
        .map(|k| {
            let account: Vec<u8> = k.iter().map(|b| !b).collect();
            (bs58::encode(k).into_string(), bs58::encode(account).into_string())
        })
        .collect();
    let state = Solana { layout, receivers, mint };
    serve(axum::Router::new().route("/", post(solana_call)).with_state(Arc::new(state))).await
}

async fn solana_call(State(s): State<Arc<Solana>>, Json(req): Json<Value>) -> Json<Value> {
    let p = &req["params"];
    let end = s.layout.end;
    let result = match req["method"].as_str().unwrap_or("") {
        "getSlot" | "getBlockHeight" => Ok(json!(end)),
        "minimumLedgerSlot" => Ok(json!(0)),
        "getBlocks" => {
            let (from, to) = (p[0].as_u64().unwrap_or(0), p[1].as_u64().unwrap_or(end).min(end));
            Ok(json!((from..=to).collect::<Vec<u64>>()))
        }
        "getBlock" => Ok(p[0].as_u64().filter(|slot| *slot <= end).map_or(Value::Null, |slot| solana_block(&s, slot))),
        _ => Err("method not served by the bench node"),
    };
    rpc_answer(&req, result)
}

fn solana_block(s: &Solana, slot: u64) -> Value {
    let key = |pubkey: &str, signer: bool| json!({"pubkey": pubkey, "signer": signer, "writable": true});
    let balance = |index: usize, owner: &str, mint: &str, amount: u64| {
        json!({"accountIndex": index, "mint": mint, "owner": owner,
               "uiTokenAmount": {"amount": amount.to_string(), "decimals": 6}})
    };
    let txs: Vec<Value> = s
        .layout
        .span(slot, slot)
        .map(|i| {
            let (receiver, token_account) = &s.receivers[i];
            let mut sig = [0u8; 64];
            sig[..8].copy_from_slice(&slot.to_be_bytes());
            sig[8..16].copy_from_slice(&(i as u64).to_be_bytes());
            let sig = bs58::encode(sig).into_string();
            let (keys, meta) = match &s.mint {
                None => {
                    let sent = Layout::units(i, 9);
                    let keys = json!([key(SOL_PAYER, true), key(receiver, false)]);
                    (keys, json!({"preBalances": [PAYER_FUNDS, 0], "postBalances": [PAYER_FUNDS - sent - 5000, sent],
                                  "preTokenBalances": [], "postTokenBalances": []}))
                }
                Some(mint) => {
                    let sent = Layout::units(i, 6);
                    let keys = json!([key(SOL_PAYER, true), key(SOL_PAYER_TOKENS, false), key(token_account, false)]);
                    let pre = [balance(1, SOL_PAYER, mint, PAYER_FUNDS), balance(2, receiver, mint, 0)];
                    let post = [balance(1, SOL_PAYER, mint, PAYER_FUNDS - sent), balance(2, receiver, mint, sent)];
                    let rent = 2_039_280u64;
                    (keys, json!({"preBalances": [PAYER_FUNDS, rent, rent], "postBalances": [PAYER_FUNDS - 5000, rent, rent],
                                  "preTokenBalances": pre, "postTokenBalances": post}))
                }
            };
            let mut meta = meta;
            meta["err"] = Value::Null;
            meta["fee"] = json!(5000);
            json!({"transaction": {"signatures": [sig], "message": {"accountKeys": keys}}, "meta": meta})
        })
        .collect();
    json!({"blockHeight": slot, "parentSlot": slot.saturating_sub(1), "blockhash": hash64(slot, 0),
           "transactions": txs})
}

// XRP: rippled's JSON-RPC; every payment to the operator's one address, told apart by tag.

struct Xrp {
    layout: Layout,
    operator: String,
}

const XRP_PAYER: &str = "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe";

/// A fake rippled paying the `operator` address, the receiver `i` with destination tag `i + 1`.
pub async fn xrp(layout: Layout, operator: String) -> anyhow::Result<FakeNode> {
    serve(axum::Router::new().route("/", post(xrp_call)).with_state(Arc::new(Xrp { layout, operator }))).await
}

async fn xrp_call(State(s): State<Arc<Xrp>>, Json(req): Json<Value>) -> Json<Value> {
    let p = &req["params"][0];
    let end = s.layout.end;
    let result = match req["method"].as_str().unwrap_or("") {
        "ledger" => json!({"ledger_index": end, "ledger_hash": hash64(end, 0), "validated": true, "status": "success"}),
        "account_tx" => xrp_account_tx(&s, p),
        other => json!({"status": "error", "error": "unknownCmd", "error_message": format!("{other} not served")}),
    };
    rpc_answer(&req, Ok(result))
}

/// One page (`limit`) of the operator's payments in ledgers `ledger_index_min..=max`, oldest
/// first, from `marker` (`{ledger, seq}`: the next payment's ledger and receiver).
fn xrp_account_tx(s: &Xrp, p: &Value) -> Value {
    let min = p["ledger_index_min"].as_u64().unwrap_or(1).max(1);
    let max = p["ledger_index_max"].as_u64().unwrap_or(s.layout.end).min(s.layout.end);
    let limit = p["limit"].as_u64().unwrap_or(200).clamp(1, 400) as usize;
    let span = s.layout.span(min, max);
    let from = p["marker"]["seq"].as_u64().map_or(span.start, |i| i as usize).clamp(span.start, span.end);
    let page = from..(from + limit).min(span.end);
    let txs: Vec<Value> = page
        .clone()
        .map(|i| {
            let (drops, ledger) = (Layout::units(i, 6).to_string(), s.layout.block_of(i));
            let tx = json!({"TransactionType": "Payment", "Account": XRP_PAYER, "Destination": s.operator,
                            "DestinationTag": i + 1, "Amount": drops, "Fee": "12", "Sequence": i + 1,
                            "hash": hash64(ledger, i).to_ascii_uppercase(), "ledger_index": ledger});
            json!({"tx": tx, "meta": {"TransactionResult": "tesSUCCESS", "delivered_amount": drops},
                   "validated": true})
        })
        .collect();
    let mut out = json!({"account": s.operator, "ledger_index_min": min, "ledger_index_max": max, "limit": limit,
                         "transactions": txs, "validated": true, "status": "success"});
    if page.end < span.end {
        out["marker"] = json!({"ledger": s.layout.block_of(page.end), "seq": page.end});
    }
    out
}
