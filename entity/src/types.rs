//! Domain enums stored as strings, with their transition rules beside them.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// `test` (sandbox, no real funds) or `live`. Chosen by the API key.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(8))")]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    #[sea_orm(string_value = "test")]
    Test,
    #[sea_orm(string_value = "live")]
    Live,
}

impl Environment {
    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Test => "test",
            Environment::Live => "live",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "test" => Some(Environment::Test),
            "live" => Some(Environment::Live),
            _ => None,
        }
    }
}

impl std::fmt::Display for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Invoice status (PRODUCT.md "Statuses").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum InvoiceStatus {
    #[sea_orm(string_value = "draft")]
    Draft,
    #[sea_orm(string_value = "pending")]
    Pending,
    #[sea_orm(string_value = "confirming")]
    Confirming,
    #[sea_orm(string_value = "paid")]
    Paid,
    #[sea_orm(string_value = "overpaid")]
    Overpaid,
    #[sea_orm(string_value = "underpaid")]
    Underpaid,
    #[sea_orm(string_value = "expired")]
    Expired,
    #[sea_orm(string_value = "invalid")]
    Invalid,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
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
}

impl InvoiceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InvoiceStatus::Draft => "draft",
            InvoiceStatus::Pending => "pending",
            InvoiceStatus::Confirming => "confirming",
            InvoiceStatus::Paid => "paid",
            InvoiceStatus::Overpaid => "overpaid",
            InvoiceStatus::Underpaid => "underpaid",
            InvoiceStatus::Expired => "expired",
            InvoiceStatus::Invalid => "invalid",
            InvoiceStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        use InvoiceStatus::*;
        [Draft, Pending, Confirming, Paid, Overpaid, Underpaid, Expired, Invalid, Cancelled]
            .into_iter()
            .find(|st| st.as_str() == s)
    }

    /// The status `trigger` leads to from `self`, or `None` when the trigger does not apply.
    /// Exhaustive on purpose: adding a status forces a decision for every trigger.
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
            (
                Draft,
                Cancel
                | Expire
                | DepositSeen
                | ConfirmedExact
                | ConfirmedOver
                | ConfirmedShort
                | MonitorTimeout
                | CreditedReversed
                | UnconfirmedReversed
                | UnconfirmedReversedLate,
            )
            | (
                Pending,
                Activate
                | DraftExpire
                | ConfirmedShort
                | MonitorTimeout
                | CreditedReversed
                | UnconfirmedReversed
                | UnconfirmedReversedLate,
            )
            | (Confirming, Cancel | Activate | DraftExpire | Expire | DepositSeen | CreditedReversed)
            | (
                Underpaid,
                Cancel
                | Activate
                | DraftExpire
                | Expire
                | DepositSeen
                | ConfirmedShort
                | MonitorTimeout
                | UnconfirmedReversed
                | UnconfirmedReversedLate,
            )
            | (
                Paid | Overpaid,
                Cancel
                | Activate
                | DraftExpire
                | Expire
                | DepositSeen
                | ConfirmedExact
                | ConfirmedOver
                | ConfirmedShort
                | MonitorTimeout
                | UnconfirmedReversed
                | UnconfirmedReversedLate,
            )
            | (
                Expired | Invalid | Cancelled,
                Cancel
                | Activate
                | DraftExpire
                | Expire
                | DepositSeen
                | ConfirmedExact
                | ConfirmedOver
                | ConfirmedShort
                | MonitorTimeout
                | CreditedReversed
                | UnconfirmedReversed
                | UnconfirmedReversedLate,
            ) => None,
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

/// Payment status (PRODUCT.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    #[sea_orm(string_value = "confirming")]
    Confirming,
    #[sea_orm(string_value = "confirmed")]
    Confirmed,
    #[sea_orm(string_value = "reversed")]
    Reversed,
}

impl PaymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Confirming => "confirming",
            PaymentStatus::Confirmed => "confirmed",
            PaymentStatus::Reversed => "reversed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::InvoiceStatus::*;
    use super::InvoiceTrigger::*;
    use super::*;
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
}

/// Which part of a balance a ledger entry moves.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Spendable.
    #[sea_orm(string_value = "available")]
    Available,
    /// Seen on chain, not yet confirmed.
    #[sea_orm(string_value = "pending")]
    Pending,
    /// Held for payouts and refunds in progress.
    #[sea_orm(string_value = "reserved")]
    Reserved,
}

