//! Webhook delivery status and what moves it (docs/webhooks.md "Delivery").

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// Webhook delivery status (docs/webhooks.md "Delivery").
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum DeliveryStatus {
        /// Waiting for its first attempt (or the first after a replay).
        Pending = "pending",
        /// An attempt failed; the next one is scheduled at `next_attempt_at`.
        Retrying = "retrying",
        /// The endpoint answered 2xx.
        Succeeded = "succeeded",
        /// Every scheduled attempt failed; `ops webhooks replay` sends it again.
        Dead = "dead",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryTrigger {
    /// An attempt got a 2xx answer.
    Delivered,
    /// An attempt failed and the schedule has a retry left.
    FailedWillRetry,
    /// An attempt failed and it was the schedule's last.
    FailedFinal,
    /// The operator replays it (`ops webhooks replay`): due now, the schedule starts over.
    Replay,
    /// Its endpoint was removed: an open delivery stops, never sent elsewhere.
    EndpointRemoved,
}

impl DeliveryStatus {
    /// Whether a deliverer may still attempt it.
    pub fn is_open(self) -> bool {
        match self {
            DeliveryStatus::Pending | DeliveryStatus::Retrying => true,
            DeliveryStatus::Succeeded | DeliveryStatus::Dead => false,
        }
    }

    /// The status `trigger` leads to, or `None` when it does not apply. Exhaustive on purpose.
    pub fn on(self, trigger: DeliveryTrigger) -> Option<DeliveryStatus> {
        use DeliveryStatus::*;
        use DeliveryTrigger::*;
        match (self, trigger) {
            (Pending | Retrying, Delivered) => Some(Succeeded),
            (Pending | Retrying, FailedWillRetry) => Some(Retrying),
            (Pending | Retrying, FailedFinal) => Some(Dead),
            (Retrying | Succeeded | Dead, Replay) => Some(Pending),
            (Pending | Retrying, EndpointRemoved) => Some(Dead),
            (Pending, Replay) | (Succeeded | Dead, Delivered | FailedWillRetry | FailedFinal | EndpointRemoved) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DeliveryStatus::*;
    use super::DeliveryTrigger::*;
    use super::*;
    use crate::types::wire::assert_wire;

    #[test]
    fn attempts_apply_only_to_open_deliveries() {
        for s in [Pending, Retrying] {
            assert_eq!(s.on(Delivered), Some(Succeeded));
            assert_eq!(s.on(FailedWillRetry), Some(Retrying));
            assert_eq!(s.on(FailedFinal), Some(Dead));
        }
        for s in [Succeeded, Dead] {
            assert_eq!(s.on(Delivered), None);
            assert_eq!(s.on(FailedWillRetry), None);
            assert_eq!(s.on(FailedFinal), None);
        }
    }

    #[test]
    fn removing_the_endpoint_ends_only_open_deliveries() {
        assert_eq!(Pending.on(EndpointRemoved), Some(Dead));
        assert_eq!(Retrying.on(EndpointRemoved), Some(Dead));
        assert_eq!(Succeeded.on(EndpointRemoved), None);
        assert_eq!(Dead.on(EndpointRemoved), None);
    }

    #[test]
    fn replay_reopens_everything_but_a_pending_delivery() {
        assert_eq!(Pending.on(Replay), None);
        for s in [Retrying, Succeeded, Dead] {
            assert_eq!(s.on(Replay), Some(Pending));
        }
    }

    #[test]
    fn names_round_trip() {
        for s in <DeliveryStatus as sea_orm::Iterable>::iter() {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
            assert_eq!(s.is_open(), s.on(Delivered).is_some());
        }
    }

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<DeliveryStatus>("pending, retrying, succeeded, dead");
    }
}
