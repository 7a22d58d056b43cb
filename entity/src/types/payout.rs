//! Payout status and what moves it (PRODUCT.md "Statuses").

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Payout status (PRODUCT.md).
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(20))")]
    pub enum PayoutStatus {
        PendingApproval = "pending_approval",
        Approved = "approved",
        Queued = "queued",
        Processing = "processing",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
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

#[cfg(test)]
mod tests {
    use super::PayoutStatus::*;
    use super::PayoutTrigger::*;
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};
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

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<PayoutStatus>("pending_approval, approved, queued, processing, completed, failed, cancelled");
        assert_schema::<PayoutStatus>();
    }
}
