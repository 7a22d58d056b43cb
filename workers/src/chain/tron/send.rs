//! What a TRON node's answer to `/wallet/broadcasthex` means for the payout executor.
//!
//! java-tron validates a transaction before its pending pool (`Wallet.broadcastTransaction`)
//! and answers a refusal with a `code` and a hex-encoded `message`. Most codes say what can pass
//! (a busy node, the hot wallet short of bandwidth, an expired or unknown reference block: the
//! same transaction is sent again, and signed again once `outgoing` says it expired). A
//! `CONTRACT_VALIDATE_ERROR` is read by its text (`Contract validate error : …`): the
//! actuators' checks of the contract itself never change for the same signed bytes, while a
//! short balance or an account not activated yet pass once the hot wallet is funded.

use serde_json::Value;

use crate::chain::Broadcast;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Can pass later: the same transaction is sent again.
    Retry,
    /// Can never be valid: the payout fails (TRON has no nonce, nothing is left behind).
    Rejected,
}

/// `CONTRACT_VALIDATE_ERROR` texts (lower case, matched as substrings, first match wins) of
/// java-tron's `TransferActuator`, `VMActuator` (`TriggerSmartContract`) and
/// `BandwidthProcessor`. Anything not listed is retried.
const VALIDATE_ERRORS: &[(&str, Class)] = &[
    // The hot wallet: short of TRX for the amount (and a new recipient's activation fee) or for
    // a call's value, or not activated yet (no account): it passes once funded.
    ("balance is not sufficient", Class::Retry),
    ("no owneraccount", Class::Retry),
    ("does not exist", Class::Retry),
    // The committee switched the VM off: it passes once it is on again.
    ("vm work is off", Class::Retry),
    // The transaction itself: a payout to the hot wallet's own address, TRX to a contract
    // account, a non-positive amount, a malformed address, a token contract that is not one
    // (a wrong `usdt_contract`), a `fee_limit_sun` above the network's maximum.
    ("cannot transfer trx to yourself", Class::Rejected),
    ("cannot transfer trx to a smartcontract", Class::Rejected),
    ("amount must be greater than 0", Class::Rejected),
    ("invalid toaddress", Class::Rejected),
    ("invalid owneraddress", Class::Rejected),
    ("no contract or not a smart contract", Class::Rejected),
    ("no contract!", Class::Rejected),
    ("contract type error", Class::Rejected),
    ("feelimit must be >= 0 and <=", Class::Rejected),
    ("callvalue must be >= 0", Class::Rejected),
    ("tokenvalue must be >= 0", Class::Rejected),
    ("long overflow", Class::Rejected),
];

/// The refusal `code`s (`GrpcAPI.Return.response_code`) and what they mean. Codes not listed
/// (`OTHER_ERROR`, a new one) are retried.
const CODES: &[(&str, Class)] = &[
    // The node: busy, without peers, still syncing.
    ("SERVER_BUSY", Class::Retry),
    ("NO_CONNECTION", Class::Retry),
    ("NOT_ENOUGH_EFFECTIVE_CONNECTION", Class::Retry),
    ("BLOCK_UNSOLIDIFIED", Class::Retry),
    // The hot wallet lacks TRX for bandwidth: it passes once funded.
    ("BANDWITH_ERROR", Class::Retry),
    // Its reference block is not on this node's chain yet, or it expired: sent again while it
    // may still be valid, signed again once `outgoing` says it expired.
    ("TAPOS_ERROR", Class::Retry),
    ("TRANSACTION_EXPIRATION_ERROR", Class::Retry),
    // Executing it in the node's pending state failed (a balance moved meanwhile).
    ("CONTRACT_EXE_ERROR", Class::Retry),
    // The signed bytes: a signature that is not the owner's (or no longer allowed by its
    // permissions), or a transaction above the size limit.
    ("SIGERROR", Class::Rejected),
    ("TOO_BIG_TRANSACTION_ERROR", Class::Rejected),
];

