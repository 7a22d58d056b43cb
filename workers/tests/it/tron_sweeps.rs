//! TRON sweeping (being written).
