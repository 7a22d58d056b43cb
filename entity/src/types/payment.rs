//! Payment status, and why a deposit to one of our addresses credits no invoice.

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
    }
}
