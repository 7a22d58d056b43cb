//! The default run: every invoice paid in one burst, as fast as the sandbox takes deposits.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use chrono::Utc;
use domain::chain::sandbox::SandboxChain;
use rust_decimal::Decimal;
use tokio::task::JoinSet;

use crate::bench::Figures;

use super::{Run, pct, profile, read_back, secs, wait_for_credits};

const TARGET_CREDITS_PER_SEC: f64 = 500.0;
const TARGET_P99_MS: f64 = 2000.0;
/// Deposits in flight at once during the burst (the API pool's size).
const BURST_PAYERS: usize = 32;

/// Sends every deposit at once, waits for every credit, prints the figures; returns whether the
/// targets hold.
pub(super) async fn run(run: &Run<'_>) -> anyhow::Result<Figures> {
    let Run { gate, interval_ms, db, invoices, prefix, .. } = *run;
    // Every payer at once, as many in flight as the pool has connections (the sandbox chain
    // serializes deposits on its row lock anyway; more would only queue for a connection).
    let payments: Arc<Vec<(String, Decimal)>> = Arc::new(super::payments_of(invoices)?);
    let burst_at = Utc::now();
    let t = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for _ in 0..BURST_PAYERS {
        let (db, payments, next) = (db.clone(), payments.clone(), next.clone());
        set.spawn(async move {
            let chain = SandboxChain::new(db, gate, interval_ms);
            while let Some((key, amount)) = payments.get(next.fetch_add(1, Ordering::Relaxed)) {
                chain.deposit(key, *amount, None).await.context("sandbox deposit")?;
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let burst_secs = t.elapsed().as_secs_f64();
    super::analyze_chain(db).await?;
    let metrics = wait_for_credits(run, invoices.len()).await?;
    let timeline = read_back(run).await?;

    let samples = &timeline.samples;
    let n = samples.len();
    let first_credit = samples.iter().map(|s| s.credited_at).min().unwrap_or(burst_at);
    let last_credit = samples.iter().map(|s| s.credited_at).max().unwrap_or(burst_at);
    let mut credit: Vec<f64> = samples.iter().map(|s| s.credit_ms).collect();
    let mut detect: Vec<f64> = samples.iter().map(|s| s.detect_ms).collect();
    credit.sort_by(f64::total_cmp);
    detect.sort_by(f64::total_cmp);
    let span = secs(last_credit - first_credit);
    let whole = secs(last_credit - burst_at);
    let rate = if span > 0.0 { n as f64 / span } else { f64::INFINITY };
    let rate_whole = n as f64 / whole;
    println!(
        "burst: {} deposits in {:.2} s ({BURST_PAYERS} at a time), in blocks {}..={}",
        invoices.len(),
        burst_secs,
        timeline.blocks.0,
        timeline.blocks.1
    );
    println!("credited: {n} of {} payments", invoices.len());
    println!("first -> last credit: {:.3} s", span);
    println!("credits/s: {:.0} (first -> last credit)  {:.0} (burst -> last credit, {:.3} s)", rate, rate_whole, whole);
    println!(
        "latency block completing confirmation -> credit: p50 {:.0} ms  p95 {:.0} ms  p99 {:.0} ms  max {:.0} ms",
        pct(&credit, 0.50),
        pct(&credit, 0.95),
        pct(&credit, 0.99),
        pct(&credit, 1.0)
    );
    println!(
        "  (scanner share, deposit block -> payment recorded: p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms)",
        pct(&detect, 0.50),
        pct(&detect, 0.99),
        pct(&detect, 1.0)
    );
    profile(&metrics, prefix, n, whole);

    let rate_ok = n == invoices.len() && rate >= TARGET_CREDITS_PER_SEC;
    let p99_ok = n == invoices.len() && pct(&credit, 0.99) < TARGET_P99_MS;
    println!(
        "target credits/s >= {TARGET_CREDITS_PER_SEC:.0} (first -> last credit): {:.0}, {}",
        rate,
        if rate_ok { "PASS" } else { "FAIL" }
    );
    println!(
        "target p99 < {TARGET_P99_MS:.0} ms: {:.0} ms, {}",
        pct(&credit, 0.99),
        if p99_ok { "PASS" } else { "FAIL" }
    );
    Ok(Figures { rate, p50_ms: pct(&credit, 0.50), p99_ms: pct(&credit, 0.99), pass: rate_ok && p99_ok })
}
