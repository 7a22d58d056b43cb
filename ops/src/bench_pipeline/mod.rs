//! `ops bench-pipeline`: the deposit pipeline under a burst. Creates N invoices on a fresh
//! PostgreSQL database, starts the deposit scanner and the confirmation tracker in-process on
//! Redis queues (a fresh key prefix), pays every invoice on the sandbox chain at once, and
//! measures credits per second and the latency from the block that completes each payment's
//! confirmations to its ledger credit. Ends with a correctness check of the ledger and events.
//! Floats here are measurements (rates, milliseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use api::auth::{Permissions, Principal};
use chrono::{DateTime, Utc};
use clap::Args;
use domain::chain::sandbox::SandboxChain;
use domain::config::Config;
use domain::gates::Gate;
use domain::invoices::service::{self, Created};
use domain::invoices::types::CreateInvoiceRequest;
use entity::{Bucket, EntryType, Environment, balance, event, invoice, ledger_entry, payment, sandbox_chain};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use workers::platform::{QueueBackend, Queues};
use workers::stages::Stage;

const TARGET_CREDITS_PER_SEC: f64 = 500.0;
const TARGET_P99_MS: f64 = 2000.0;
/// Deposits in flight at once during the burst (the API pool's size).
const BURST_PAYERS: usize = 32;

#[derive(Args, Debug)]
pub struct BenchPipelineArgs {
    /// Server URL of PostgreSQL (without database); a fresh database is created on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// Name of the scratch database (dropped and recreated, dropped again at the end).
    #[arg(long, default_value = "paygate_bench_pipeline")]
    database: String,
    /// Redis of the job queues; the run uses a fresh key prefix and deletes its keys at the end.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Invoices created and paid in one burst.
    #[arg(long, default_value_t = 1000)]
    invoices: usize,
    /// Merchants the invoices are spread over, round-robin (each (merchant, gate) has its own
    /// balance row, which every credit of that merchant locks).
    #[arg(long, default_value_t = 1)]
    merchants: usize,
    /// Gate of the invoices (few confirmations keep the run short).
    #[arg(long, default_value = "bitcoin")]
    gate: String,
    /// Give up waiting for the credits after this many seconds.
    #[arg(long, default_value_t = 180)]
    timeout_secs: u64,
    /// Override `sandbox.block_interval_ms` (default 1000; the targets are for the default).
    #[arg(long)]
    block_interval_ms: Option<u64>,
    /// Override `pipeline.scan_interval_ms` (default 1000).
    #[arg(long)]
    scan_interval_ms: Option<u64>,
    /// Override `pipeline.track_interval_ms` (default 1000).
    #[arg(long)]
    track_interval_ms: Option<u64>,
    /// Override `pipeline.stage_concurrency` of `track-payment` (default 4).
    #[arg(long)]
    track_concurrency: Option<usize>,
    /// Exit non-zero unless the targets hold (>= 500 credits/s, p99 < 2 s) and the checks pass.
    #[arg(long)]
    check: bool,
}

/// One credited payment's timings, in ms.
struct Sample {
    /// Block that completes the confirmations -> `credited_at`.
    credit_ms: f64,
    /// Block that holds the deposit -> `detected_at` (the scanner's share).
    detect_ms: f64,
}

pub async fn run(args: BenchPipelineArgs) -> anyhow::Result<()> {
    ensure!(args.invoices > 0, "--invoices must be at least 1");
    ensure!(args.merchants > 0, "--merchants must be at least 1");
    let gate = domain::gates::find(&args.gate).with_context(|| format!("unknown gate {:?}", args.gate))?;
    let (admin, db_url) = crate::bench::scratch_database(&args.pg, &args.database).await?;
    let prefix = format!("paygate-bench-{}-{}", std::process::id(), Utc::now().timestamp_millis());

    let result = measure(&args, gate, &db_url, &prefix).await;
    let cleaned = delete_redis_prefix(&args.redis, &prefix).await;
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", args.database)).await?;
    let pass = result?;
    match cleaned {
        Ok(n) => println!("cleanup: deleted {n} Redis keys under {prefix}:*, dropped database {}", args.database),
        Err(e) => eprintln!("cleanup: could not delete the Redis keys under {prefix}:*: {e:#}"),
    }
    if args.check && !pass {
        bail!("pipeline benchmark targets not met");
    }
    Ok(())
}