/// Ledger entry types (PRODUCT.md "Shapes the spec leaves open").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(32))")]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    #[sea_orm(string_value = "invoice_credit")]
    InvoiceCredit,
    #[sea_orm(string_value = "conversion_debit")]
    ConversionDebit,
    #[sea_orm(string_value = "conversion_credit")]
    ConversionCredit,
    #[sea_orm(string_value = "payout_reserve")]
    PayoutReserve,
    #[sea_orm(string_value = "payout_release")]
    PayoutRelease,
    #[sea_orm(string_value = "payout_debit")]
    PayoutDebit,
    #[sea_orm(string_value = "payout_fee")]
    PayoutFee,
    #[sea_orm(string_value = "network_fee")]
    NetworkFee,
    #[sea_orm(string_value = "refund_fee")]
    RefundFee,
    #[sea_orm(string_value = "deposit_reversal")]
    DepositReversal,
    #[sea_orm(string_value = "adjustment")]
    Adjustment,
}

impl EntryType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::InvoiceCredit => "invoice_credit",
            EntryType::ConversionDebit => "conversion_debit",
            EntryType::ConversionCredit => "conversion_credit",
            EntryType::PayoutReserve => "payout_reserve",
            EntryType::PayoutRelease => "payout_release",
            EntryType::PayoutDebit => "payout_debit",
            EntryType::PayoutFee => "payout_fee",
            EntryType::NetworkFee => "network_fee",
            EntryType::RefundFee => "refund_fee",
            EntryType::DepositReversal => "deposit_reversal",
            EntryType::Adjustment => "adjustment",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        <EntryType as sea_orm::Iterable>::iter().find(|t| t.as_str() == s)
    }
}

/// Who bears a fee: `customer` (deducted from what the recipient gets) or `merchant` (added to
/// what leaves the merchant's balance).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum FeeAllocation {
    #[sea_orm(string_value = "customer")]
    Customer,
    #[sea_orm(string_value = "merchant")]
    Merchant,
}

impl FeeAllocation {
    pub fn as_str(self) -> &'static str {
        match self {
            FeeAllocation::Customer => "customer",
            FeeAllocation::Merchant => "merchant",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "customer" => Some(FeeAllocation::Customer),
            "merchant" => Some(FeeAllocation::Merchant),
            _ => None,
        }
    }
}

/// Payout status (PRODUCT.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(20))")]
#[serde(rename_all = "snake_case")]
pub enum PayoutStatus {
    #[sea_orm(string_value = "pending_approval")]
    PendingApproval,
    #[sea_orm(string_value = "approved")]
    Approved,
    #[sea_orm(string_value = "queued")]
    Queued,
    #[sea_orm(string_value = "processing")]
    Processing,
    #[sea_orm(string_value = "completed")]
    Completed,
    #[sea_orm(string_value = "failed")]
    Failed,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayoutTrigger {
    /// Merchant cancels through the API.
    Cancel,
    /// Operator approves (`ops payouts approve`).
    Approve,
    /// Operator rejects (`ops payouts reject`).
    Reject,
    /// The executor takes it once `executable_at` passes.
    Queue,
    /// Broadcast.
    Broadcast,
    /// Confirmed on chain.
    Complete,
    /// Broadcast failed or the transaction was dropped.
    Fail,
}

impl PayoutStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PayoutStatus::PendingApproval => "pending_approval",
            PayoutStatus::Approved => "approved",
            PayoutStatus::Queued => "queued",
            PayoutStatus::Processing => "processing",
            PayoutStatus::Completed => "completed",
            PayoutStatus::Failed => "failed",
            PayoutStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        <PayoutStatus as sea_orm::Iterable>::iter().find(|st| st.as_str() == s)
    }

    /// Whether the reservation is still held in this status.
    pub fn holds_reservation(self) -> bool {
        match self {
            PayoutStatus::PendingApproval
            | PayoutStatus::Approved
            | PayoutStatus::Queued
            | PayoutStatus::Processing => true,
            PayoutStatus::Completed | PayoutStatus::Failed | PayoutStatus::Cancelled => false,
        }
    }

    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose.
    pub fn on(self, trigger: PayoutTrigger) -> Option<PayoutStatus> {
        use PayoutStatus::*;
        use PayoutTrigger::*;
        match (self, trigger) {
            (PendingApproval | Approved, Cancel) => Some(Cancelled),
            (PendingApproval, Approve) => Some(Approved),
            (PendingApproval, Reject) => Some(Failed),
            (Approved, Queue) => Some(Queued),
            (Queued, Broadcast) => Some(Processing),
            (Processing, Complete) => Some(Completed),
            // Approved: only an operator fails it (`ops payouts fail`); the executor never does.
            (Approved | Queued | Processing, Fail) => Some(Failed),
            (PendingApproval, Queue | Broadcast | Complete | Fail)
            | (Approved, Approve | Reject | Broadcast | Complete)
            | (Queued, Cancel | Approve | Reject | Queue | Complete)
            | (Processing, Cancel | Approve | Reject | Queue | Broadcast)
            | (Completed | Failed | Cancelled, Cancel | Approve | Reject | Queue | Broadcast | Complete | Fail) => None,
        }
    }
}

