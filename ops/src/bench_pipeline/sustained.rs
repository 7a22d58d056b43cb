//! `--sustained`: pays `--rate` invoices a second for `--secs` seconds (a slice every tenth of
//! a second, each slice one bulk sandbox deposit into the next block) and measures whether the
//! pipeline keeps up: credits per second once the first payments have had their confirmation
//! blocks, the backlog (payments whose confirmations are complete but not yet credited) over the
//! window, the latency from the completing block to the credit, and how long the backlog takes
//! to drain once paying stops.

use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, Utc};
use domain::chain::sandbox::SandboxChain;

use crate::bench::Figures;

use super::{Run, Sample, pct, profile, read_back, secs, wait_for_credits};

/// The sustained benchmark goals: at least this many credits a second, sustained for at least `GOAL_SECS`,
/// with p99 from the completing block to the credit under `GOAL_P99_MS` and no growing backlog.
const GOAL_RATE: f64 = 2000.0;
const GOAL_SECS: usize = 60;
const GOAL_P99_MS: f64 = 1000.0;
/// Slices of payments sent per second.
const SLICES_PER_SEC: usize = 10;

pub(super) async fn run(run: &Run<'_>) -> anyhow::Result<Figures> {
    let Run { args, gate, interval_ms, db, invoices, prefix, .. } = *run;
    let payments = super::payments_of(invoices)?;
    let n = payments.len();
    let chain = SandboxChain::new(db.clone(), gate, interval_ms);
    let started_at = Utc::now();
    let start = tokio::time::Instant::now();
    let analyzed = tokio::spawn(super::analyze_after_first_credit(db.clone(), Instant::now()));
    let (mut sent, mut slice, mut behind) = (0, 0, 0);
    while sent < n {
        slice += 1;
        let due_at = start + Duration::from_secs(1) * slice as u32 / SLICES_PER_SEC as u32;
        // Payments due by the end of this slice; a slow slice is made up by the next one.
        let due = (args.rate * slice / SLICES_PER_SEC).min(n);
        if due > sent {
            chain.deposit_many(&payments[sent..due]).await.context("bulk sandbox deposit")?;
            if sent == 0 {
                super::analyze_chain(db).await?;
            }
            sent = due;
        }
        if tokio::time::Instant::now() > due_at {
            behind += 1;
        }
        tokio::time::sleep_until(due_at).await;
    }
    let ended_at = Utc::now();
    let send_secs = secs(ended_at - started_at);
    let analyzed = analyzed.await.context("the analyze task")?.context("analyzing after the first credit")?;
    let t = Instant::now();
    let metrics = wait_for_credits(run, n).await?;
    let waited = t.elapsed().as_secs_f64();
    let timeline = read_back(run).await?;
    let samples = &timeline.samples;
    let credited = samples.len();
    let last_credit = samples.iter().map(|s| s.credited_at).max().unwrap_or(ended_at);

    // The window: from when the first payments' confirmations could be complete (their block
    // plus the confirmation blocks, and one more interval for the slice that straddles a block)
    // to the end of paying.
    let warmup = chrono::Duration::milliseconds((i64::from(gate.confirmations) + 1) * interval_ms as i64);
    let (w0, w1) = (started_at + warmup, ended_at);
    let window = secs(w1 - w0);
    let in_window = samples.iter().filter(|s| s.credited_at >= w0 && s.credited_at <= w1).count();
    let rate = if window > 0.0 { in_window as f64 / window } else { f64::NAN };
    let backlog = backlog_series(samples, w0, w1);
    let growing = is_growing(&backlog, args.rate as f64);
    let mut credit: Vec<f64> = samples.iter().map(|s| s.credit_ms).collect();
    credit.sort_by(f64::total_cmp);
    let p99 = pct(&credit, 0.99);

    println!(
        "paid: {n} payments in {send_secs:.2} s ({:.0}/s offered, {} of {slice} slices late), in blocks {}..={}",
        n as f64 / send_secs,
        behind,
        timeline.blocks.0,
        timeline.blocks.1
    );
    println!(
        "credited: {credited} of {n} payments; the last {:.2} s after paying stopped",
        secs(last_credit - ended_at)
    );
    println!(
        "statistics: {} analysed {:.1} s after the first payment, once one was credited (as autovacuum would on a running deployment)",
        super::ANALYZED_AFTER_FIRST_CREDIT,
        analyzed.as_secs_f64()
    );
    println!(
        "credits/s in the window ({:.1} s after the first payment to the end of paying, {window:.1} s): {rate:.0}",
        secs(warmup)
    );
    let shown: Vec<String> = backlog.iter().map(|b| b.to_string()).collect();
    println!("backlog (confirmations complete, not yet credited) each second of the window: {}", shown.join(" "));
    println!(
        "latency block completing confirmation -> credit: p50 {:.0} ms  p95 {:.0} ms  p99 {p99:.0} ms  max {:.0} ms",
        pct(&credit, 0.50),
        pct(&credit, 0.95),
        pct(&credit, 1.0)
    );
    profile(&metrics, prefix, credited, send_secs + waited);

    let all = credited == n;
    let rate_ok = all && rate >= GOAL_RATE && args.secs >= GOAL_SECS;
    let p99_ok = all && p99 < GOAL_P99_MS;
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    println!(
        "goal >= {GOAL_RATE:.0} credits/s sustained for >= {GOAL_SECS} s: {rate:.0}/s ({:.2}x) for {} s, {}",
        rate / GOAL_RATE,
        args.secs,
        verdict(rate_ok)
    );
    println!("goal p99 block -> credit < {GOAL_P99_MS:.0} ms: {p99:.0} ms, {}", verdict(p99_ok));
    println!(
        "goal no growing backlog (last third of the window within the first third + 10% of a second's payments): {}",
        verdict(!growing)
    );
    Ok(Figures { rate, p50_ms: pct(&credit, 0.50), p99_ms: p99, pass: rate_ok && p99_ok && !growing })
}

