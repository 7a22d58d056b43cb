//! Typed ids: one newtype over `Uuid` per kind of row, so that a payout id cannot be passed where
//! an invoice id is wanted. They are what the domain's public functions take and return; the
//! entity `Model`s keep their `Uuid` columns (the stored rows do not change), and a typed id
//! converts both ways (`InvoiceId::from(row.id)`, `Uuid::from(id)`) and binds as a query value
//! (`invoice::Column::Id.eq(id)`). Serialized, an id is the plain uuid string.

use std::fmt;
use std::str::FromStr;

use sea_orm::Value;
use uuid::Uuid;

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident),+ $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                $name(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl From<$name> for Value {
            fn from(id: $name) -> Self {
                Value::from(id.0)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::from_str(s).map($name)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }
    )+};
}

ids! {
    /// A merchant (`merchant.id`).
    MerchantId,
    /// An API key (`api_key.id`).
    ApiKeyId,
    /// An invoice (`invoice.id`).
    InvoiceId,
    /// A payment: one transfer to an invoice's address (`payment.id`).
    PaymentId,
    /// A payout (`payout.id`).
    PayoutId,
    /// A refund (`refund.id`).
    RefundId,
    /// An event in the outbox (`event.id`).
    EventId,
    /// A webhook delivery (`webhook_delivery.id`).
    DeliveryId,
    /// A static deposit address (`static_address.id`).
    StaticAddressId,
    /// An unclaimed deposit (`unclaimed_deposit.id`).
    UnclaimedDepositId,
    /// A simulated sandbox transfer (`sandbox_transfer.id`).
    SandboxTransferId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_the_plain_uuid_and_displays_hyphenated() {
        let raw = Uuid::parse_str("0190f1d2-3c4b-7a5e-8f60-123456789abc").unwrap();
        let id = InvoiceId::from(raw);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"0190f1d2-3c4b-7a5e-8f60-123456789abc\"");
        assert_eq!(serde_json::to_string(&id).unwrap(), serde_json::to_string(&raw).unwrap());
        let back: InvoiceId = serde_json::from_str("\"0190f1d2-3c4b-7a5e-8f60-123456789abc\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(id.to_string(), "0190f1d2-3c4b-7a5e-8f60-123456789abc");
        assert_eq!(id.to_string(), raw.to_string());
        assert_eq!(Uuid::from(id), raw);
        assert_eq!("0190f1d2-3c4b-7a5e-8f60-123456789abc".parse::<InvoiceId>().unwrap(), id);
        assert_eq!(Value::from(id), Value::from(raw));
    }
}
