//! `ops bench-webhooks`: one `webhook-deliverer` process against a local receiver that answers
//! in 50 ms and verifies every signature. Events are written to the outbox of a fresh
//! PostgreSQL database at a steady offered rate (like the pipeline writes them), the deliverer
//! runs on Redis queues under a fresh key prefix, and the receiver stamps each arrival.
//! Prints deliveries per second over the window and the time from event creation to receipt
//! (p50, p99, max); then checks that every event arrived, signed. Floats here are measurements.
#![allow(clippy::float_arithmetic)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use api::webhooks::receiver::{Behaviour, Received, Receiver};
use chrono::Utc;
use clap::Args;
use domain::config::Config;
use domain::webhooks::outbound::TargetPolicy;
use domain::webhooks::secrets::SecretBox;
use entity::{DeliveryStatus, Environment, event, webhook_delivery};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use uuid::Uuid;

use crate::bench::{Figures, on_scratch};
use crate::bench_pipeline::pct;

/// The benchmark goal: one deliverer process sustains this many deliveries a second.
const TARGET_PER_SEC: f64 = 2000.0;
/// The benchmark goal: offered twice its ceiling, a deliverer still delivers this share of it.
const OVERLOAD_HELD: f64 = 0.9;

#[derive(Args, Debug)]
pub struct BenchWebhooksArgs {
    /// Server URL of PostgreSQL (without database); a fresh database is created on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    #[arg(long, default_value = "paygate_bench_webhooks")]
    database: String,
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// Events offered per second.
    #[arg(long, default_value_t = 1200)]
    rate: u64,
    /// Seconds of offered load.
    #[arg(long, default_value_t = 20)]
    secs: u64,
    /// Seconds of the same load offered before the measured window (its deliveries awaited and
    /// not counted): the database's working set is in memory, as on a server that has been
    /// running, rather than just copied (`--grown`) or created.
    #[arg(long, default_value_t = 10)]
    warmup_secs: u64,
    /// The receiver's answer time.
    #[arg(long, default_value_t = 50)]
    latency_ms: u64,
    /// Merchants the events are spread over (each has its own endpoint on the receiver).
    #[arg(long, default_value_t = 10)]
    merchants: usize,
    /// The deliverer binary; default: `webhook-deliverer` beside this `ops`
    /// (`cargo build --release -p workers --bin webhook-deliverer`).
    #[arg(long)]
    deliverer_bin: Option<PathBuf>,
    /// Override `pipeline.stage_concurrency` of `webhook-deliver` (default 256).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Judge the run as an overload: the deliverer's ceiling (deliveries/s of a run offered
    /// about as much as it can take), with `--rate` about twice it. Prints the deliveries/s
    /// while the load is on beside 90 % of the ceiling, and how far from the order of their
    /// events the backlog arrives once the load stops.
    #[arg(long)]
    ceiling: Option<f64>,
    /// Run twice in one invocation: on an empty database, then on a copy of this grown database
    /// (made by `ops bench-seed`; the copy is dropped at the end), and print both side by side
    /// with grown / empty. The events are the bench's merchants' on both.
    #[arg(long)]
    grown: Option<String>,
    /// Exit non-zero unless every event arrived, signed, once, and the goals held (>= 2000
    /// deliveries/s; with `--ceiling`, >= 90 % of it under overload, the backlog in order).
    #[arg(long)]
    check: bool,
}

pub async fn run(args: BenchWebhooksArgs) -> anyhow::Result<()> {
    ensure!(args.rate > 0 && args.secs > 0 && args.merchants > 0, "--rate, --secs and --merchants must be positive");
    let bin = match &args.deliverer_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("webhook-deliverer"),
    };
    ensure!(
        bin.exists(),
        "{} is missing: build it first (cargo build --release -p workers --bin webhook-deliverer) or pass --deliverer-bin",
        bin.display()
    );
    let labels = ["deliveries/s", "p50 event -> received, ms", "p99 event -> received, ms"];
    let runs = crate::bench::empty_then_grown(args.grown.as_deref(), labels, async |template| {
        let (pg, db, redis) = (&args.pg, &args.database, &args.redis);
        on_scratch(pg, db, template, redis, "paygate-benchwh", async |url, prefix| {
            measure(&args, &bin, url, prefix).await
        })
        .await
    })
    .await?;
    if args.check && !runs.iter().all(|r| r.pass) {
        bail!("webhook benchmark target not met");
    }
    Ok(())
}

