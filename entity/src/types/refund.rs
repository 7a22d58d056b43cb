//! Refund status: the linked payout's status seen from the refund (PRODUCT.md "Statuses").

use super::payout::PayoutStatus;
use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Refund status: the linked payout's status seen from the refund (PRODUCT.md "Statuses").
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum RefundStatus {
        Pending = "pending",
        Processing = "processing",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl RefundStatus {
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
mod tests {
    use super::PayoutStatus::*;
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};
    use sea_orm::Iterable;

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

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<RefundStatus>("pending, processing, completed, failed, cancelled");
        assert_schema::<RefundStatus>();
    }
}
