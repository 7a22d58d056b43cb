//! The event types (spec section 6), written once: each kind's wire string, what it means, and
//! the list that `GET /v1/events?type=`, the OpenAPI document's webhooks and the operator's
//! tools offer ([`EventKind::ALL`]).

use std::fmt;

/// One event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    InvoiceConfirming,
    InvoicePaid,
    InvoiceOverpaid,
    InvoiceUnderpaid,
    InvoiceExpired,
    InvoiceInvalid,
    InvoiceLateDeposit,
    InvoiceDepositReversed,
    InvoiceActivated,
    InvoiceDraftExpired,
    InvoiceSent,
    InvoiceResolved,
    BalanceCredited,
    PayoutCompleted,
    PayoutFailed,
    /// Sent by `ops webhooks test`.
    Test,
}

/// What an event's `data` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Invoice,
    Credit,
    Payout,
    Test,
}

impl EventKind {
    /// Every event type, in the order the documentation lists them.
    pub const ALL: [EventKind; 16] = [
        EventKind::InvoiceConfirming,
        EventKind::InvoicePaid,
        EventKind::InvoiceOverpaid,
        EventKind::InvoiceUnderpaid,
        EventKind::InvoiceExpired,
        EventKind::InvoiceInvalid,
        EventKind::InvoiceLateDeposit,
        EventKind::InvoiceDepositReversed,
        EventKind::InvoiceActivated,
        EventKind::InvoiceDraftExpired,
        EventKind::InvoiceSent,
        EventKind::InvoiceResolved,
        EventKind::BalanceCredited,
        EventKind::PayoutCompleted,
        EventKind::PayoutFailed,
        EventKind::Test,
    ];

    /// The wire string: the event's `event` field, the `X-Service-Event` header, `?type=`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::InvoiceConfirming => "invoice.confirming",
            EventKind::InvoicePaid => "invoice.paid",
            EventKind::InvoiceOverpaid => "invoice.overpaid",
            EventKind::InvoiceUnderpaid => "invoice.underpaid",
            EventKind::InvoiceExpired => "invoice.expired",
            EventKind::InvoiceInvalid => "invoice.invalid",
            EventKind::InvoiceLateDeposit => "invoice.late_deposit",
            EventKind::InvoiceDepositReversed => "invoice.deposit_reversed",
            EventKind::InvoiceActivated => "invoice.activated",
            EventKind::InvoiceDraftExpired => "invoice.draft_expired",
            EventKind::InvoiceSent => "invoice.sent",
            EventKind::InvoiceResolved => "invoice.resolved",
            EventKind::BalanceCredited => "balance.credited",
            EventKind::PayoutCompleted => "payout.completed",
            EventKind::PayoutFailed => "payout.failed",
            EventKind::Test => "test",
        }
    }

    /// When the event happens (the OpenAPI document's webhook descriptions).
    pub const fn description(self) -> &'static str {
        match self {
            EventKind::InvoiceConfirming => "A deposit is seen and awaits the required confirmations.",
            EventKind::InvoicePaid => "The amount is met and the confirmations suffice.",
            EventKind::InvoiceOverpaid => "A confirmed payment above the requested amount.",
            EventKind::InvoiceUnderpaid => "A confirmed payment below the requested amount.",
            EventKind::InvoiceExpired => "The payment window ended before the payment completed.",
            EventKind::InvoiceInvalid => {
                "The invoice became invalid: a deposit not confirmed within the monitoring window, or a credited deposit reversed."
            }
            EventKind::InvoiceLateDeposit => "Funds arrived after expiry.",
            EventKind::InvoiceDepositReversed => "A previously observed deposit was reversed.",
            EventKind::InvoiceActivated => "A draft invoice was activated: the payer chose how to pay.",
            EventKind::InvoiceDraftExpired => "A draft invoice expired before activation.",
            EventKind::InvoiceSent => "The payment request was e-mailed to the invoice's `payer_email`.",
            EventKind::InvoiceResolved => {
                "The merchant accepted what was received as payment in full (an underpaid or overpaid invoice, or an expired or cancelled one that took late deposits): now `paid`."
            }
            EventKind::BalanceCredited => "The merchant's balance was credited.",
            EventKind::PayoutCompleted => "A payout (or refund) completed.",
            EventKind::PayoutFailed => "A payout (or refund) failed; its reserved amount is released.",
            EventKind::Test => "A test delivery (`ops webhooks test`): verify the signature, then answer 2xx.",
        }
    }

    /// What the event's `data` describes.
    pub const fn subject(self) -> Subject {
        match self {
            EventKind::InvoiceConfirming
            | EventKind::InvoicePaid
            | EventKind::InvoiceOverpaid
            | EventKind::InvoiceUnderpaid
            | EventKind::InvoiceExpired
            | EventKind::InvoiceInvalid
            | EventKind::InvoiceLateDeposit
            | EventKind::InvoiceDepositReversed
            | EventKind::InvoiceActivated
            | EventKind::InvoiceDraftExpired
            | EventKind::InvoiceSent
            | EventKind::InvoiceResolved => Subject::Invoice,
            EventKind::BalanceCredited => Subject::Credit,
            EventKind::PayoutCompleted | EventKind::PayoutFailed => Subject::Payout,
            EventKind::Test => Subject::Test,
        }
    }

    /// The kind whose wire string is `s`.
    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_and_parses_back() {
        let mut seen = std::collections::HashSet::new();
        for k in EventKind::ALL {
            assert!(seen.insert(k.as_str()), "{k} twice");
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            assert!(!k.description().is_empty());
        }
        assert_eq!(EventKind::parse("invoice.unknown"), None);
    }

    /// The guide's table of event types is this enum, row for row.
    #[test]
    fn the_webhook_guide_lists_every_kind() {
        let guide = include_str!("../../../../docs/webhooks.md");
        let table: Vec<&str> = guide
            .split("## Event types")
            .nth(1)
            .expect("docs/webhooks.md has an Event types section")
            .lines()
            .take_while(|l| !l.starts_with("## "))
            .filter(|l| l.starts_with("| `"))
            .collect();
        let expected: Vec<String> =
            EventKind::ALL.iter().map(|k| format!("| `{}` | {} |", k.as_str(), k.description())).collect();
        assert_eq!(table, expected, "docs/webhooks.md's Event types table");
    }
}