/// Refund status: the linked payout's status seen from the refund (PRODUCT.md "Statuses").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize, utoipa::ToSchema,
)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    #[sea_orm(string_value = "pending")]
    Pending,
    #[sea_orm(string_value = "processing")]
    Processing,
    #[sea_orm(string_value = "completed")]
    Completed,
    #[sea_orm(string_value = "failed")]
    Failed,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
}

impl RefundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RefundStatus::Pending => "pending",
            RefundStatus::Processing => "processing",
            RefundStatus::Completed => "completed",
            RefundStatus::Failed => "failed",
            RefundStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        <RefundStatus as sea_orm::Iterable>::iter().find(|st| st.as_str() == s)
    }

    /// The refund status that mirrors a payout status. Exhaustive on purpose.
    pub fn mirroring(p: PayoutStatus) -> RefundStatus {
        match p {
            PayoutStatus::PendingApproval | PayoutStatus::Approved | PayoutStatus::Queued => RefundStatus::Pending,
            PayoutStatus::Processing => RefundStatus::Processing,
            PayoutStatus::Completed => RefundStatus::Completed,
            PayoutStatus::Failed => RefundStatus::Failed,
            PayoutStatus::Cancelled => RefundStatus::Cancelled,
        }
    }

    /// Whether the refunded amount still counts against the invoice's credit: everything but a
    /// refund whose payout failed or was cancelled (its amount becomes refundable again).
    pub fn counts_against_credit(self) -> bool {
        match self {
            RefundStatus::Pending | RefundStatus::Processing | RefundStatus::Completed => true,
            RefundStatus::Failed | RefundStatus::Cancelled => false,
        }
    }
}

#[cfg(test)]
mod payout_tests {
    use super::PayoutStatus::*;
    use super::PayoutTrigger::*;
    use super::*;
    use sea_orm::Iterable;

    #[test]
    fn cancel_only_before_execution() {
        for st in PayoutStatus::iter() {
            let expected = matches!(st, PendingApproval | Approved).then_some(Cancelled);
            assert_eq!(st.on(Cancel), expected, "{st:?}");
        }
    }

    #[test]
    fn lifecycle() {
        assert_eq!(PendingApproval.on(Approve), Some(Approved));
        assert_eq!(PendingApproval.on(Reject), Some(Failed));
        assert_eq!(Approved.on(Queue), Some(Queued));
        assert_eq!(Queued.on(Broadcast), Some(Processing));
        assert_eq!(Processing.on(Complete), Some(Completed));
        assert_eq!(Processing.on(Fail), Some(Failed));
        assert_eq!(Approved.on(Approve), None);
        assert_eq!(Completed.on(Fail), None);
        for st in PayoutStatus::iter() {
            assert_eq!(PayoutStatus::parse(st.as_str()), Some(st));
            let terminal = matches!(st, Completed | Failed | Cancelled);
            assert_eq!(st.holds_reservation(), !terminal);
        }
    }

    #[test]
    fn refund_mirrors_payout() {
        for st in PayoutStatus::iter() {
            let r = RefundStatus::mirroring(st);
            // A refund's amount counts against the credit exactly while its payout is not
            // released: held (reserved) or completed.
            assert_eq!(r.counts_against_credit(), st.holds_reservation() || st == Completed, "{st:?}");
        }
        assert_eq!(RefundStatus::mirroring(PendingApproval), RefundStatus::Pending);
        assert_eq!(RefundStatus::mirroring(Queued), RefundStatus::Pending);
        assert_eq!(RefundStatus::mirroring(Processing), RefundStatus::Processing);
        assert_eq!(RefundStatus::mirroring(Cancelled), RefundStatus::Cancelled);
        for st in RefundStatus::iter() {
            assert_eq!(RefundStatus::parse(st.as_str()), Some(st));
        }
    }
}