/// The whole run; returns whether every target and check passed.
async fn measure(args: &BenchPipelineArgs, gate: &'static Gate, db_url: &str, prefix: &str) -> anyhow::Result<bool> {
    let mut config = Config { database_url: db_url.to_owned(), ..Config::default() };
    config.embedded.seed_demo = false;
    // Only the test environment is used: no live rates fetch from outside the machine.
    config.rates.live.provider = domain::config::RatesProviderKind::Static;
    if let Some(v) = args.block_interval_ms {
        config.sandbox.block_interval_ms = v;
    }
    if let Some(v) = args.scan_interval_ms {
        config.pipeline.scan_interval_ms = v;
    }
    if let Some(v) = args.track_interval_ms {
        config.pipeline.track_interval_ms = v;
    }
    if let Some(v) = args.track_concurrency {
        config.pipeline.stage_concurrency.insert("track-payment".into(), v);
    }
    let interval_ms = config.sandbox.interval_ms(gate.id);
    ensure!(interval_ms > 0, "the block interval must be positive (blocks are timed, never mined by hand here)");
    let stage_conc = |q: &str| config.pipeline.stage_concurrency.get(q).copied().unwrap_or(4).max(1);
    println!(
        "pipeline bench: {} invoices of {} merchant(s) on gate {} ({} confirmations), test environment",
        args.invoices, args.merchants, gate.id, gate.confirmations
    );
    println!(
        "intervals: block {} ms, scan {} ms, track {} ms, sweep {} ms; concurrency deposit-scan {}, track-payment {}",
        interval_ms,
        config.pipeline.scan_interval_ms,
        config.pipeline.track_interval_ms,
        config.pipeline.sweep_interval_ms,
        stage_conc("deposit-scan"),
        stage_conc("track-payment"),
    );
    println!(
        "setup: deposit scanner and confirmation tracker run in-process (one tokio runtime, own pool of {} connections) on Redis queues (prefix {prefix}) against PostgreSQL ({})",
        config.db.max_connections, args.database
    );

    // The API side: invoices through the same service the HTTP handler calls.
    let state = api::bootstrap(config.clone()).await?;
    let mut merchants = Vec::with_capacity(args.merchants);
    for i in 0..args.merchants {
        let m =
            domain::merchants::create_merchant(&state.db, &format!("bench-pipeline-{i}"), &Default::default()).await?;
        let (key, _) =
            domain::merchants::create_api_key(&state.db, m.id, Environment::Test, Permissions::all(), Some("bench"))
                .await?;
        merchants.push(Principal {
            key_id: key.id,
            merchant_id: m.id,
            environment: Environment::Test,
            permissions: Permissions::all(),
        });
    }
    let t = Instant::now();
    let invoices = create_invoices(&state, &merchants, gate, args.invoices).await?;
    println!("created {} invoices in {:.2} s", invoices.len(), t.elapsed().as_secs_f64());

    // The workers, as the scanner and tracker binaries run them, minus the process boundary.
    let queues = Queues::connect(&QueueBackend::Redis { url: args.redis.clone(), prefix: prefix.to_owned() })
        .await
        .context("connecting to Redis")?;
    let worker_db = domain::db::connect(&config).await?;
    let stop = CancellationToken::new();
    let stage_stop = stop.clone();
    let workers = tokio::spawn(workers::process::run_stages(
        &[Stage::DepositScanner, Stage::ConfirmationTracker],
        worker_db,
        Arc::new(config.clone()),
        queues,
        async move { stage_stop.cancelled().await },
    ));
    let outcome = burst_and_wait(args, gate, interval_ms, &state.db, &invoices).await;
    stop.cancel();
    workers.await.context("worker task")?.context("workers")?;
    let Outcome { samples, first: first_credit, last: last_credit, burst_at, burst_secs, credited, blocks, metrics } =
        outcome?;

    // Results.
    let n = samples.len();
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
        blocks.0,
        blocks.1
    );
    println!("credited: {credited} of {} payments", invoices.len());
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

    let checks = verify(&state.db, &merchants, gate, &invoices).await?;
    let rate_ok = credited == invoices.len() && rate >= TARGET_CREDITS_PER_SEC;
    let p99_ok = credited == invoices.len() && pct(&credit, 0.99) < TARGET_P99_MS;
    println!(
        "target credits/s >= {TARGET_CREDITS_PER_SEC:.0} (first -> last credit): {}",
        if rate_ok { "PASS" } else { "FAIL" }
    );
    println!("target p99 < {TARGET_P99_MS:.0} ms: {}", if p99_ok { "PASS" } else { "FAIL" });
    println!("correctness: {}", if checks { "PASS" } else { "FAIL" });
    let pass = rate_ok && p99_ok && checks;
    println!("result: {}", if pass { "PASS" } else { "FAIL" });
    Ok(pass)
}

