//! SeaORM entities and the domain enums stored in them.

pub mod amount;
pub mod types;

pub mod api_key;
pub mod derivation_counter;
pub mod invoice;
pub mod merchant;
pub mod payment;
pub mod static_address;

pub use amount::Amount;
pub use types::{Environment, InvoiceStatus, InvoiceTrigger, PaymentStatus};
