//! Support shared by this crate's step-by-step suites (`pipeline`, `settlement`): each test
//! binary includes it with `mod support;` and uses what it needs.
#![allow(dead_code)]

pub mod pipe;
