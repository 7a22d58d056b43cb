//! Live XRP (`xrp`) over rippled's JSON-RPC. Every deposit goes to the operator's one address
//! (`addresses.live.xrp_address`) with the invoice's destination tag, so the scanner reads that
//! one account's transactions (`account_tx` over the ledgers since its cursor, following the
//! marker), whose cost does not grow with the number of open invoices.
//!
//! - Only validated ledgers are read (the tip is the newest validated ledger): "immediate"
//!   confirmation is validation, and a validated ledger is never replaced.
//! - A deposit is a `Payment` to the operator's address with a `DestinationTag`, in a validated
//!   transaction whose `TransactionResult` is `tesSUCCESS`, for the XRP it actually delivered
//!   (`meta.delivered_amount`, so a partial payment counts only what arrived; an issued-currency
//!   amount is not XRP). A payment without a tag, or with a tag no invoice holds, credits
//!   nobody: the scanner records it as an unclaimed deposit (`ops deposits unclaimed`, a
//!   warning and `paygate_unclaimed_deposits_total`) for the operator to refund by hand.
//! - The tracker asks `tx`: validated and successful counts its depth; not validated yet is
//!   unconfirmed; unknown (`txnNotFound`) or failed is `Gone`, which reverses nothing before the
//!   tracker's span of missing checks (a lagging or pruned node can miss a transaction).
//! - Payouts (`wallet`: the hot wallet's signer; `codec`: the binary format; `send`: what a
//!   `submit` answer means): `submit` sends a signed blob; `tefPAST_SEQ` is read further (the
//!   account's validated `Sequence` past it and the blob in no validated ledger of its window:
//!   another transaction took it, `Displaced`). [`Chain::outgoing`] reads it back with `tx`
//!   within its validity window (`LastLedgerSequence` less the largest `last_ledger_offset`
//!   allowed, up to it), in either API version's answer (v1: fields at the top; v2: under
//!   `tx_json`). Validated and `tesSUCCESS` counts its depth (its `Fee` is the network fee); a
//!   validated `tec…` failed (fee taken, `Sequence` used). Not found once the newest validated ledger is past its `LastLedgerSequence`, with
//!   `searched_all` over the window and the account's validated `Sequence` not past its own,
//!   it expired unseen (the executor signs it again with the same `Sequence`); a `Sequence`
//!   used by another transaction fails the payout.

pub mod codec;
mod send;
pub mod wallet;

use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{Value, json};

pub use send::classify_submit;

use super::evm::Rpc;
use super::{Broadcast, Chain, ChainError, Outgoing, SignedTx, Transfer, TxStatus};
use domain::addresses::address_key;
use domain::chain::address::AddressFamily;
use domain::config::XrpConfig;
use domain::gates::{self, Gate};

pub struct XrpChain {
    gate: &'static Gate,
    rpc: Rpc,
    /// The operator's classic address every deposit goes to.
    account: String,
    page_size: u32,
}

/// The live XRP chain configured in `cfg` (`[xrp]`) for the operator's `account`: none when no
/// node or no account is set.
pub fn chains(cfg: &XrpConfig, account: Option<&str>) -> Vec<Arc<dyn Chain>> {
    let (true, Some(account)) = (cfg.configured(), account) else { return Vec::new() };
    let Some(gate) = gates::GATES.iter().find(|g| g.family == AddressFamily::Xrp) else { return Vec::new() };
    let rpc = Rpc::with("XRP RPC", &cfg.rpc_url, cfg.request_timeout_ms, cfg.max_retries, cfg.retry_backoff_ms);
    vec![Arc::new(XrpChain { gate, rpc, account: account.to_owned(), page_size: cfg.page_size })]
}

fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in XRP RPC answer: {v}"))
}

/// A rippled answer: its `result`, or the error it names (`txnNotFound`, …).
fn answer(result: Value) -> Result<Value, String> {
    if result["status"].as_str() == Some("error") {
        return Err(result["error"].as_str().unwrap_or("unknown error").to_owned());
    }
    Ok(result)
}

