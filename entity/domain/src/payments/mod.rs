//! Payments: one on-chain transfer to an invoice's address. Their rows are written here and
//! nowhere else: the status moves (`lifecycle`: confirm, reverse, revive, and the credit stamp
//! that makes a payment reach a balance once) and the confirmation tracker's bookkeeping on a
//! live payment (`tracking`: depth, missing checks, when to look again), and the fiat value a
//! credit records with its stamp (`fiat`). The scanner records new
//! payments (`entity::payment::Model::detected`); every later write is one of these functions.

pub mod fiat;
pub mod lifecycle;
pub mod tracking;
