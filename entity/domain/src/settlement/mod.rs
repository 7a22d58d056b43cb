//! Which payments settle through a conversion. The conversion itself (quote when detected,
//! execute and credit when confirmed) is the settlement converter's
//! (`workers::converter`); this rule is shared with the API, which shows a payment's
//! conversion on its invoice.

use entity::{invoice, payment};

use crate::gates::{self, Gate};

/// The gate `p` is to be converted into, or `None` when its invoice settles in the paid asset
/// (passthrough, or a target equal to the paid gate): then the tracker credits it.
pub fn converting_target(inv: &invoice::Model, p: &payment::Model) -> Option<&'static Gate> {
    let target = inv.target_settlement_asset.as_str();
    if target == "passthrough" || target == p.gate_id {
        return None;
    }
    gates::find(target)
}
