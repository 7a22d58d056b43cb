//! Payment status, and why a deposit to one of our addresses credits no invoice and where it
//! stands.

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Payment status (PRODUCT.md).
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum PaymentStatus {
        Confirming = "confirming",
        Confirmed = "confirmed",
        Reversed = "reversed",
    }
}

/// What can happen to a payment: the confirmation tracker confirms and reverses it, and a scan
/// (or the tracker) that sees a reversed transfer on the chain again revives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentTrigger {
    /// The chain shows the transfer at the gate's required confirmations.
    Confirm,
    /// The chain no longer shows the transfer (reorganisation, double spend, sandbox reversal).
    Reverse,
    /// A reversed transfer is on the chain again: recorded again as if new.
    Revive,
}

impl PaymentStatus {
    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose:
    /// a confirmed payment is reversed, never confirmed again; only a reversed one is revived.
    pub fn on(self, trigger: PaymentTrigger) -> Option<PaymentStatus> {
        use PaymentStatus::*;
        use PaymentTrigger::*;
        match (self, trigger) {
            (Confirming, Confirm) => Some(Confirmed),
            (Confirming | Confirmed, Reverse) => Some(Reversed),
            (Reversed, Revive) => Some(Confirming),
            (Confirmed | Reversed, Confirm) | (Reversed, Reverse) | (Confirming | Confirmed, Revive) => None,
        }
    }
}

wire_enum! {
    /// Why a transfer that reached an address of ours credits nobody (`unclaimed_deposits`).
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(24))")]
    pub enum UnclaimedReason {
        /// Sent to the operator's shared account (XRP) without a destination tag, or with a tag
        /// no invoice or static address holds.
        NoInvoice = "no_invoice",
        /// Sent to one of our deposit addresses, but as another asset or on another network
        /// than the invoice's (e.g. a token to a native-coin invoice's address).
        OtherGate = "other_gate",
    }
}

wire_enum! {
    /// Where an unclaimed deposit stands on its chain (`unclaimed_deposits.status`): followed by
    /// the tracker until it is final or gone, refundable only once it has the gate's
    /// confirmations (and is not missing meanwhile).
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum UnclaimedStatus {
        /// Seen, short of the gate's confirmations: a reorganisation can still remove it.
        Confirming = "confirming",
        /// At the gate's confirmations, still watched until its final depth.
        Confirmed = "confirmed",
        /// Past its final depth: no longer watched.
        Final = "final",
        /// Missing from the chain over the gate's span of blocks: nothing to return (seen in a
        /// block again, it is `confirming` once more).
        Gone = "gone",
    }
}

/// What a look at an unclaimed deposit's transfer (or a scan that reads it again) found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnclaimedTrigger {
    /// On the chain, short of the gate's confirmations.
    Shallow,
    /// At the gate's confirmations, short of the final depth.
    Deep,
    /// At the final depth.
    Settled,
    /// Missing over the gate's span of blocks and checks.
    Vanished,
    /// A scan read its transfer in a block again.
    SeenAgain,
}

impl UnclaimedStatus {
    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose.
    /// A followed deposit's status follows its depth either way (a reorganisation can move it
    /// into a later block); a final or gone one is not followed, and only a gone one comes back.
    pub fn on(self, trigger: UnclaimedTrigger) -> Option<UnclaimedStatus> {
        use UnclaimedStatus::*;
        use UnclaimedTrigger::*;
        match (self, trigger) {
            (Confirming | Confirmed, Shallow) => Some(Confirming),
            (Confirming | Confirmed, Deep) => Some(Confirmed),
            (Confirming | Confirmed, Settled) => Some(Final),
            (Confirming | Confirmed, Vanished) => Some(Gone),
            (Gone, SeenAgain) => Some(Confirming),
            (Confirming | Confirmed | Final, SeenAgain)
            | (Final, Shallow | Deep | Settled | Vanished)
            | (Gone, Shallow | Deep | Settled | Vanished) => None,
        }
    }

    /// Whether the tracker still looks at it.
    pub fn followed(self) -> bool {
        match self {
            UnclaimedStatus::Confirming | UnclaimedStatus::Confirmed => true,
            UnclaimedStatus::Final | UnclaimedStatus::Gone => false,
        }
    }

    /// Whether its money may be returned: at the gate's confirmations (the caller also checks
    /// that it is not missing meanwhile and not resolved).
    pub fn deep_enough(self) -> bool {
        match self {
            UnclaimedStatus::Confirmed | UnclaimedStatus::Final => true,
            UnclaimedStatus::Confirming | UnclaimedStatus::Gone => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<PaymentStatus>("confirming, confirmed, reversed");
        assert_schema::<PaymentStatus>();
        assert_wire::<UnclaimedReason>("no_invoice, other_gate");
        assert_wire::<UnclaimedStatus>("confirming, confirmed, final, gone");
    }

    #[test]
    fn a_payment_confirms_once_is_reversed_from_either_live_status_and_only_a_reversed_one_revives() {
        use PaymentStatus::*;
        use PaymentTrigger::*;
        assert_eq!(Confirming.on(Confirm), Some(Confirmed));
        assert_eq!(Confirmed.on(Confirm), None);
        assert_eq!(Reversed.on(Confirm), None);
        assert_eq!(Confirming.on(Reverse), Some(Reversed));
        assert_eq!(Confirmed.on(Reverse), Some(Reversed));
        assert_eq!(Reversed.on(Reverse), None);
        assert_eq!(Reversed.on(Revive), Some(Confirming));
        assert_eq!(Confirming.on(Revive), None);
        assert_eq!(Confirmed.on(Revive), None);
    }

    #[test]
    fn an_unclaimed_deposit_follows_its_depth_until_final_or_gone_and_only_a_gone_one_comes_back() {
        use UnclaimedStatus::*;
        use UnclaimedTrigger::*;
        for from in [Confirming, Confirmed] {
            assert!(from.followed());
            assert_eq!(from.on(Shallow), Some(Confirming));
            assert_eq!(from.on(Deep), Some(Confirmed));
            assert_eq!(from.on(Settled), Some(Final));
            assert_eq!(from.on(Vanished), Some(Gone));
            assert_eq!(from.on(SeenAgain), None);
        }
        for from in [Final, Gone] {
            assert!(!from.followed());
            for t in [Shallow, Deep, Settled, Vanished] {
                assert_eq!(from.on(t), None, "{from:?} {t:?}");
            }
        }
        assert_eq!(Gone.on(SeenAgain), Some(Confirming));
        assert_eq!(Final.on(SeenAgain), None);
        assert_eq!([Confirming, Confirmed, Final, Gone].map(UnclaimedStatus::deep_enough), [false, true, true, false]);
    }
}
