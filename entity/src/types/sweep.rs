//! Sweep status and what moves it (docs/operations.md "Treasury").

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Where a sweep (moving the operator's own funds from a deposit address to its hot wallet
    /// or cold address) stands.
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum SweepStatus {
        /// Planned: nothing signed yet.
        Planned = "planned",
        /// A token address's gas top-up from the hot wallet is stored signed and sent.
        ToppingUp = "topping_up",
        /// The sweep transaction is stored signed and sent.
        Sending = "sending",
        /// At the gate's confirmations.
        Confirmed = "confirmed",
        /// Can never happen as planned (the reason is kept); the address is planned afresh later.
        Failed = "failed",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepTrigger {
    /// The gas top-up was stored signed.
    TopUp,
    /// The sweep transaction was stored signed.
    Send,
    /// The sweep transaction reached the gate's confirmations.
    Confirm,
    /// Refused or failed on chain for good (or not worth its fee).
    Fail,
}

impl SweepStatus {
    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose.
    pub fn on(self, trigger: SweepTrigger) -> Option<SweepStatus> {
        use SweepStatus::*;
        use SweepTrigger::*;
        match (self, trigger) {
            (Planned, TopUp) => Some(ToppingUp),
            (Planned | ToppingUp, Send) => Some(Sending),
            (Sending, Confirm) => Some(Confirmed),
            (Planned | ToppingUp | Sending, Fail) => Some(Failed),
            (ToppingUp | Sending | Confirmed | Failed, TopUp)
            | (Sending | Confirmed | Failed, Send)
            | (Planned | ToppingUp | Confirmed | Failed, Confirm)
            | (Confirmed | Failed, Fail) => None,
        }
    }

    /// Whether the sweep still owns its address (no second sweep of it is planned meanwhile).
    pub fn is_open(self) -> bool {
        match self {
            SweepStatus::Planned | SweepStatus::ToppingUp | SweepStatus::Sending => true,
            SweepStatus::Confirmed | SweepStatus::Failed => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::assert_wire;

    #[test]
    fn wire_strings_and_transitions() {
        assert_wire::<SweepStatus>("planned, topping_up, sending, confirmed, failed");
        use SweepStatus::*;
        use SweepTrigger::*;
        assert_eq!(Planned.on(TopUp), Some(ToppingUp));
        assert_eq!(Planned.on(Send), Some(Sending));
        assert_eq!(ToppingUp.on(Send), Some(Sending));
        assert_eq!(Sending.on(Confirm), Some(Confirmed));
        // Nothing signed twice, nothing confirmed that was not sent, nothing leaves a final state.
        assert_eq!(Sending.on(Send), None);
        assert_eq!(ToppingUp.on(TopUp), None);
        assert_eq!(ToppingUp.on(Confirm), None);
        for done in [Confirmed, Failed] {
            for t in [TopUp, Send, Confirm, Fail] {
                assert_eq!(done.on(t), None, "{done:?} {t:?}");
            }
            assert!(!done.is_open());
        }
    }
}
