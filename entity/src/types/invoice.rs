//! Invoice status and what moves it (PRODUCT.md "Statuses").

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Invoice status (PRODUCT.md "Statuses").
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum InvoiceStatus {
        Draft = "draft",
        Pending = "pending",
        Confirming = "confirming",
        Paid = "paid",
        Overpaid = "overpaid",
        Underpaid = "underpaid",
        Expired = "expired",
        Invalid = "invalid",
        Cancelled = "cancelled",
    }
}

/// What can happen to an invoice. The confirmation tracker adds payment-driven triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvoiceTrigger {
    /// Merchant cancels through the API.
    Cancel,
    /// Payer picks a gate on the checkout page.
    Activate,
    /// Payer activates an unpaid, expired deferred invoice again before `draft_expires_at`.
    Reactivate,
    /// `draft_expires_at` passed.
    DraftExpire,
    /// `expires_at` passed with nothing seen.
    Expire,
    /// A deposit was seen, not yet confirmed.
    DepositSeen,
    /// Confirmed total within requested ± tolerance.
    ConfirmedExact,
    /// Confirmed total above requested + tolerance.
    ConfirmedOver,
    /// Confirmed total below requested - tolerance, nothing else unconfirmed.
    ConfirmedShort,
    /// A seen deposit was not confirmed within the monitoring window.
    MonitorTimeout,
    /// A credited deposit was reversed.
    CreditedReversed,
    /// The only unconfirmed deposit was reversed before `expires_at`.
    UnconfirmedReversed,
    /// The only unconfirmed deposit was reversed after `expires_at`.
    UnconfirmedReversedLate,
    /// The merchant accepts what was received as payment in full (`POST
    /// /v1/invoices/{id}/resolve`): an underpaid or overpaid invoice, or an expired or cancelled
    /// one that took late deposits (the service checks that something was received).
    Resolve,
}

impl InvoiceStatus {
    /// The status `trigger` leads to from `self`, or `None` when the trigger does not apply.
    /// Exhaustive on purpose: adding a status forces a decision for every trigger. One line per
    /// status for the pairs that do nothing (rustfmt would put each trigger on a line of its own).
    #[rustfmt::skip]
    pub fn on(self, trigger: InvoiceTrigger) -> Option<InvoiceStatus> {
        use InvoiceStatus::*;
        use InvoiceTrigger::*;
        match (self, trigger) {
            (Pending, Cancel) => Some(Cancelled),
            (Draft, Activate) => Some(Pending),
            (Expired, Reactivate) => Some(Pending),
            (Draft | Pending | Confirming | Underpaid | Paid | Overpaid | Invalid | Cancelled, Reactivate) => None,
            (Draft, DraftExpire) => Some(Expired),
            (Pending, Expire) => Some(Expired),
            (Pending, DepositSeen) => Some(Confirming),
            (Pending | Confirming | Underpaid, ConfirmedExact) => Some(Paid),
            (Pending | Confirming | Underpaid, ConfirmedOver) => Some(Overpaid),
            (Confirming, ConfirmedShort) => Some(Underpaid),
            (Confirming, MonitorTimeout) => Some(Invalid),
            (Paid | Overpaid | Underpaid, CreditedReversed) => Some(Invalid),
            (Confirming, UnconfirmedReversed) => Some(Pending),
            (Confirming, UnconfirmedReversedLate) => Some(Expired),
            (Underpaid | Overpaid | Expired | Cancelled, Resolve) => Some(Paid),
            // Every other pair: the trigger does not apply in that status.
            (Draft, Cancel | Expire | DepositSeen | ConfirmedExact | ConfirmedOver | ConfirmedShort | MonitorTimeout
                | CreditedReversed | UnconfirmedReversed | UnconfirmedReversedLate | Resolve)
            | (Pending, Activate | DraftExpire | ConfirmedShort | MonitorTimeout | CreditedReversed
                | UnconfirmedReversed | UnconfirmedReversedLate | Resolve)
            | (Confirming, Cancel | Activate | DraftExpire | Expire | DepositSeen | CreditedReversed | Resolve)
            | (Underpaid, Cancel | Activate | DraftExpire | Expire | DepositSeen | ConfirmedShort | MonitorTimeout
                | UnconfirmedReversed | UnconfirmedReversedLate)
            | (Paid | Overpaid, Cancel | Activate | DraftExpire | Expire | DepositSeen | ConfirmedExact
                | ConfirmedOver | ConfirmedShort | MonitorTimeout | UnconfirmedReversed | UnconfirmedReversedLate)
            | (Paid | Invalid, Resolve)
            | (Expired | Invalid | Cancelled, Cancel | Activate | DraftExpire | Expire | DepositSeen
                | ConfirmedExact | ConfirmedOver | ConfirmedShort | MonitorTimeout | CreditedReversed
                | UnconfirmedReversed | UnconfirmedReversedLate) => None,
        }
    }

