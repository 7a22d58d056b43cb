//! What rippled's `submit` answer (`engine_result`) means for the payout executor.
//!
//! Refused for good is safe on the XRP Ledger: the executor gives the payout's `Sequence` to a
//! no-op `AccountSet` and fails the payout only once that one is validated, so of the two at
//! most one is ever applied. Retrying is what must be earned: a refusal that no retry changes,
//! retried, keeps the payout's funds reserved, expiry after expiry, for ever. So only what can
//! pass is retried: a `Sequence` gap before it, fees and queues, an unfunded hot wallet (`ter…`,
//! most `tel…`), and the two answers `outgoing` settles once the window has passed
//! (`tefPAST_SEQ`, which [`super::XrpChain`] reads further, and `tefMAX_LEDGER`).

use crate::chain::Broadcast;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitClass {
    /// Applied to the open ledger, queued, or applied with a `tec…` failure (`outgoing` reports
    /// it once validated).
    Accepted,
    /// The same transaction is already known.
    AlreadyKnown,
    /// Can pass later: the same blob is submitted again.
    Retry,
    /// Can never be applied.
    Rejected,
}

/// `tel…` (local) results that no retry changes: the blob is wrong for this network or key.
const REJECTED_LOCAL: &[&str] = &[
    "telBAD_PUBLIC_KEY",
    "telWRONG_NETWORK",
    "telREQUIRES_NETWORK_ID",
    "telNETWORK_ID_MAKES_TX_NON_CANONICAL",
    "telNO_DST_PARTIAL",
    "telBAD_DOMAIN",
    "telBAD_PATH_COUNT",
];

/// The class of `engine_result` `code`.
pub fn submit_class(code: &str) -> SubmitClass {
    match code {
        "tesSUCCESS" | "terQUEUED" => SubmitClass::Accepted,
        c if c.starts_with("tec") => SubmitClass::Accepted,
        "tefALREADY" => SubmitClass::AlreadyKnown,
        // Its `Sequence` is behind the account's (used by this transaction already, or by
        // another), or its window has passed: `outgoing` settles both once the window is
        // behind the validated ledger (by `tx` and the account's `Sequence`).
        "tefPAST_SEQ" | "tefMAX_LEDGER" => SubmitClass::Retry,
        c if REJECTED_LOCAL.contains(&c) => SubmitClass::Rejected,
        // Local (fee, queue full, load) or retry (`ter…`: a `Sequence` gap before it, the hot
        // wallet not funded or short of the fee).
        c if c.starts_with("tel") || c.starts_with("ter") => SubmitClass::Retry,
        // Malformed (`tem…`), or failed without a fee for a reason of the transaction or the
        // account (`tef…`: a key no longer allowed to sign, a disabled master key, …).
        c if c.starts_with("tem") || c.starts_with("tef") => SubmitClass::Rejected,
        _ => SubmitClass::Retry,
    }
}

/// What rippled's `submit` said (`engine_result`, `engine_result_message`), for the executor.
pub fn classify_submit(code: &str, message: &str) -> Broadcast {
    let why = || format!("{code}: {message}");
    match submit_class(code) {
        SubmitClass::Accepted => Broadcast::Accepted,
        SubmitClass::AlreadyKnown => Broadcast::AlreadyKnown,
        SubmitClass::Retry => Broadcast::Retry(why()),
        SubmitClass::Rejected => Broadcast::Rejected(why()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rippled's result codes (`TER.cpp`).
    #[test]
    fn submit_results_retry_what_can_pass_and_refuse_what_never_can() {
        use SubmitClass::*;
        for (code, class) in [
            ("tesSUCCESS", Accepted),
            ("terQUEUED", Accepted),
            ("tecNO_DST_INSUF_XRP", Accepted),
            ("tecUNFUNDED_PAYMENT", Accepted),
            ("tefALREADY", AlreadyKnown),
            // settled by `outgoing` once the window has passed
            ("tefPAST_SEQ", Retry),
            ("tefMAX_LEDGER", Retry),
            // can pass
            ("terPRE_SEQ", Retry),
            ("terNO_ACCOUNT", Retry),
            ("terINSUF_FEE_B", Retry),
            ("terRETRY", Retry),
            ("telINSUF_FEE_P", Retry),
            ("telCAN_NOT_QUEUE_FULL", Retry),
            ("telCAN_NOT_QUEUE_FEE", Retry),
            ("telLOCAL_ERROR", Retry),
            ("telFAILED_PROCESSING", Retry),
            ("telENV_RPC_FAILED", Retry),
            ("somethingNEW", Retry),
            // never
            ("temBAD_AMOUNT", Rejected),
            ("temREDUNDANT", Rejected),
            ("temBAD_FEE", Rejected),
            ("temDST_NEEDED", Rejected),
            ("temINVALID", Rejected),
            ("tefBAD_AUTH", Rejected),
            ("tefBAD_AUTH_MASTER", Rejected),
            ("tefMASTER_DISABLED", Rejected),
            ("tefBAD_SIGNATURE", Rejected),
            ("tefNOT_MULTI_SIGNING", Rejected),
            ("tefWRONG_PRIOR", Rejected),
            ("tefTOO_BIG", Rejected),
            ("tefNO_TICKET", Rejected),
            ("tefINTERNAL", Rejected),
            ("telBAD_PUBLIC_KEY", Rejected),
            ("telWRONG_NETWORK", Rejected),
            ("telREQUIRES_NETWORK_ID", Rejected),
            ("telNETWORK_ID_MAKES_TX_NON_CANONICAL", Rejected),
        ] {
            assert_eq!(submit_class(code), class, "{code}");
        }
        assert_eq!(
            classify_submit("temREDUNDANT", "Sends same currency to self."),
            Broadcast::Rejected("temREDUNDANT: Sends same currency to self.".into())
        );
    }
}