/// Payments whose completing block was due but which were not yet credited, at each whole second
/// from `w0` to `w1`.
fn backlog_series(samples: &[Sample], w0: DateTime<Utc>, w1: DateTime<Utc>) -> Vec<usize> {
    let mut out = Vec::new();
    let mut t = w0;
    while t <= w1 {
        out.push(samples.iter().filter(|s| s.completes_at <= t && s.credited_at > t).count());
        t += chrono::Duration::seconds(1);
    }
    out
}

/// Whether the backlog grows over the window: the mean of its last third above the mean of its
/// first third by more than 20 % plus a tenth of a second's payments (a pipeline that keeps up
/// holds a steady backlog of about rate x latency).
fn is_growing(backlog: &[usize], rate: f64) -> bool {
    let third = backlog.len() / 3;
    if third == 0 {
        return false;
    }
    let mean = |s: &[usize]| s.iter().sum::<usize>() as f64 / s.len() as f64;
    mean(&backlog[backlog.len() - third..]) > mean(&backlog[..third]) * 1.2 + rate * 0.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_backlog_is_not_growing_and_a_climbing_one_is() {
        assert!(!is_growing(&[300, 320, 290, 310, 305, 300], 1000.0));
        assert!(is_growing(&[100, 300, 600, 900, 1200, 1500], 1000.0));
        assert!(!is_growing(&[5, 9], 1000.0), "too short to tell");
    }

    #[test]
    fn the_backlog_counts_due_payments_not_yet_credited() {
        let t0 = Utc::now();
        let s = |due: i64, credited: i64| Sample {
            completes_at: t0 + chrono::Duration::milliseconds(due),
            credited_at: t0 + chrono::Duration::milliseconds(credited),
            credit_ms: (credited - due) as f64,
            detect_ms: 0.0,
        };
        let samples = [s(0, 500), s(0, 1500), s(900, 2500), s(1900, 1950)];
        assert_eq!(backlog_series(&samples, t0, t0 + chrono::Duration::seconds(2)), [2, 2, 1]);
    }
}