/// A ledger index as rippled writes it (a number, or a string in `ledger.ledger_index`).
fn index(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// `method` on `rpc`, where any error the node names is a failure to retry later.
async fn fetch(rpc: &Rpc, method: &str, params: Value) -> Result<Value, ChainError> {
    answer(rpc.call(method, json!([params])).await?).map_err(|e| ChainError::Unavailable(format!("{method}: {e}")))
}

/// The newest validated ledger's index.
async fn validated_ledger(rpc: &Rpc) -> Result<u64, ChainError> {
    let r = fetch(rpc, "ledger", json!({"ledger_index": "validated"})).await?;
    r.get("ledger_index")
        .and_then(index)
        .or_else(|| index(&r["ledger"]["ledger_index"]))
        .ok_or_else(|| bad("ledger", &r))
}

/// `account`'s next `Sequence` in ledger `ledger` (`"validated"`, or `"current"`: pending
/// transactions included).
async fn account_sequence(rpc: &Rpc, account: &str, ledger: &str) -> Result<u64, ChainError> {
    let r = fetch(rpc, "account_info", json!({"account": account, "ledger_index": ledger})).await?;
    r["account_data"]["Sequence"].as_u64().ok_or_else(|| bad("account_info", &r))
}

/// XRP amounts are strings of drops (10^-6 XRP); issued currencies are objects (not XRP).
fn drops(v: &Value) -> Option<Decimal> {
    let d: i64 = v.as_str()?.parse().ok()?;
    (d > 0).then(|| Decimal::new(d, 6).normalize())
}

/// The deposit one `account_tx` entry makes to `account`, if any. Both API versions: v1's
/// `tx` (hash and ledger inside), v2's `tx_json` (hash and ledger beside it).
pub fn deposit(entry: &Value, account: &str) -> Option<Transfer> {
    let tx = entry.get("tx_json").or_else(|| entry.get("tx"))?;
    let meta = entry.get("meta").or_else(|| entry.get("metaData"))?;
    if entry["validated"] != true
        || tx["TransactionType"] != "Payment"
        || tx["Destination"].as_str() != Some(account)
        || meta["TransactionResult"] != "tesSUCCESS"
    {
        return None;
    }
    // Untagged: kept (keyed with an empty tag, which no invoice holds) so the scanner records it
    // as unclaimed for the operator.
    let tag = match tx.get("DestinationTag") {
        None | Some(Value::Null) => None,
        Some(t) => Some(u32::try_from(t.as_u64()?).ok()?),
    };
    let amount = drops(meta.get("delivered_amount").or_else(|| meta.get("DeliveredAmount"))?)?;
    let hash = entry.get("hash").or_else(|| tx.get("hash"))?.as_str()?;
    let ledger = index(entry.get("ledger_index").or_else(|| tx.get("ledger_index"))?)?;
    Some(Transfer {
        tx_hash: hash.to_ascii_uppercase(),
        output_index: 0,
        address_key: address_key(AddressFamily::Xrp, account, tag.map(|t| t.to_string()).as_deref()),
        amount,
        block_height: ledger,
    })
}

impl XrpChain {
    /// [`fetch`] on this chain's node.
    async fn fetch(&self, method: &str, params: Value) -> Result<Value, ChainError> {
        fetch(&self.rpc, method, params).await
    }
}

#[async_trait::async_trait]
impl Chain for XrpChain {
    fn gate(&self) -> &'static Gate {
        self.gate
    }

    /// The newest validated ledger.
    async fn tip(&self) -> Result<u64, ChainError> {
        validated_ledger(&self.rpc).await
    }

    /// Only the operator's account is read: a payment matching no invoice is unclaimed money.
    fn transfers_are_ours(&self) -> bool {
        true
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let mut out = Vec::new();
        let mut marker = Value::Null;
        loop {
            let mut params = json!({"account": self.account, "ledger_index_min": from, "ledger_index_max": to,
                                    "forward": true, "limit": self.page_size});
            if !marker.is_null() {
                params["marker"] = marker;
            }
            let r = self.fetch("account_tx", params).await?;
            // rippled searches only the validated ledgers it holds and says which: a range it
            // does not cover (a node with part of the history, or behind) fails the scan, which
            // is retried from its cursor, instead of passing for ledgers without payments.
            let searched = (r.get("ledger_index_min").and_then(index), r.get("ledger_index_max").and_then(index));
            if !matches!(searched, (Some(min), Some(max)) if min <= from && max >= to) {
                return Err(ChainError::Unavailable(format!(
                    "account_tx searched ledgers {:?}..={:?} of {from}..={to}: the XRP node does not hold them all",
                    searched.0, searched.1
                )));
            }
            let page = r["transactions"].as_array().ok_or_else(|| bad("account_tx", &r))?;
            out.extend(page.iter().filter_map(|e| deposit(e, &self.account)));
            marker = r.get("marker").cloned().unwrap_or(Value::Null);
            if marker.is_null() {
                return Ok(out);
            }
        }
    }

    /// `tx`, asked within the ledger the payment was recorded in: `txnNotFound` means missing
    /// only when rippled says it `searched_all` of that range. A node that keeps part of the
    /// history (`online_delete`, a new node still filling its database) cannot find older
    /// transactions and says `searched_all: false`: that answer (or a look-up without a ledger)
    /// is an error the tracker retries, never `Gone`, so no deposit is reversed because the
    /// node pruned its history.
    async fn status(&self, tx_hash: &str, _output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let mut params = json!({"transaction": tx_hash});
        if let Some(ledger) = seen_at {
            params["min_ledger"] = json!(ledger);
            params["max_ledger"] = json!(ledger);
        }
        let r = self.rpc.call("tx", json!([params])).await?;
        let tx = match answer(r.clone()) {
            Ok(tx) => tx,
            Err(e) if e == "txnNotFound" && seen_at.is_some() && r["searched_all"] == true => {
                return Ok(TxStatus::Gone);
            }
            Err(e) if e == "txnNotFound" => {
                return Err(ChainError::Unavailable(format!(
                    "tx {tx_hash}: not found, and the XRP node does not hold the whole history of ledger {} \
                     (searched_all is not true); not judged missing",
                    seen_at.map_or_else(|| "unknown".to_owned(), |l| l.to_string())
                )));
            }
            Err(e) => return Err(ChainError::Unavailable(format!("tx: {e}"))),
        };
        if tx["validated"] != true {
            return Ok(TxStatus::Confirmations(0));
        }
        let meta = tx.get("meta").unwrap_or(&Value::Null);
        if meta["TransactionResult"] != "tesSUCCESS" {
            return Ok(TxStatus::Gone);
        }
        let ledger = tx.get("ledger_index").and_then(index).ok_or_else(|| bad("ledger_index", &tx))?;
        let tip = self.tip().await?;
        Ok(TxStatus::Confirmations(tip.saturating_sub(ledger) + 1))
    }

    /// `account_info` in the newest validated ledger: `Balance` in drops (reserve included: it
    /// is on the account). An account not found there (`actNotFound`: never funded, or deleted)
    /// holds 0.
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let params = json!({"account": address, "ledger_index": "validated"});
        let r = self.rpc.call("account_info", json!([params])).await?;
        let drops = match answer(r) {
            Ok(info) => account_drops(&info)?,
            Err(e) if e == "actNotFound" => 0,
            Err(e) => return Err(ChainError::Unavailable(format!("account_info: {e}"))),
        };
        Decimal::try_from_i128_with_scale(i128::from(drops), self.gate.decimals)
            .map(|d| d.normalize())
            .map_err(|e| ChainError::Unavailable(format!("balance of {address}: {e}")))
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        let r = self.fetch("submit", json!({"tx_blob": tx.raw})).await?;
        let code = r["engine_result"].as_str().ok_or_else(|| bad("submit", &r))?;
        if code == "tefPAST_SEQ"
            && let Some(settled) = self.sequence_used(tx).await?
        {
            return Ok(settled);
        }
        Ok(classify_submit(code, r["engine_result_message"].as_str().unwrap_or("")))
    }

    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let signed =
            codec::Tx::decode(&tx.raw).map_err(|e| ChainError::Unavailable(format!("our own XRP blob: {e}")))?;
        // The widest window any configuration signs with, not today's `last_ledger_offset`: a
        // smaller offset set after signing must not hide the ledgers it was signed for.
        let last = u64::from(signed.last_ledger);
        let first = last.saturating_sub(u64::from(domain::config::XRP_MAX_LAST_LEDGER_OFFSET));
        let params = json!({"transaction": tx.tx_hash, "min_ledger": first, "max_ledger": last});
        let r = self.rpc.call("tx", json!([params])).await?;
        let found = match answer(r.clone()) {
            Ok(found) => found,
            Err(e) if e == "txnNotFound" => {
                let validated = self.tip().await?;
                if validated <= last {
                    // Its window is open: it may still enter a ledger (or was never sent).
                    return Ok(Outgoing::Unknown);
                }
                if r["searched_all"] != true {
                    return Err(ChainError::Unavailable(format!(
                        "tx {}: not found, and the XRP node does not hold all of ledgers {first}..={last} \
                         (searched_all is not true); not judged expired",
                        tx.tx_hash
                    )));
                }
                let account = xrp_address(&signed.account);
                let next = account_sequence(&self.rpc, &account, "validated").await?;
                if next > u64::from(signed.sequence) {
                    return Ok(Outgoing::Failed(format!(
                        "Sequence {} of {account} was used by another transaction",
                        signed.sequence
                    )));
                }
                return Ok(Outgoing::Expired);
            }
            Err(e) => return Err(ChainError::Unavailable(format!("tx: {e}"))),
        };
        if found["validated"] != true {
            return Ok(Outgoing::Confirmations { confirmations: 0, fee: None });
        }
        let result = found["meta"]["TransactionResult"].as_str().ok_or_else(|| bad("tx", &found))?;
        let ledger = found.get("ledger_index").and_then(index).ok_or_else(|| bad("ledger_index", &found))?;
        if result != "tesSUCCESS" {
            return Ok(Outgoing::Failed(format!("{result} in ledger {ledger}")));
        }
        let fee = fee_drops(&found).ok_or_else(|| bad("Fee", &found))?;
        let tip = self.tip().await?;
        Ok(Outgoing::Confirmations {
            confirmations: tip.saturating_sub(ledger) + 1,
            fee: Some(Decimal::new(fee, 6).normalize()),
        })
    }
}

