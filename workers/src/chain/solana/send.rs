//! What a Solana node's refusal of `sendTransaction` means for the payout executor. With
//! preflight, a refused transaction was simulated on the node's state and forwarded to no
//! validator: what can pass later (a blockhash the node has not seen, the hot wallet short of
//! SOL or USDC, a busy cluster) is sent again; what no retry can change (bytes that are no valid
//! transaction, a recipient's token account frozen or owned by another program, a new account
//! below the rent-exempt minimum) fails the payout and releases its funds. Anything else is
//! retried.
//!
//! An instruction's custom error is its program's own code, so it is read with the program the
//! failing instruction calls (`programs`, in the message's order).

use serde_json::Value;

use super::tx::{self, Pubkey};
use crate::chain::Broadcast;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendClass {
    /// Already processed: the same transaction, nothing new.
    AlreadyKnown,
    /// Can pass later: the same transaction is sent again (signed again once it expired).
    Retry,
    /// Can never pass: the payout fails (Solana has no nonce, nothing is left behind).
    Rejected,
}

/// JSON-RPC error codes (`solana-rpc-client-api`) that say the bytes themselves are refused.
const REJECTED_CODES: &[i64] = &[
    -32003, // TransactionSignatureVerificationFailure
    -32006, // TransactionPrecompileVerificationFailure
    -32013, // TransactionSignatureLenMismatch
    -32015, // UnsupportedTransactionVersion
    -32602, // invalid params: not a transaction
];

/// `TransactionError`s (the simulation's `err`, fieldless variants) that no retry can change:
/// the message is malformed or names accounts that cannot serve it.
const REJECTED_ERRORS: &[&str] = &[
    "AccountLoadedTwice",
    "AccountBorrowOutstanding",
    "InvalidAccountForFee",
    "InvalidAccountIndex",
    "InvalidProgramForExecution",
    "InvalidWritableAccount",
    "MissingSignatureForFee",
    "ProgramAccountNotFound",
    "SanitizeFailure",
    "SignatureFailure",
    "TooManyAccountLocks",
    "UnsupportedVersion",
    "AddressLookupTableNotFound",
    "InvalidAddressLookupTableOwner",
    "InvalidAddressLookupTableData",
    "InvalidAddressLookupTableIndex",
    "InvalidLoadedAccountsDataSizeLimit",
];

/// Generic `InstructionError`s (fieldless) that can pass: the hot wallet short of funds, or its
/// own token account missing (it is created when USDC is first sent to the hot wallet).
const RETRIED_INSTRUCTION_ERRORS: &[&str] = &["InsufficientFunds", "InvalidAccountData", "UninitializedAccount"];

/// Generic `InstructionError`s (fieldless) that no retry can change: an account owned by the
/// wrong program, bad instruction data, a missing signature, a compute budget too small.
const REJECTED_INSTRUCTION_ERRORS: &[&str] = &[
    "IllegalOwner",
    "InvalidAccountOwner",
    "IncorrectProgramId",
    "InvalidInstructionData",
    "InvalidArgument",
    "MissingRequiredSignature",
    "NotEnoughAccountKeys",
    "AccountDataTooSmall",
    "IncorrectAuthority",
    "Immutable",
    "InvalidSeeds",
    "ArithmeticOverflow",
    "ComputationalBudgetExceeded",
    "ExternalAccountLamportSpend",
    "ReadonlyLamportChange",
    "ReadonlyDataModified",
    "PrivilegeEscalation",
    "UnsupportedProgramId",
    "UnsupportedSysvar",
];

