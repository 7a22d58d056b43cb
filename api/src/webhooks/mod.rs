//! Webhooks (spec 5.7, section 6). So far: the signature scheme, shared by the deliverer that
//! signs and by the merchant-side verification helper documented in `docs/webhooks.md`.

pub mod signature;