impl XrpChain {
    /// A payout `Payment` whose `Sequence` is behind the account's (`tefPAST_SEQ`): whether a
    /// validated transaction used it. The account's validated `Sequence` is read first, then
    /// `tx` is looked for in the validated ledgers of its window up to that one: ours,
    /// validated meanwhile, is found; not found in ledgers rippled says it searched all of,
    /// another transaction took the `Sequence` and `tx` can never be applied (`Displaced`: the
    /// payout fails at once instead of after its window). `None`: not settled here (the
    /// `Sequence` not used in a validated ledger yet, a node without those ledgers), retried.
    /// Never for the no-op `AccountSet` that replaces a payout: the transaction that took its
    /// `Sequence` may be the payout itself, validated after the executor last looked at it, so
    /// that one is settled by `outgoing` (the payout's transaction first).
    async fn sequence_used(&self, tx: &SignedTx) -> Result<Option<Broadcast>, ChainError> {
        let signed =
            codec::Tx::decode(&tx.raw).map_err(|e| ChainError::Unavailable(format!("our own XRP blob: {e}")))?;
        if !matches!(signed.kind, codec::Kind::Payment { .. }) {
            return Ok(None);
        }
        let account = xrp_address(&signed.account);
        let info = self.fetch("account_info", json!({"account": account, "ledger_index": "validated"})).await?;
        let next = info["account_data"]["Sequence"].as_u64().ok_or_else(|| bad("account_info", &info))?;
        let ledger = info.get("ledger_index").and_then(index).ok_or_else(|| bad("account_info", &info))?;
        if next <= u64::from(signed.sequence) {
            return Ok(None);
        }
        let last = u64::from(signed.last_ledger).min(ledger);
        let first = u64::from(signed.last_ledger).saturating_sub(u64::from(domain::config::XRP_MAX_LAST_LEDGER_OFFSET));
        if first > last {
            return Ok(None);
        }
        let params = json!({"transaction": tx.tx_hash, "min_ledger": first, "max_ledger": last});
        let r = self.rpc.call("tx", json!([params])).await?;
        match answer(r.clone()) {
            Ok(found) if found["validated"] == true => Ok(Some(Broadcast::AlreadyKnown)),
            Err(e) if e == "txnNotFound" && r["searched_all"] == true => Ok(Some(Broadcast::Displaced(format!(
                "Sequence {} of {account} was used by another transaction, validated by ledger {ledger}",
                signed.sequence
            )))),
            _ => Ok(None),
        }
    }
}

