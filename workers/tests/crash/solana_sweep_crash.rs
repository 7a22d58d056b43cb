//! Solana sweeping (being written).