async fn measure(
    args: &BenchWebhooksArgs,
    bin: &std::path::Path,
    db_url: &str,
    prefix: &str,
) -> anyhow::Result<Figures> {
    let config = Config { database_url: db_url.to_owned(), ..Config::default() };
    let db = domain::db::connect(&config).await?;
    domain::db::migrate(&db).await?;
    let key = SecretBox::new_key_hex();
    let sbox = SecretBox::new(SecretBox::parse_key(&key)?);
    let rx =
        Receiver::start("127.0.0.1:0".parse()?, &[], Behaviour::Ok(Duration::from_millis(args.latency_ms))).await?;
    let mut merchants = Vec::new();
    let mut secrets = Vec::new();
    for i in 0..args.merchants {
        let m = domain::merchants::create_merchant(&db, &format!("Bench {i}"), &Default::default()).await?;
        let policy = TargetPolicy { allow_insecure: true };
        let url = format!("{}/{i}", rx.url());
        let (_, secret) =
            domain::webhooks::endpoints::set(&db, &sbox, policy, m.id.into(), Environment::Test, &url).await?;
        secrets.push(secret.context("new endpoint secret")?);
        merchants.push(m.id);
    }
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    rx.set_secrets(&refs);

    let mut cmd = Command::new(bin);
    cmd.env("PAYGATE_DATABASE_URL", db_url)
        .env("PAYGATE_QUEUE__BACKEND", "redis")
        .env("PAYGATE_QUEUE__REDIS_URL", &args.redis)
        .env("PAYGATE_QUEUE__PREFIX", prefix)
        .env("PAYGATE_WEBHOOKS__SECRET_KEY", &key)
        .env("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")
        .env("PAYGATE_WORKER__LISTEN", "127.0.0.1:0")
        .env("PAYGATE_RATES__LIVE__PROVIDER", "static")
        .env("RUST_LOG", "warn,sqlx=error")
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    if let Some(c) = args.concurrency {
        cmd.env("PAYGATE_PIPELINE__STAGE_CONCURRENCY__WEBHOOK-DELIVER", c.to_string());
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {}", bin.display()))?;
    let result = offer_and_wait(args, &db, &rx, &merchants).await;
    // The benchmark goal: the deliverer's memory once the load has passed (docs/benchmarks.md "Idle memory").
    match resident_mb(child.id()) {
        Some((rss, peak)) => println!("webhook-deliverer after the run: RSS {rss:.1} MB, peak {peak:.1} MB"),
        None => println!("webhook-deliverer after the run: RSS unknown (no /proc/{}/status)", child.id()),
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    result
}

async fn offer_and_wait(
    args: &BenchWebhooksArgs,
    db: &DatabaseConnection,
    rx: &Receiver,
    merchants: &[Uuid],
) -> anyhow::Result<Figures> {
    let total = usize::try_from(args.rate * args.secs)?;
    println!(
        "webhook bench: {total} events at {}/s for {} s over {} merchant endpoints; receiver answers in {} ms; one deliverer process, PostgreSQL + Redis",
        args.rate, args.secs, args.merchants, args.latency_ms
    );
    // Warm up: the deliverer is up once a first event comes through; then the same load for
    // `--warmup-secs`, delivered before the window opens.
    let warm = Instant::now();
    insert_events(db, merchants, 1, 0).await?;
    while rx.count() == 0 {
        ensure!(warm.elapsed() < Duration::from_secs(60), "the deliverer never delivered the warm-up event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let warmup = usize::try_from(args.rate * args.warmup_secs)?;
    let mut n = 1usize;
    if warmup > 0 {
        n += offer(db, merchants, args.rate, warmup, n).await?;
        while rx.count() < n {
            ensure!(warm.elapsed() < Duration::from_secs(180), "the warm-up's deliveries did not all arrive");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("warm-up: {warmup} events at {}/s delivered, not counted", args.rate);
    }
    let baseline = rx.count();

    let start = Instant::now();
    offer(db, merchants, args.rate, total, n).await?;
    let offered_secs = start.elapsed().as_secs_f64();
    let load_off = Utc::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    while rx.count() < baseline + total {
        if Instant::now() > deadline {
            println!("timed out: {} of {total} received", rx.count() - baseline);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let received = rx.received();
    let window: Vec<_> = received.iter().skip(baseline).collect();
    let first = window.iter().map(|r| r.at).min().context("nothing received")?;
    let last = window.iter().map(|r| r.at).max().context("nothing received")?;
    let span = (last - first).num_microseconds().unwrap_or(1).max(1) as f64 / 1e6;
    let mut lat: Vec<f64> = window
        .iter()
        .filter_map(|r| {
            let created = chrono::DateTime::parse_from_rfc3339(r.body["created_at"].as_str()?).ok()?;
            Some((r.at - created.to_utc()).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    let per_sec = window.len() as f64 / span;
    println!(
        "delivered {} in {span:.2} s: {per_sec:.0} deliveries/s (offered {:.0}/s over {offered_secs:.2} s)",
        window.len(),
        total as f64 / offered_secs
    );
    println!(
        "event created -> received: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms (includes the receiver's {} ms)",
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN),
        args.latency_ms
    );

    // Checks: every event has a succeeded delivery, every request verified, no duplicates.
    let unverified = received.iter().filter(|r| !r.verified).count();
    let ids: HashSet<&str> = received.iter().map(|r| r.delivery_id.as_str()).collect();
    // The last answers are being recorded as the receiver counts them.
    let events =
        event::Entity::find().filter(event::Column::MerchantId.is_in(merchants.iter().copied())).count(db).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let succeeded = loop {
        let n = webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::Status.eq(DeliveryStatus::Succeeded))
            .filter(webhook_delivery::Column::MerchantId.is_in(merchants.iter().copied()))
            .count(db)
            .await?;
        if n >= events || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let all = succeeded == events && ids.len() == received.len() && unverified == 0;
    println!(
        "checks: {events} events, {succeeded} deliveries succeeded, {} requests ({} distinct deliveries), {unverified} unverified: {}",
        received.len(),
        ids.len(),
        if all { "ok" } else { "FAILED" }
    );
    // Each second's arrivals: a steady figure under overload, not a falling one.
    let seconds = arrivals_per_second(&window, first);
    let shown: Vec<String> = seconds.iter().map(ToString::to_string).collect();
    println!("arrivals each second: {}", shown.join(" "));
    let met = match args.ceiling {
        // Sustained: everything offered arrived, at >= 2000/s (2% allowance for the window's edges).
        None => {
            let met = per_sec >= TARGET_PER_SEC * 0.98 && window.len() == total;
            if (args.rate as f64) < TARGET_PER_SEC {
                println!(
                    "note: --rate {} is below the goal; offer at least {TARGET_PER_SEC:.0}/s to test it",
                    args.rate
                );
            }
            println!("goal >= {TARGET_PER_SEC:.0} deliveries/s: {per_sec:.0}/s, {}", verdict(met));
            met
        }
        Some(ceiling) => overload(args, ceiling, &window, first, load_off),
    };
    Ok(Figures { rate: per_sec, p50_ms: pct(&lat, 0.50), p99_ms: pct(&lat, 0.99), pass: all && met })
}

/// Offers `total` events at `rate` a second (a batch every 10 ms), numbered from `from`; returns
/// how many.
async fn offer(
    db: &DatabaseConnection,
    merchants: &[Uuid],
    rate: u64,
    total: usize,
    from: usize,
) -> anyhow::Result<usize> {
    let tick = Duration::from_millis(10);
    let start = Instant::now();
    let mut offered = 0usize;
    while offered < total {
        let due = (start.elapsed().as_secs_f64() * rate as f64).ceil() as usize;
        let batch = due.min(total) - offered;
        if batch > 0 {
            insert_events(db, merchants, batch, from + offered).await?;
            offered += batch;
        }
        tokio::time::sleep(tick).await;
    }
    Ok(offered)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

/// Arrivals in each whole second after `first`.
fn arrivals_per_second(window: &[&Received], first: chrono::DateTime<Utc>) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for r in window {
        let s = usize::try_from((r.at - first).num_seconds()).unwrap_or(0);
        if out.len() <= s {
            out.resize(s + 1, 0);
        }
        out[s] += 1;
    }
    out
}

/// The overload goals: deliveries/s while the load was on (from the first arrival to the load's
/// end) against the ceiling, and the order in which the backlog left once the load stopped.
fn overload(
    args: &BenchWebhooksArgs,
    ceiling: f64,
    window: &[&Received],
    first: chrono::DateTime<Utc>,
    load_off: chrono::DateTime<Utc>,
) -> bool {
    let during = window.iter().filter(|r| r.at <= load_off).count();
    let on_secs = (load_off - first).num_microseconds().unwrap_or(1).max(1) as f64 / 1e6;
    let held = during as f64 / on_secs;
    let held_ok = held >= ceiling * OVERLOAD_HELD;
    println!(
        "overload: offered {}/s, {:.1}x the ceiling of {ceiling:.0}/s; delivered {held:.0}/s while offered ({:.2} of the ceiling)",
        args.rate,
        args.rate as f64 / ceiling,
        held / ceiling
    );
    println!("goal >= {:.0}% of the ceiling under overload: {}", OVERLOAD_HELD * 100.0, verdict(held_ok));
    // The backlog once the load stopped: how far each delivery arrived from its event's place.
    let mut drain: Vec<&&Received> = window.iter().filter(|r| r.at > load_off).collect();
    drain.sort_by_key(|r| r.at);
    // Due times: the events' `created_at` (events written together share one, in no order).
    let seq: Vec<i64> = drain
        .iter()
        .filter_map(|r| chrono::DateTime::parse_from_rfc3339(r.body["created_at"].as_str()?).ok())
        .map(|t| t.timestamp_micros())
        .collect();
    let displaced = displacement(&seq);
    let drain_secs = drain.last().map_or(0.0, |r| (r.at - load_off).num_milliseconds() as f64 / 1000.0);
    // Attempts run side by side (the stage's concurrency, and as many fetched ahead): within
    // twice that, deliveries left in the order of their events.
    let allowed = 2 * args.concurrency.unwrap_or(256);
    let order_ok = seq.len() == drain.len() && displaced <= allowed;
    println!(
        "drain: {} deliveries in {drain_secs:.2} s after the load stopped; each at most {displaced} places from its event's order",
        drain.len()
    );
    println!("goal backlog drains in the order of its events (within {allowed} places): {}", verdict(order_ok));
    held_ok && order_ok
}

/// The largest distance between an item's place in `seq` and the places its value takes once
/// sorted (equal values may come in any order among themselves).
fn displacement(seq: &[i64]) -> usize {
    let mut sorted = seq.to_vec();
    sorted.sort_unstable();
    seq.iter()
        .enumerate()
        .map(|(place, v)| {
            let (lo, hi) = (sorted.partition_point(|x| x < v), sorted.partition_point(|x| x <= v) - 1);
            if place < lo { lo - place } else { place.saturating_sub(hi) }
        })
        .max()
        .unwrap_or(0)
}

/// `count` events of mixed kinds, spread over the merchants, created now.
async fn insert_events(db: &DatabaseConnection, merchants: &[Uuid], count: usize, from: usize) -> anyhow::Result<()> {
    let kinds = domain::events::EventKind::ALL;
    let now = Utc::now();
    let rows: Vec<event::ActiveModel> = (from..from + count)
        .map(|i| {
            let merchant_id = merchants[i % merchants.len()];
            event::ActiveModel::from(event::Model::new(
                merchant_id,
                Environment::Test,
                kinds[i % kinds.len()].as_str(),
                format!("bench:{i}:{}", Uuid::now_v7()),
                json!({"invoice_id": Uuid::now_v7(), "status": "paid", "amount_paid": "0.001", "n": i}),
                now,
            ))
        })
        .collect();
    event::Entity::insert_many(rows).exec_without_returning(db).await?;
    Ok(())
}

/// A process's resident set and its peak, in MB (`VmRSS`, `VmHWM` of `/proc/<pid>/status`).
fn resident_mb(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
    };
    Some((kb("VmRSS:")? / 1024.0, kb("VmHWM:")? / 1024.0))
}

#[cfg(test)]
mod tests {
    use super::displacement;

    #[test]
    fn displacement_is_the_farthest_any_item_moved() {
        assert_eq!(displacement(&[]), 0);
        assert_eq!(displacement(&[1, 2, 3, 4]), 0);
        assert_eq!(displacement(&[2, 1, 3, 4]), 1);
        assert_eq!(displacement(&[4, 1, 2, 3]), 3);
        assert_eq!(displacement(&[10, 20, 40, 30, 50]), 1);
        // Equal due times in any order are in order.
        assert_eq!(displacement(&[1, 2, 2, 3, 2]), 1);
        assert_eq!(displacement(&[2, 2, 1, 2, 2]), 2);
        assert_eq!(displacement(&[5, 5, 5, 5]), 0);
    }
}