/// The drops of an `account_info` answer (`account_data.Balance`, a string of drops); an answer
/// from a ledger that is not validated is refused (it could still change).
pub fn account_drops(info: &Value) -> Result<u64, ChainError> {
    if info["validated"] == false {
        return Err(bad("account_info (not a validated ledger)", info));
    }
    info["account_data"]["Balance"].as_str().and_then(|b| b.parse().ok()).ok_or_else(|| bad("account_info", info))
}

/// The fee (drops) a `tx` answer shows: API v1 has the transaction's fields at the top, API v2
/// under `tx_json` (with `hash`, `ledger_index`, `meta` and `validated` at the top in both).
pub fn fee_drops(found: &Value) -> Option<i64> {
    found.get("tx_json").unwrap_or(found)["Fee"].as_str()?.parse().ok()
}

fn xrp_address(account_id: &[u8; 20]) -> String {
    domain::chain::address::xrp::address_of(account_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATOR: &str = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh";

    #[test]
    fn an_accounts_balance_is_its_validated_drops() {
        let info = |balance: Value, validated: bool| {
            json!({"account_data": {"Account": OPERATOR, "Balance": balance, "Sequence": 3},
                   "ledger_index": 90, "validated": validated, "status": "success"})
        };
        assert_eq!(account_drops(&info(json!("25000000"), true)).unwrap(), 25_000_000);
        assert!(account_drops(&info(json!("25000000"), false)).is_err(), "an open ledger can change");
        assert!(account_drops(&info(json!(25.0), true)).is_err(), "drops are a string");
    }

    fn entry(tag: Option<u32>, amount: Value, delivered: Value, result: &str, validated: bool) -> Value {
        let mut tx = json!({"TransactionType": "Payment", "Account": "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe",
                            "Destination": OPERATOR, "Amount": amount, "Fee": "12", "Sequence": 7,
                            "hash": "ab12", "ledger_index": 90});
        if let Some(tag) = tag {
            tx["DestinationTag"] = json!(tag);
        }
        json!({"tx": tx, "meta": {"TransactionResult": result, "delivered_amount": delivered}, "validated": validated})
    }

    #[test]
    fn the_fee_is_read_from_tx_answers_of_both_api_versions() {
        let v1 = json!({"Account": OPERATOR, "Fee": "12", "Sequence": 7, "TransactionType": "Payment",
                        "hash": "AB12", "ledger_index": 90, "meta": {"TransactionResult": "tesSUCCESS"},
                        "validated": true});
        let v2 = json!({"tx_json": {"Account": OPERATOR, "Fee": "15", "Sequence": 7, "TransactionType": "Payment"},
                        "hash": "AB12", "ledger_index": 90, "close_time_iso": "2024-01-01T00:00:00Z",
                        "meta": {"TransactionResult": "tesSUCCESS"}, "validated": true});
        assert_eq!(fee_drops(&v1), Some(12));
        assert_eq!(fee_drops(&v2), Some(15));
        assert_eq!(fee_drops(&json!({"hash": "AB12"})), None);
    }

    #[test]
    fn a_validated_tagged_payment_counts_what_it_delivered() {
        let t = deposit(&entry(Some(42), json!("10000000"), json!("4000000"), "tesSUCCESS", true), OPERATOR).unwrap();
        assert_eq!(t.address_key, address_key(AddressFamily::Xrp, OPERATOR, Some("42")));
        assert_eq!((t.amount.to_string(), t.block_height, t.tx_hash.as_str()), ("4".into(), 90, "AB12"));
    }

    #[test]
    fn failed_unvalidated_issued_and_outgoing_payments_are_no_deposits_and_untagged_ones_match_no_invoice() {
        let ok = || entry(Some(1), json!("1"), json!("1"), "tesSUCCESS", true);
        assert!(deposit(&ok(), OPERATOR).is_some());
        let untagged = deposit(&entry(None, json!("1"), json!("1"), "tesSUCCESS", true), OPERATOR).unwrap();
        assert_eq!(untagged.address_key, format!("xrp:{OPERATOR}:"), "keyed with no tag: no invoice holds it");
        assert!(deposit(&entry(Some(1), json!("1"), json!("1"), "tecPATH_DRY", true), OPERATOR).is_none());
        assert!(deposit(&entry(Some(1), json!("1"), json!("1"), "tesSUCCESS", false), OPERATOR).is_none());
        let usd = json!({"currency": "USD", "issuer": "rvYAfWj5gh67oV6fW32ZzP3Aw4Eubs59B", "value": "5"});
        assert!(deposit(&entry(Some(1), usd.clone(), usd, "tesSUCCESS", true), OPERATOR).is_none());
        assert!(deposit(&ok(), "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe").is_none(), "sent, not received");
        // API v2: tx_json, with hash and ledger beside it.
        let v2 = json!({"tx_json": {"TransactionType": "Payment", "Destination": OPERATOR, "DestinationTag": 5},
                        "meta": {"TransactionResult": "tesSUCCESS", "delivered_amount": "2500000"},
                        "hash": "CD34", "ledger_index": 91, "validated": true});
        let t = deposit(&v2, OPERATOR).unwrap();
        assert_eq!((t.amount.to_string(), t.block_height), ("2.5".into(), 91));
    }
}
