//! Settlement conversion state and what moves it (docs/api-decisions.md "Settlement conversion").

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Where a payment's settlement conversion is (docs/api-decisions.md "Settlement conversion").
    /// The spec's `quote_status` and `execution_status` are read from it.
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(24))")]
    pub enum ConversionState {
        /// Quoted at detection; executed when the payment is credited, if the lock still holds.
        Quoted = "quoted",
        /// No quote (venue refused, no rate, amount too small): the paid asset will be credited.
        QuoteFailed = "quote_failed",
        /// Converted: the target asset was credited the net amount.
        Executed = "executed",
        /// The venue refused to execute the quote: the paid asset was credited.
        ExecutionFailed = "execution_failed",
        /// The payment was confirmed after `locked_until`: the paid asset was credited.
        Expired = "expired",
        /// The payment was reversed before it was credited: nothing was converted or credited.
        Abandoned = "abandoned",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConversionTrigger {
    /// The venue executed the quote.
    Executed,
    /// The venue refused to execute it.
    ExecutionRefused,
    /// The payment was confirmed after the quote's lock ended.
    LockExpired,
    /// The payment was reversed before its credit.
    PaymentReversed,
}

impl ConversionState {
    /// The state `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose:
    /// only a live quote moves, and it moves once.
    pub fn on(self, trigger: ConversionTrigger) -> Option<ConversionState> {
        use ConversionState::*;
        use ConversionTrigger as T;
        match (self, trigger) {
            (Quoted, T::Executed) => Some(Executed),
            (Quoted, T::ExecutionRefused) => Some(ExecutionFailed),
            (Quoted, T::LockExpired) => Some(Expired),
            (Quoted, T::PaymentReversed) => Some(Abandoned),
            (
                QuoteFailed | Executed | ExecutionFailed | Expired | Abandoned,
                T::Executed | T::ExecutionRefused | T::LockExpired | T::PaymentReversed,
            ) => None,
        }
    }

    /// Spec 2.4 `quote_status` (PRODUCT.md: `quoted`, `expired`, `failed`).
    pub fn quote_status(self) -> &'static str {
        match self {
            ConversionState::Quoted
            | ConversionState::Executed
            | ConversionState::ExecutionFailed
            | ConversionState::Abandoned => "quoted",
            ConversionState::QuoteFailed => "failed",
            ConversionState::Expired => "expired",
        }
    }

    /// Spec 2.4 `execution_status` (PRODUCT.md: `pending`, `executed`, `failed`): `failed`
    /// whenever the conversion will not happen, `failure_class` says why.
    pub fn execution_status(self) -> &'static str {
        match self {
            ConversionState::Quoted => "pending",
            ConversionState::Executed => "executed",
            ConversionState::QuoteFailed
            | ConversionState::ExecutionFailed
            | ConversionState::Expired
            | ConversionState::Abandoned => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ConversionState::*;
    use super::ConversionTrigger as T;
    use super::*;
    use crate::types::wire::assert_wire;

    #[test]
    fn only_a_live_quote_moves_and_only_once() {
        assert_eq!(Quoted.on(T::Executed), Some(Executed));
        assert_eq!(Quoted.on(T::ExecutionRefused), Some(ExecutionFailed));
        assert_eq!(Quoted.on(T::LockExpired), Some(Expired));
        assert_eq!(Quoted.on(T::PaymentReversed), Some(Abandoned));
        for s in [QuoteFailed, Executed, ExecutionFailed, Expired, Abandoned] {
            for t in [T::Executed, T::ExecutionRefused, T::LockExpired, T::PaymentReversed] {
                assert_eq!(s.on(t), None, "{s:?} + {t:?}");
            }
        }
    }

    #[test]
    fn statuses_use_the_product_values() {
        for s in <ConversionState as sea_orm::Iterable>::iter() {
            assert!(["quoted", "expired", "failed"].contains(&s.quote_status()), "{s:?}");
            assert!(["pending", "executed", "failed"].contains(&s.execution_status()), "{s:?}");
        }
        assert_eq!((Expired.quote_status(), Expired.execution_status()), ("expired", "failed"));
        assert_eq!((Executed.quote_status(), Executed.execution_status()), ("quoted", "executed"));
        assert_eq!((QuoteFailed.quote_status(), QuoteFailed.execution_status()), ("failed", "failed"));
    }

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<ConversionState>("quoted, quote_failed, executed, execution_failed, expired, abandoned");
    }
}
