//! A loopback receiver that verifies signatures (`ops webhooks listen`, tests).

pub mod receiver;