/// Amount of invoice `i`: 0.001 BTC-like plus `i` smallest units, so every payment differs and
/// the balance check catches a lost or doubled credit of any one of them.
fn amount_of(gate: &Gate, i: usize) -> Decimal {
    Decimal::new(1, 3).max(gate.min_amount()) + Decimal::new(i as i64, gate.decimals.min(8))
}

/// Creates `n` invoices, 16 at a time, through `domain::invoices::service::create`; invoice `i`
/// belongs to merchant `i % merchants.len()`.
async fn create_invoices(
    state: &domain::state::AppState,
    merchants: &[Principal],
    gate: &'static Gate,
    n: usize,
) -> anyhow::Result<Vec<(invoice::Model, Decimal)>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    for _ in 0..16 {
        let (state, merchants, next) = (state.clone(), merchants.to_vec(), next.clone());
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(out);
                }
                let amount = amount_of(gate, i);
                let raw = serde_json::json!({
                    "currency": gate.id,
                    "amount": amount.to_string(),
                    "description": format!("bench-pipeline {i}"),
                });
                let req: CreateInvoiceRequest = serde_json::from_value(raw.clone())?;
                let inv = match service::create(&state, &merchants[i % merchants.len()], req, &raw).await {
                    Ok(Created::New(inv)) => inv,
                    Ok(Created::Replayed(_)) => bail!("invoice {i} was replayed"),
                    Err(e) => bail!("creating invoice {i}: {e:?}"),
                };
                out.push((inv, amount));
            }
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        all.extend(r??);
    }
    Ok(all)
}

/// What the burst produced, read back when the last credit was seen.
struct Outcome {
    samples: Vec<Sample>,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    burst_at: DateTime<Utc>,
    burst_secs: f64,
    credited: usize,
    /// Lowest and highest block holding a deposit.
    blocks: (i64, i64),
    /// The job platform's Prometheus text at that moment.
    metrics: String,
}

