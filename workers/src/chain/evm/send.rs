//! What a node's refusal of a sent transaction means, for every client's wording.

use serde_json::Value;

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
pub(super) fn node_error(e: &str) -> Option<(Option<i64>, String)> {
    let body = e.split_once(": ").map_or(e, |(_, rest)| rest);
    let v: Value = serde_json::from_str(body).ok()?;
    let message = v.get("message").and_then(Value::as_str)?.to_owned();
    let data = v.get("data").and_then(Value::as_str).map(|d| format!(" ({d})")).unwrap_or_default();
    Some((v.get("code").and_then(Value::as_i64), format!("{message}{data}")))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
