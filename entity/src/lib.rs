//! SeaORM entities and the domain enums stored in them.

pub mod amount;
pub mod ids;
pub mod types;

pub mod api_key;
pub mod audit_log;
pub mod balance;
pub mod dashboard_invitation;
pub mod dashboard_session;
pub mod dashboard_user;
pub mod derivation_counter;
pub mod event;
pub mod exchange_rate;
pub mod invoice;
pub mod invoice_credit;
pub mod ledger_entry;
pub mod merchant;
pub mod merchant_env_settings;
pub mod nonce_account;
pub mod payment;
pub mod payout;
pub mod payout_replacement;
pub mod refund;
pub mod sandbox_broadcast;
pub mod sandbox_chain;
pub mod sandbox_transfer;
pub mod scan_cursor;
pub mod settlement_conversion;
pub mod static_address;
pub mod sweep;
pub mod unclaimed_deposit;
pub mod wallet_spend;
pub mod webhook_attempt;
pub mod webhook_delivery;
pub mod webhook_endpoint;

pub use amount::Amount;
pub use ids::{
    ApiKeyId, DeliveryId, EventId, InvoiceId, MerchantId, PaymentId, PayoutId, RefundId, SandboxTransferId,
    StaticAddressId, UnclaimedDepositId,
};
pub use types::{
    Bucket, ConversionState, ConversionTrigger, DeliveryStatus, DeliveryTrigger, EntryType, Environment, FeeAllocation,
    InvoiceStatus, InvoiceTrigger, PaymentStatus, PaymentTrigger, PayoutStatus, PayoutTrigger, RefundStatus, Role,
    SweepStatus, SweepTrigger, UnclaimedReason, UnclaimedStatus, UnclaimedTrigger,
};