/// What `/wallet/broadcasthex` said, for the executor.
pub fn classify_broadcast(answer: &Value) -> Broadcast {
    if answer["result"] == true {
        return Broadcast::Accepted;
    }
    let code = answer["code"].as_str().unwrap_or("OTHER_ERROR");
    // java-tron hex-encodes the message.
    let message = answer["message"].as_str().unwrap_or("");
    let message =
        hex::decode(message).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_else(|| message.to_owned());
    let why = format!("{code}: {message}");
    let class = match code {
        // `Dup transaction.`, or `Transaction already exists.` from the node's cache.
        "DUP_TRANSACTION_ERROR" => return Broadcast::AlreadyKnown,
        "CONTRACT_VALIDATE_ERROR" => {
            let lower = message.to_ascii_lowercase();
            VALIDATE_ERRORS.iter().find(|(text, _)| lower.contains(text)).map_or(Class::Retry, |(_, c)| *c)
        }
        code => CODES.iter().find(|(c, _)| *c == code).map_or(Class::Retry, |(_, c)| *c),
    };
    match class {
        Class::Retry => Broadcast::Retry(why),
        Class::Rejected => Broadcast::Rejected(why),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(code: &str, message: &str) -> String {
        let answer = json!({"result": false, "code": code, "message": hex::encode(message)});
        match classify_broadcast(&answer) {
            Broadcast::Accepted => "accepted".to_owned(),
            Broadcast::AlreadyKnown => "known".to_owned(),
            Broadcast::Retry(why) => format!("retry {why}"),
            Broadcast::Rejected(why) => format!("rejected {why}"),
            Broadcast::Displaced(why) => format!("displaced {why}"),
        }
    }

    /// java-tron's own answers (`Wallet.broadcastTransaction`, the actuators' messages behind
    /// `Contract validate error : `).
    #[test]
    fn broadcast_answers_retry_what_can_pass_and_refuse_what_never_can() {
        use Class::*;
        assert_eq!(classify_broadcast(&json!({"result": true, "txid": "ab"})), Broadcast::Accepted);
        assert_eq!(kind("DUP_TRANSACTION_ERROR", "Dup transaction."), "known");
        assert_eq!(kind("DUP_TRANSACTION_ERROR", "Transaction already exists."), "known");
        let validate = |m: &str| format!("Contract validate error : {m}");
        let cases: &[(&str, String, Class)] = &[
            // the hot wallet short of funds or not activated: passes once it is funded
            ("CONTRACT_VALIDATE_ERROR", validate("Validate TransferContract error, balance is not sufficient."), Retry),
            ("CONTRACT_VALIDATE_ERROR", validate("Validate InternalTransfer error, balance is not sufficient."), Retry),
            ("CONTRACT_VALIDATE_ERROR", validate("Validate TransferContract error, no OwnerAccount."), Retry),
            ("CONTRACT_VALIDATE_ERROR", validate("account [TJRabPrwbZy45sbavfcjinPJC18kjpRTv8] does not exist"), Retry),
            ("CONTRACT_VALIDATE_ERROR", validate("VM work is off, need to be opened by the committee"), Retry),
            ("CONTRACT_VALIDATE_ERROR", validate("something new"), Retry),
            ("BANDWITH_ERROR", "Account resource insufficient error.".into(), Retry),
            ("SERVER_BUSY", "Server busy.".into(), Retry),
            ("NO_CONNECTION", "No connection.".into(), Retry),
            ("NOT_ENOUGH_EFFECTIVE_CONNECTION", "P2P broadcast failed.".into(), Retry),
            ("BLOCK_UNSOLIDIFIED", "Block unsolidified.".into(), Retry),
            ("TAPOS_ERROR", "Tapos check error.".into(), Retry),
            ("TRANSACTION_EXPIRATION_ERROR", "Transaction expired".into(), Retry),
            ("CONTRACT_EXE_ERROR", "Contract execute error : BalanceInsufficientException".into(), Retry),
            ("OTHER_ERROR", "Error: null".into(), Retry),
            ("SOMETHING_NEW", String::new(), Retry),
            // the transaction itself: never valid
            ("CONTRACT_VALIDATE_ERROR", validate("Cannot transfer TRX to yourself."), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("Cannot transfer TRX to a smartContract."), Rejected),
            (
                "CONTRACT_VALIDATE_ERROR",
                validate(
                    "Cannot transfer TRX to a smartContract which version is one. Instead please use TriggerSmartContract ",
                ),
                Rejected,
            ),
            ("CONTRACT_VALIDATE_ERROR", validate("Amount must be greater than 0."), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("Invalid toAddress!"), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("Invalid ownerAddress!"), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("No contract or not a smart contract"), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("No contract!"), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("feeLimit must be >= 0 and <= 15000000000"), Rejected),
            ("CONTRACT_VALIDATE_ERROR", validate("long overflow"), Rejected),
            ("SIGERROR", "Validate signature error: 4486 sig error".into(), Rejected),
            ("TOO_BIG_TRANSACTION_ERROR", "Too big transaction, the size is 600000 bytes".into(), Rejected),
        ];
        for (code, message, class) in cases {
            let got = kind(code, message);
            let want = match class {
                Retry => "retry",
                Rejected => "rejected",
            };
            assert!(got.starts_with(want), "{code} {message}: {got}");
            assert!(got.contains(message.as_str()), "the reason names the node's message: {got}");
        }
    }
}