/// Waits for the scanner, sends every deposit at once, waits for every credit, then reads the
/// timings back from the database.
async fn burst_and_wait(
    args: &BenchPipelineArgs,
    gate: &'static Gate,
    interval_ms: u64,
    db: &DatabaseConnection,
    invoices: &[(invoice::Model, Decimal)],
) -> anyhow::Result<Outcome> {
    // The scanner's first tip read creates the chain (block 1) and its cursor: workers are up.
    let deadline = Instant::now() + Duration::from_secs(30);
    while entity::scan_cursor::Entity::find_by_id((Environment::Test, gate.id.to_owned())).one(db).await?.is_none() {
        ensure!(Instant::now() < deadline, "the deposit scanner did not start within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Every payer at once, as many in flight as the pool has connections (the sandbox chain
    // serializes deposits on its row lock anyway; more would only queue for a connection).
    let payments: Arc<Vec<(String, Decimal)>> = Arc::new(
        invoices
            .iter()
            .map(|(inv, a)| Ok((inv.address_key.clone().context("invoice without an address")?, *a)))
            .collect::<anyhow::Result<_>>()?,
    );
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

    let want = invoices.len() as u64;
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let credited_q = || {
        payment::Entity::find()
            .filter(payment::Column::GateId.eq(gate.id))
            .filter(payment::Column::CreditedAt.is_not_null())
    };
    loop {
        let done = credited_q().count(db).await?;
        if done >= want {
            break;
        }
        if Instant::now() >= deadline {
            eprintln!("timeout: {done} of {want} payments credited after {} s", args.timeout_secs);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = workers::platform::metrics::install_recorder().render();

    // Block times from the final chain row: blocks are only ever added by time here, so block
    // h was due at advanced_at - (height - h) * interval (see domain::chain::sandbox::due).
    let chain = sandbox_chain::Entity::find_by_id(gate.id).one(db).await?.context("sandbox chain row missing")?;
    let block_time =
        |h: i64| chain.advanced_at - chrono::Duration::milliseconds((chain.height - h) * interval_ms as i64);
    let payments = credited_q().all(db).await?;
    let mut samples = Vec::with_capacity(payments.len());
    let (mut first, mut last) = (DateTime::<Utc>::MAX_UTC, DateTime::<Utc>::MIN_UTC);
    let heights = payments.iter().filter_map(|p| p.block_height);
    let blocks = (heights.clone().min().unwrap_or(0), heights.max().unwrap_or(0));
    for p in &payments {
        let (Some(credited_at), Some(h)) = (p.credited_at, p.block_height) else { continue };
        let completes = h + i64::from(p.required_confirmations) - 1;
        ensure!(completes <= chain.height, "payment {} credited before its block {completes} existed", p.id);
        let credit_ms = ms(credited_at - block_time(completes));
        let detect_ms = ms(p.detected_at - block_time(h));
        ensure!(credit_ms >= 0.0, "payment {} credited {credit_ms} ms before block {completes} was due", p.id);
        samples.push(Sample { credit_ms, detect_ms });
        first = first.min(credited_at);
        last = last.max(credited_at);
    }
    ensure!(!samples.is_empty(), "no payment was credited");
    let credited = samples.len();
    Ok(Outcome { samples, first, last, burst_at, burst_secs, credited, blocks, metrics })
}

/// Exactly one `balance.credited` event and one available-bucket credit entry per payment, every
/// invoice paid once, and each merchant's available balance equal to the sum of its deposits.
async fn verify(
    db: &DatabaseConnection,
    merchants: &[Principal],
    gate: &Gate,
    invoices: &[(invoice::Model, Decimal)],
) -> anyhow::Result<bool> {
    let n = invoices.len();
    let mut ok = true;
    let mut check = |name: &str, pass: bool, detail: String| {
        println!("  check {name}: {} ({detail})", if pass { "ok" } else { "FAILED" });
        ok &= pass;
    };
    let payments = payment::Entity::find().filter(payment::Column::GateId.eq(gate.id)).all(db).await?;
    let credited = payments.iter().filter(|p| p.credited_at.is_some()).count();
    let per_invoice: HashMap<Uuid, usize> = payments.iter().fold(Default::default(), |mut m, p| {
        *m.entry(p.invoice_id).or_default() += 1;
        m
    });
    check(
        "payments",
        payments.len() == n && credited == n && per_invoice.len() == n && per_invoice.values().all(|&c| c == 1),
        format!("{} payments, {credited} credited, {} invoices paid, want {n} each", payments.len(), per_invoice.len()),
    );

    let events = event::Entity::find().filter(event::Column::EventType.eq("balance.credited")).all(db).await?;
    let payment_ids: HashSet<Uuid> = payments.iter().map(|p| p.id).collect();
    let event_payments: HashSet<Uuid> = events
        .iter()
        .filter_map(|e| e.payload.get("payment_id").and_then(|v| v.as_str()).and_then(|s| s.parse().ok()))
        .collect();
    check(
        "balance.credited events",
        events.len() == n && event_payments == payment_ids,
        format!(
            "{} events for {} distinct payments (the recorded ones: {}), want {n}",
            events.len(),
            event_payments.len(),
            event_payments == payment_ids
        ),
    );

    let merchant_ids: Vec<Uuid> = merchants.iter().map(|m| m.merchant_id).collect();
    let credits = ledger_entry::Entity::find()
        .filter(ledger_entry::Column::MerchantId.is_in(merchant_ids.clone()))
        .filter(ledger_entry::Column::Bucket.eq(Bucket::Available))
        .filter(ledger_entry::Column::EntryType.eq(EntryType::InvoiceCredit))
        .all(db)
        .await?;
    let credit_refs: HashSet<Uuid> = credits.iter().filter_map(|e| e.reference_id).collect();
    check(
        "ledger credits",
        credits.len() == n && credit_refs == payment_ids,
        format!(
            "{} available credit entries for {} distinct payments (the recorded ones: {}), want {n}",
            credits.len(),
            credit_refs.len(),
            credit_refs == payment_ids
        ),
    );

    let mut expected: HashMap<Uuid, Decimal> = merchant_ids.iter().map(|&id| (id, Decimal::ZERO)).collect();
    for (inv, amount) in invoices {
        *expected.entry(inv.merchant_id).or_default() += *amount;
    }
    let balances: HashMap<Uuid, balance::Model> = balance::Entity::find()
        .filter(balance::Column::MerchantId.is_in(merchant_ids))
        .filter(balance::Column::Environment.eq(Environment::Test))
        .filter(balance::Column::GateId.eq(gate.id))
        .all(db)
        .await?
        .into_iter()
        .map(|b| (b.merchant_id, b))
        .collect();
    let (mut available, mut pending, mut matching) = (Decimal::ZERO, Decimal::ZERO, 0);
    for (id, want) in &expected {
        let (a, p) = balances.get(id).map_or((Decimal::ZERO, Decimal::ZERO), |b| (b.available.0, b.pending.0));
        available += a;
        pending += p;
        matching += usize::from(a == *want && p.is_zero());
    }
    let total: Decimal = expected.values().copied().sum();
    check(
        "balance",
        matching == expected.len(),
        format!(
            "available {}, pending {}, sum of deposits {}; {matching} of {} merchants exact",
            available.normalize(),
            pending.normalize(),
            total.normalize(),
            expected.len()
        ),
    );
    Ok(ok)
}

/// The job runtime's own counters at the last credit: how many jobs each stage ran for the
/// burst, and how late they started after they were due (the queue lag histogram).
fn profile(metrics: &str, prefix: &str, payments: usize, window_secs: f64) {
    let value = |name: &str, queue: &str, le: Option<&str>| -> f64 {
        let label = format!("queue=\"{prefix}:{queue}\"");
        metrics
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(&label))
            .filter(|l| le.is_none_or(|le| l.contains(&format!("le=\"{le}\""))))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |a, b| a + b)
    };
    let track = value("paygate_jobs_processed_total", "track-payment", None);
    let scans = value("paygate_jobs_processed_total", "deposit-scan", None);
    let retried = value("paygate_jobs_retried_total", "track-payment", None)
        + value("paygate_jobs_retried_total", "deposit-scan", None);
    println!(
        "profile: track-payment jobs {track:.0} ({:.1} per payment, {:.0}/s from burst to last credit), deposit-scan jobs {scans:.0}, retried {retried:.0}",
        track / payments as f64,
        track / window_secs
    );
    let lag = "paygate_job_queue_lag_seconds_bucket";
    let total = value("paygate_job_queue_lag_seconds_count", "track-payment", None);
    if total > 0.0 {
        let shares: Vec<String> = ["0.1", "0.25", "0.5", "1", "2.5", "5"]
            .iter()
            .map(|le| format!("<= {le} s {:.0}%", 100.0 * value(lag, "track-payment", Some(le)) / total))
            .collect();
        println!("  track-payment start lag after due: {}", shares.join(", "));
    }
}

/// Deletes every Redis key under `prefix:` (SCAN, never KEYS); returns how many.
pub(crate) async fn delete_redis_prefix(url: &str, prefix: &str) -> anyhow::Result<u64> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await?;
        if !keys.is_empty() {
            deleted += redis::cmd("DEL").arg(&keys).query_async::<u64>(&mut conn).await?;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

fn secs(d: chrono::Duration) -> f64 {
    ms(d) / 1000.0
}

fn ms(d: chrono::Duration) -> f64 {
    d.num_microseconds().map_or(f64::INFINITY, |us| us as f64 / 1000.0)
}

/// Nearest-rank percentile of sorted values (NaN when empty).
pub(crate) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(pct(&v, 0.50), 50.0);
        assert_eq!(pct(&v, 0.99), 99.0);
        assert_eq!(pct(&v, 1.0), 100.0);
        assert!(pct(&[], 0.5).is_nan());
    }

    #[test]
    fn amounts_differ_and_respect_the_gate() {
        let g = domain::gates::find("bitcoin").unwrap();
        assert_eq!(amount_of(g, 0), Decimal::new(1, 3));
        assert_eq!(amount_of(g, 7), Decimal::new(100_007, 8));
        assert!(amount_of(g, 999) <= g.max_amount());
    }
}