/// Custom errors that can pass, by program: System `ResultWithNegativeLamports` (1: the hot
/// wallet short of SOL), SPL Token `InsufficientFunds` (1: the hot wallet short of USDC). Every
/// other custom error of these programs (SPL Token `AccountFrozen` 17, `MintDecimalsMismatch`
/// 18, `OwnerMismatch` 4, `MintMismatch` 3; Associated Token Account `InvalidOwner` 0; …) is
/// about the accounts or the bytes themselves, and is refused for good; another program's is
/// retried.
fn custom_error(program: Option<&Pubkey>, code: u64) -> SendClass {
    let is = |id: &str| program.is_some_and(|p| tx::pubkey(id).as_ref() == Some(p));
    if program == Some(&tx::SYSTEM_PROGRAM) || is(tx::TOKEN_PROGRAM) {
        return if code == 1 { SendClass::Retry } else { SendClass::Rejected };
    }
    if is(tx::ASSOCIATED_TOKEN_PROGRAM) || is(tx::COMPUTE_BUDGET_PROGRAM) {
        return SendClass::Rejected;
    }
    SendClass::Retry
}

/// The class of a `sendTransaction` error object (`code`, `message`, `data.err`), for a
/// transaction whose instructions call `programs`.
pub fn send_class(error: &Value, programs: &[Pubkey]) -> SendClass {
    let err = &error["data"]["err"];
    if *err == "AlreadyProcessed" {
        return SendClass::AlreadyKnown;
    }
    if error["code"].as_i64().is_some_and(|c| REJECTED_CODES.contains(&c)) {
        return SendClass::Rejected;
    }
    if let Some(name) = err.as_str() {
        return if REJECTED_ERRORS.contains(&name) { SendClass::Rejected } else { SendClass::Retry };
    }
    // A new recipient account left below the rent-exempt minimum can never pass; the hot
    // wallet's own (account 0) can, once it is funded.
    if let Some(i) = err["InsufficientFundsForRent"]["account_index"].as_u64() {
        return if i == 0 { SendClass::Retry } else { SendClass::Rejected };
    }
    if let Some([index, inner]) = err["InstructionError"].as_array().map(Vec::as_slice) {
        let program = index.as_u64().and_then(|i| programs.get(usize::try_from(i).ok()?));
        if let Some(code) = inner["Custom"].as_u64() {
            return custom_error(program, code);
        }
        if let Some(name) = inner.as_str() {
            if RETRIED_INSTRUCTION_ERRORS.contains(&name) {
                return SendClass::Retry;
            }
            if REJECTED_INSTRUCTION_ERRORS.contains(&name) {
                return SendClass::Rejected;
            }
        }
    }
    // The blockhash not seen yet, the fee payer not funded, a busy cluster or node, or an answer
    // not known here: kept and sent again (signed again once it expired).
    SendClass::Retry
}

