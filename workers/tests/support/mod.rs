//! Support shared by this crate's suites (the step-by-step `pipe` of `pipeline` and
//! `settlement`; the fake TRON node of `tron_live`): each test binary includes it with
//! `mod support;` and uses what it needs.
#![allow(dead_code)]

pub mod pipe;
pub mod tron_node;
