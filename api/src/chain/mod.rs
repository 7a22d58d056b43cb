//! Chain-specific rules: address derivation and validation.

pub mod address;