    /// Terminal for new payments: a deposit now is a late deposit (status unchanged).
    pub fn takes_late_deposits(self) -> bool {
        match self {
            InvoiceStatus::Expired | InvoiceStatus::Cancelled | InvoiceStatus::Invalid => true,
            InvoiceStatus::Draft
            | InvoiceStatus::Pending
            | InvoiceStatus::Confirming
            | InvoiceStatus::Paid
            | InvoiceStatus::Overpaid
            | InvoiceStatus::Underpaid => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InvoiceStatus::*;
    use super::InvoiceTrigger::*;
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};
    use sea_orm::Iterable;

    #[test]
    fn payment_driven_transitions_follow_the_product_table() {
        assert_eq!(Pending.on(DepositSeen), Some(Confirming));
        assert_eq!(Confirming.on(DepositSeen), None);
        for from in [Pending, Confirming, Underpaid] {
            assert_eq!(from.on(ConfirmedExact), Some(Paid));
            assert_eq!(from.on(ConfirmedOver), Some(Overpaid));
        }
        assert_eq!(Confirming.on(ConfirmedShort), Some(Underpaid));
        assert_eq!(Underpaid.on(ConfirmedShort), None);
        assert_eq!(Confirming.on(MonitorTimeout), Some(Invalid));
        for from in [Paid, Overpaid, Underpaid] {
            assert_eq!(from.on(CreditedReversed), Some(Invalid));
        }
        assert_eq!(Confirming.on(UnconfirmedReversed), Some(Pending));
        assert_eq!(Confirming.on(UnconfirmedReversedLate), Some(Expired));
        // Resolved by the merchant: what was received accepted as paid.
        for st in InvoiceStatus::iter() {
            let resolvable = matches!(st, Underpaid | Overpaid | Expired | Cancelled);
            assert_eq!(st.on(Resolve), resolvable.then_some(Paid), "{st:?}");
        }
        for st in InvoiceStatus::iter() {
            // Terminal states never move on a payment.
            if st.takes_late_deposits() {
                for t in [DepositSeen, ConfirmedExact, ConfirmedOver, ConfirmedShort, CreditedReversed] {
                    assert_eq!(st.on(t), None, "{st:?} {t:?}");
                }
            }
        }
    }

    #[test]
    fn only_pending_invoices_cancel() {
        for st in InvoiceStatus::iter() {
            let expected = (st == Pending).then_some(Cancelled);
            assert_eq!(st.on(Cancel), expected, "{st:?}");
        }
    }

    #[test]
    fn draft_activation_and_expiry() {
        assert_eq!(Draft.on(Activate), Some(Pending));
        assert_eq!(Expired.on(Reactivate), Some(Pending));
        for st in [Draft, Pending, Confirming, Underpaid, Paid, Overpaid, Invalid, Cancelled] {
            assert_eq!(st.on(Reactivate), None, "{st:?}");
        }
        assert_eq!(Draft.on(DraftExpire), Some(Expired));
        assert_eq!(Pending.on(Expire), Some(Expired));
        assert_eq!(Pending.on(Activate), None);
        assert_eq!(Confirming.on(Expire), None);
        assert_eq!(Paid.on(Expire), None);
    }

    #[test]
    fn status_strings_round_trip() {
        for st in InvoiceStatus::iter() {
            assert_eq!(InvoiceStatus::parse(st.as_str()), Some(st));
            assert_eq!(serde_json::to_value(st).unwrap(), serde_json::json!(st.as_str()));
        }
        assert_eq!(InvoiceStatus::parse("nope"), None);
    }

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<InvoiceStatus>(
            "draft, pending, confirming, paid, overpaid, underpaid, expired, invalid, cancelled",
        );
        assert_schema::<InvoiceStatus>();
    }
}