/// What `sendTransaction`'s error says about a payout transaction calling `programs`.
pub fn classify_send_error(error: &Value, programs: &[Pubkey]) -> Broadcast {
    let message = error["message"].as_str().unwrap_or("");
    let err = &error["data"]["err"];
    let why = if err.is_null() { message.to_owned() } else { format!("{message} ({err})") };
    match send_class(error, programs) {
        SendClass::AlreadyKnown => Broadcast::AlreadyKnown,
        SendClass::Retry => Broadcast::Retry(why),
        SendClass::Rejected if err["InsufficientFundsForRent"].is_object() => {
            Broadcast::Rejected(format!("{why}: a new account needs at least the rent-exempt minimum"))
        }
        SendClass::Rejected => Broadcast::Rejected(why),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The programs of a USDC payout with a priority fee: compute budget ×2, the Associated
    /// Token Account program's `CreateIdempotent`, SPL Token `TransferChecked`.
    fn usdc() -> Vec<Pubkey> {
        let p = |a: &str| tx::pubkey(a).unwrap();
        vec![
            p(tx::COMPUTE_BUDGET_PROGRAM),
            p(tx::COMPUTE_BUDGET_PROGRAM),
            p(tx::ASSOCIATED_TOKEN_PROGRAM),
            p(tx::TOKEN_PROGRAM),
        ]
    }

    /// A SOL payout without a priority fee: one system transfer.
    fn sol() -> Vec<Pubkey> {
        vec![tx::SYSTEM_PROGRAM]
    }

    fn preflight(err: Value) -> Value {
        json!({"code": -32002, "message": "Transaction simulation failed: m", "data": {"err": err, "logs": []}})
    }

    /// The `err` objects as solders' LiteSVM returns them for the real programs (frozen account:
    /// `[1, {"Custom": 17}]`, the hot wallet short of USDC `[1, {"Custom": 1}]` or of SOL
    /// `[0, {"Custom": 1}]`, its token account missing `[1, "InvalidAccountData"]`, decimals
    /// `[1, {"Custom": 18}]`), placed at the instruction they fail in our payouts.
    #[test]
    fn send_errors_retry_what_can_pass_and_refuse_what_never_can() {
        use SendClass::*;
        let cases: &[(Value, &[Pubkey], SendClass)] = &[
            (preflight(json!("AlreadyProcessed")), &sol(), AlreadyKnown),
            // can pass
            (preflight(json!("BlockhashNotFound")), &sol(), Retry),
            (preflight(json!("InsufficientFundsForFee")), &sol(), Retry),
            (preflight(json!("AccountNotFound")), &sol(), Retry),
            (preflight(json!("AccountInUse")), &sol(), Retry),
            (preflight(json!("WouldExceedMaxBlockCostLimit")), &sol(), Retry),
            (preflight(json!("ClusterMaintenance")), &sol(), Retry),
            (preflight(json!({"InsufficientFundsForRent": {"account_index": 0}})), &sol(), Retry),
            (preflight(json!({"InstructionError": [0, {"Custom": 1}]})), &sol(), Retry),
            (preflight(json!({"InstructionError": [3, {"Custom": 1}]})), &usdc(), Retry),
            (preflight(json!({"InstructionError": [3, "InvalidAccountData"]})), &usdc(), Retry),
            (preflight(json!({"InstructionError": [0, "InsufficientFunds"]})), &sol(), Retry),
            (preflight(json!({"InstructionError": [0, {"Custom": 6000}]})), &[[9; 32]], Retry),
            (preflight(json!({"InstructionError": [7, {"Custom": 17}]})), &usdc(), Retry),
            (preflight(json!({"SomethingNew": 1})), &sol(), Retry),
            (json!({"code": -32005, "message": "Node is unhealthy"}), &sol(), Retry),
            (json!({"code": -32016, "message": "Minimum context slot has not been reached"}), &sol(), Retry),
            (json!({"code": -32603, "message": "internal error"}), &sol(), Retry),
            // never
            (json!({"code": -32003, "message": "Transaction signature verification failure"}), &sol(), Rejected),
            (json!({"code": -32602, "message": "invalid transaction: failed to deserialize"}), &sol(), Rejected),
            (json!({"code": -32013, "message": "Transaction signature length mismatch"}), &sol(), Rejected),
            (preflight(json!("SignatureFailure")), &sol(), Rejected),
            (preflight(json!("SanitizeFailure")), &sol(), Rejected),
            (preflight(json!("InvalidAccountForFee")), &sol(), Rejected),
            (preflight(json!("ProgramAccountNotFound")), &sol(), Rejected),
            (preflight(json!({"InsufficientFundsForRent": {"account_index": 1}})), &sol(), Rejected),
            (preflight(json!({"InstructionError": [3, {"Custom": 17}]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [3, {"Custom": 18}]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [3, {"Custom": 4}]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [2, {"Custom": 0}]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [2, "IllegalOwner"]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [3, "InvalidAccountOwner"]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [0, "InvalidInstructionData"]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [3, "ComputationalBudgetExceeded"]})), &usdc(), Rejected),
            (preflight(json!({"InstructionError": [0, {"Custom": 2}]})), &sol(), Rejected),
        ];
        for (error, programs, class) in cases {
            assert_eq!(send_class(error, programs), *class, "{error}");
        }
        // The executor's reason names what the node said.
        let frozen = preflight(json!({"InstructionError": [3, {"Custom": 17}]}));
        match classify_send_error(&frozen, &usdc()) {
            Broadcast::Rejected(why) => assert!(why.contains("Custom") && why.contains("17"), "{why}"),
            other => panic!("{other:?}"),
        }
        let rent = preflight(json!({"InsufficientFundsForRent": {"account_index": 1}}));
        match classify_send_error(&rent, &sol()) {
            Broadcast::Rejected(why) => assert!(why.contains("rent-exempt minimum"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
