//! Domain enums stored as strings, with their transition rules beside them: one file per state
//! machine. Each enum's wire strings (DB value, JSON form, `as_str`/`parse`) are written once, in
//! its `wire_enum!` (see `wire.rs`).

mod wire;

mod conversion;
mod delivery;
mod environment;
mod invoice;
mod ledger;
mod payment;
mod payout;
mod refund;
mod role;
mod sweep;

pub use conversion::{ConversionState, ConversionTrigger};
pub use delivery::{DeliveryStatus, DeliveryTrigger};
pub use environment::Environment;
pub use invoice::{InvoiceStatus, InvoiceTrigger};
pub use ledger::{Bucket, EntryType, FeeAllocation};
pub use payment::{PaymentStatus, PaymentTrigger, UnclaimedReason, UnclaimedStatus, UnclaimedTrigger};
pub use payout::{PayoutStatus, PayoutTrigger};
pub use refund::RefundStatus;
pub use role::Role;
pub use sweep::{SweepStatus, SweepTrigger};