/// Webhook delivery status (docs/webhooks.md "Delivery").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Waiting for its first attempt (or the first after a replay).
    #[sea_orm(string_value = "pending")]
    Pending,
    /// An attempt failed; the next one is scheduled at `next_attempt_at`.
    #[sea_orm(string_value = "retrying")]
    Retrying,
    /// The endpoint answered 2xx.
    #[sea_orm(string_value = "succeeded")]
    Succeeded,
    /// Every scheduled attempt failed; `ops webhooks replay` sends it again.
    #[sea_orm(string_value = "dead")]
    Dead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryTrigger {
    /// An attempt got a 2xx answer.
    Delivered,
    /// An attempt failed and the schedule has a retry left.
    FailedWillRetry,
    /// An attempt failed and it was the schedule's last.
    FailedFinal,
    /// The operator replays it (`ops webhooks replay`): due now, the schedule starts over.
    Replay,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Retrying => "retrying",
            DeliveryStatus::Succeeded => "succeeded",
            DeliveryStatus::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        <DeliveryStatus as sea_orm::Iterable>::iter().find(|st| st.as_str() == s)
    }

    /// Whether a deliverer may still attempt it.
    pub fn is_open(self) -> bool {
        match self {
            DeliveryStatus::Pending | DeliveryStatus::Retrying => true,
            DeliveryStatus::Succeeded | DeliveryStatus::Dead => false,
        }
    }

    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose.
    pub fn on(self, trigger: DeliveryTrigger) -> Option<DeliveryStatus> {
        use DeliveryStatus::*;
        use DeliveryTrigger::*;
        match (self, trigger) {
            (Pending | Retrying, Delivered) => Some(Succeeded),
            (Pending | Retrying, FailedWillRetry) => Some(Retrying),
            (Pending | Retrying, FailedFinal) => Some(Dead),
            (Retrying | Succeeded | Dead, Replay) => Some(Pending),
            (Pending, Replay) | (Succeeded | Dead, Delivered | FailedWillRetry | FailedFinal) => None,
        }
    }
}

#[cfg(test)]
mod delivery_tests {
    use super::DeliveryStatus::*;
    use super::DeliveryTrigger::*;
    use super::*;

    #[test]
    fn attempts_apply_only_to_open_deliveries() {
        for s in [Pending, Retrying] {
            assert_eq!(s.on(Delivered), Some(Succeeded));
            assert_eq!(s.on(FailedWillRetry), Some(Retrying));
            assert_eq!(s.on(FailedFinal), Some(Dead));
        }
        for s in [Succeeded, Dead] {
            assert_eq!(s.on(Delivered), None);
            assert_eq!(s.on(FailedWillRetry), None);
            assert_eq!(s.on(FailedFinal), None);
        }
    }

    #[test]
    fn replay_reopens_everything_but_a_pending_delivery() {
        assert_eq!(Pending.on(Replay), None);
        for s in [Retrying, Succeeded, Dead] {
            assert_eq!(s.on(Replay), Some(Pending));
        }
    }

    #[test]
    fn names_round_trip() {
        for s in <DeliveryStatus as sea_orm::Iterable>::iter() {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
            assert_eq!(s.is_open(), s.on(Delivered).is_some());
        }
    }
}

/// Where a payment's settlement conversion is (docs/api-decisions.md "Settlement conversion").
/// The spec's `quote_status` and `execution_status` are read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(24))")]
#[serde(rename_all = "snake_case")]
pub enum ConversionState {
    /// Quoted at detection; executed when the payment is credited, if the lock still holds.
    #[sea_orm(string_value = "quoted")]
    Quoted,
    /// No quote (venue refused, no rate, amount too small): the paid asset will be credited.
    #[sea_orm(string_value = "quote_failed")]
    QuoteFailed,
    /// Converted: the target asset was credited the net amount.
    #[sea_orm(string_value = "executed")]
    Executed,
    /// The venue refused to execute the quote: the paid asset was credited.
    #[sea_orm(string_value = "execution_failed")]
    ExecutionFailed,
    /// The payment was confirmed after `locked_until`: the paid asset was credited.
    #[sea_orm(string_value = "expired")]
    Expired,
    /// The payment was reversed before it was credited: nothing was converted or credited.
    #[sea_orm(string_value = "abandoned")]
    Abandoned,
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
    pub fn as_str(self) -> &'static str {
        match self {
            ConversionState::Quoted => "quoted",
            ConversionState::QuoteFailed => "quote_failed",
            ConversionState::Executed => "executed",
            ConversionState::ExecutionFailed => "execution_failed",
            ConversionState::Expired => "expired",
            ConversionState::Abandoned => "abandoned",
        }
    }

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
mod conversion_tests {
    use super::ConversionState::*;
    use super::ConversionTrigger as T;
    use super::*;

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
}
