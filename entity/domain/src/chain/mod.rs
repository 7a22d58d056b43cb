//! Chain data the API works with itself: deposit addresses (derivation and validation), the
//! sandbox chain's write side, and the terms of a stored EVM transaction. Reading chains and
//! signing are the workers' (`workers::chain`); the API links neither.

pub mod address;
pub mod evm_tx;
pub mod sandbox;
