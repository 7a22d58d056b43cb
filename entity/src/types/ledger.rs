//! Ledger vocabulary: balance buckets, entry types and who bears a fee.

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Which part of a balance a ledger entry moves.
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum Bucket {
        /// Spendable.
        Available = "available",
        /// Seen on chain, not yet confirmed.
        Pending = "pending",
        /// Held for payouts and refunds in progress.
        Reserved = "reserved",
    }
}

wire_enum! {
    /// Ledger entry types (PRODUCT.md "Shapes the spec leaves open").
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(32))")]
    pub enum EntryType {
        InvoiceCredit = "invoice_credit",
        ConversionDebit = "conversion_debit",
        ConversionCredit = "conversion_credit",
        PayoutReserve = "payout_reserve",
        PayoutRelease = "payout_release",
        PayoutDebit = "payout_debit",
        PayoutFee = "payout_fee",
        NetworkFee = "network_fee",
        RefundFee = "refund_fee",
        DepositReversal = "deposit_reversal",
        Adjustment = "adjustment",
        /// The house account only (the operator's own books, never a merchant's): a sweep's
        /// network fee.
        SweepFee = "sweep_fee",
        /// House only: native coin sent to a token deposit address so that it can move its tokens.
        GasTopup = "gas_topup",
        /// House only: the paid asset a live conversion brought into the operator's inventory.
        ConversionInventoryIn = "conversion_inventory_in",
        /// House only: the target asset a live conversion paid out of the operator's inventory.
        ConversionInventoryOut = "conversion_inventory_out",
        /// House only: inventory the operator added (positive) or took out (negative).
        HouseFunding = "house_funding",
        /// House only: what a live payout left with the operator on its gate (the merchant's
        /// debit less what the recipient got and the network took in that asset).
        PayoutMargin = "payout_margin",
        /// House only: the network's coin a live token payout's transaction burnt.
        PayoutGas = "payout_gas",
        /// House only: the rent a closed token account held, back in the hot wallet (a Solana
        /// USDC deposit address's token account, closed when it is swept).
        RentReclaimed = "rent_reclaimed",
    }
}

wire_enum! {
    /// Who bears a fee: `customer` (deducted from what the recipient gets) or `merchant` (added to
    /// what leaves the merchant's balance).
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum FeeAllocation {
        Customer = "customer",
        Merchant = "merchant",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<Bucket>("available, pending, reserved");
        assert_wire::<EntryType>(
            "invoice_credit, conversion_debit, conversion_credit, payout_reserve, payout_release, payout_debit, \
             payout_fee, network_fee, refund_fee, deposit_reversal, adjustment, sweep_fee, gas_topup, \
             conversion_inventory_in, conversion_inventory_out, house_funding, payout_margin, payout_gas, rent_reclaimed",
        );
        assert_wire::<FeeAllocation>("customer, merchant");
        assert_schema::<Bucket>();
        assert_schema::<EntryType>();
        assert_schema::<FeeAllocation>();
    }
}
