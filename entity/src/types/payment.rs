//! Payment status.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<PaymentStatus>("confirming, confirmed, reversed");
        assert_schema::<PaymentStatus>();
    }
}
