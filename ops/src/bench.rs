//! `ops bench`: invoice creation over HTTP against a PostgreSQL-backed API, measured next to a
//! raw single-row PostgreSQL insert (pgbench) on the same machine in the same run. The HTTP load
//! runs twice, rate limits off and on (limits high enough never to throttle), each on a fresh
//! database, and both are printed side by side with their ratio.
//! Floats here are measurements (rates, milliseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use api::auth::Permissions;
use clap::Args;
use domain::config::Config;
use entity::Environment;
use sea_orm::ConnectionTrait;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Server URL of PostgreSQL (without database); a fresh database is created on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// Name of the scratch database (dropped and recreated).
    #[arg(long, default_value = "paygate_bench")]
    database: String,
    /// Concurrent HTTP connections (and pgbench clients). 32 saturates two cores; more only
    /// queue requests (64: about 10 % more requests a second, p99 near twice as long).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Measured seconds of each HTTP run (off, on, on, off) and of the pgbench run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Unmeasured warm-up seconds before the HTTP run.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Exit non-zero unless the targets hold (>= 50% of the raw insert rate, p99 < 15 ms, and
    /// with rate limits on >= 95% of the rate with them off).
    #[arg(long)]
    check: bool,
    /// Redis for the limits-on run (the shared store); default the in-process store.
    #[arg(long)]
    rate_limit_redis: Option<String>,
}

/// Rate limits during one HTTP run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Limits {
    Off,
    /// Enabled, every class far above what the run sends.
    On,
}

pub(crate) struct HttpResult {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) elapsed: Duration,
    pub(crate) p50_ms: f64,
    pub(crate) p90_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) p999_ms: f64,
    pub(crate) max_ms: f64,
}

/// The benchmark goal: invoice creation at this share of PostgreSQL's raw single-row insert rate or more.
const GOAL_RAW_SHARE: f64 = 0.50;
/// The benchmark goal: p99 of an invoice creation under this load, in milliseconds.
const GOAL_P99_MS: f64 = 15.0;

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    // Off, on, on, off (each on a fresh database): a drift of the machine over the run (other
    // load, PostgreSQL checkpoints) weighs on both sides alike instead of on the later one. The
    // raw baseline brackets them the same way, once before and once after (pgbench's own figure
    // moves by as much as the share being judged), and the share is taken of their mean.
    let raw_before = {
        let (_, db_url) = scratch_database(&args.pg, &args.database).await?;
        pgbench(&args, &db_url)?
    };
    let (mut off, mut on) = (Samples::default(), Samples::default());
    for limits in [Limits::Off, Limits::On, Limits::On, Limits::Off] {
        let (_, db_url) = scratch_database(&args.pg, &args.database).await?;
        let s = http_run(&args, &db_url, limits).await?;
        match limits {
            Limits::Off => off.merge(s),
            Limits::On => on.merge(s),
        }
    }
    let (off, http) = (off.summary(), on.summary());
    let (admin, db_url) = scratch_database(&args.pg, &args.database).await?;
    let raw_after = pgbench(&args, &db_url)?;
    let raw_tps = (raw_before + raw_after) / 2.0;

    let rps = http.rps();
    let ratio = rps / raw_tps;
    let limits_ratio = rps / off.rps();
    println!("invoice create over HTTP ({} connections):", args.concurrency);
    println!(
        "  {:<28} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "errors"
    );
    for (label, r) in [("rate limits off", &off), (limits_label(&args), &http)] {
        println!(
            "  {:<28} {:>9.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>7}",
            label,
            r.rps(),
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.max_ms,
            r.errors
        );
    }
    println!("  limits on / off: {:.1}% of the throughput (target >= 95%)", limits_ratio * 100.0);
    println!(
        "  with limits on: {} requests in {:.1} s, p99.9 {:.2} ms",
        http.requests,
        http.elapsed.as_secs_f64(),
        http.p999_ms
    );
    println!(
        "raw PostgreSQL single-row insert (pgbench): {raw_tps:.0} tps (mean of {raw_before:.0} before and {raw_after:.0} after)"
    );
    // The benchmark goals, with limits on (the production setting).
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let (ratio_ok, p99_ok) = (ratio >= GOAL_RAW_SHARE, http.p99_ms < GOAL_P99_MS);
    println!(
        "goal >= {:.0}% of the raw insert rate: {:.1}%, {}",
        GOAL_RAW_SHARE * 100.0,
        ratio * 100.0,
        verdict(ratio_ok)
    );
    println!("goal p99 < {GOAL_P99_MS:.0} ms: {:.2} ms, {}", http.p99_ms, verdict(p99_ok));
    let pass = ratio_ok && p99_ok && http.errors == 0 && off.errors == 0 && limits_ratio >= 0.95;
    println!("result: {}", verdict(pass));
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", args.database)).await?;
    if args.check && !pass {
        bail!("benchmark targets not met");
    }
    Ok(())
}

fn limits_label(args: &BenchArgs) -> &'static str {
    if args.rate_limit_redis.is_some() { "rate limits on (Redis)" } else { "rate limits on (in process)" }
}

impl HttpResult {
    pub(crate) fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// Latencies (µs) of the successful requests of measured windows, with errors and total time.
#[derive(Default)]
pub(crate) struct Samples {
    pub(crate) lat: Vec<u32>,
    pub(crate) errors: u64,
    pub(crate) elapsed: Duration,
}

impl Samples {
    pub(crate) fn merge(&mut self, other: Samples) {
        self.lat.extend(other.lat);
        self.errors += other.errors;
        self.elapsed += other.elapsed;
    }

    pub(crate) fn summary(mut self) -> HttpResult {
        self.lat.sort_unstable();
        let all = &self.lat;
        let pct = |p: f64| -> f64 {
            if all.is_empty() {
                return f64::NAN;
            }
            let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
            f64::from(all[i]) / 1000.0
        };
        HttpResult {
            requests: all.len() as u64,
            errors: self.errors,
            elapsed: self.elapsed,
            p50_ms: pct(0.50),
            p90_ms: pct(0.90),
            p99_ms: pct(0.99),
            p999_ms: pct(0.999),
            max_ms: pct(1.0),
        }
    }
}

async fn http_run(args: &BenchArgs, db_url: &str, limits: Limits) -> anyhow::Result<Samples> {
    let mut config = Config { database_url: db_url.to_owned(), ..Config::default() };
    config.db.max_connections = 32;
    config.embedded.seed_demo = false;
    config.rate_limits.enabled = limits == Limits::On;
    if limits == Limits::On {
        // Every request is checked and counted, none refused: the bench key's writes bucket
        // holds far more than the run can send.
        config.rate_limits.writes = domain::config::RateLimit { limit: 100_000_000, period_secs: 60 };
        config.redis_url = args.rate_limit_redis.clone();
    }
    let api = ApiThread::start(config, |state| async move {
        let m = domain::merchants::create_merchant(&state.db, "bench", &Default::default()).await?;
        let (_, key) = domain::merchants::create_api_key(
            &state.db,
            m.id.into(),
            Environment::Test,
            Permissions::all(),
            Some("bench"),
        )
        .await?;
        Ok(key)
    })
    .await?;
    let (addr, key) = (api.addr, api.setup.clone());

    // A lean load generator: one HTTP/1.1 connection per task over raw hyper (like wrk), so the
    // client takes as little of the machine's CPU as possible from the system under test.
    let body = bytes::Bytes::from_static(br#"{"currency":"BTC","amount":"0.001","description":"bench"}"#);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let (key, body, measuring, stop, errors) =
            (key.clone(), body.clone(), measuring.clone(), stop.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(16_384);
            while !stop.load(Ordering::Relaxed) {
                // The connection takes its next request once it has finished the last one;
                // sending before that is refused on the client's side, not by the server. One
                // that cannot take one any more was closed: an error, and its load ends.
                if sender.ready().await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                let req = hyper::Request::post("/v1/invoices")
                    .header("host", addr.to_string())
                    .header("x-api-key", &key)
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(body.clone()));
                let t = Instant::now();
                let ok = match req {
                    Ok(req) => match sender.send_request(req).await {
                        Ok(resp) => {
                            let created = resp.status().as_u16() == 201;
                            created && http_body_util::BodyExt::collect(resp.into_body()).await.is_ok()
                        }
                        Err(_) => false,
                    },
                    Err(_) => false,
                };
                if measuring.load(Ordering::Relaxed) {
                    if ok {
                        lat.push(t.elapsed().as_micros() as u32);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_secs(args.warmup)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(args.seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    api.stop()?;
    Ok(Samples { lat: all, errors: errors.load(Ordering::Relaxed), elapsed })
}

/// pgbench with a one-statement script: a single-row INSERT of an invoice-sized row.
fn pgbench(args: &BenchArgs, db_url: &str) -> anyhow::Result<f64> {
    let u = url::Url::parse(db_url)?;
    let host = u.host_str().unwrap_or("127.0.0.1").to_owned();
    let port = u.port().unwrap_or(5432).to_string();
    let user = if u.username().is_empty() { "postgres".to_owned() } else { u.username().to_owned() };
    let dbname = u.path().trim_start_matches('/').to_owned();
    let psql = |sql: &str| -> anyhow::Result<()> {
        let st = Command::new("psql")
            .env("PGSSLMODE", "disable")
            .args(["-q", "-h", &host, "-p", &port, "-U", &user, "-d", &dbname, "-v", "ON_ERROR_STOP=1", "-c", sql])
            .status()
            .context("running psql")?;
        if !st.success() {
            bail!("psql failed: {sql}");
        }
        Ok(())
    };
    psql(
        "CREATE TABLE bench_raw_insert (id uuid PRIMARY KEY, merchant_id uuid NOT NULL, amount numeric NOT NULL, status varchar(16) NOT NULL, address varchar(128) NOT NULL, created_at timestamptz NOT NULL DEFAULT now())",
    )?;
    let script = std::env::temp_dir().join(format!("paygate-bench-{}.sql", std::process::id()));
    std::fs::write(
        &script,
        "INSERT INTO bench_raw_insert (id, merchant_id, amount, status, address) VALUES (gen_random_uuid(), gen_random_uuid(), 0.001, 'pending', md5(random()::text));\n",
    )?;
    let out = Command::new("pgbench")
        .env("PGSSLMODE", "disable")
        .args([
            "-n",
            "-h",
            &host,
            "-p",
            &port,
            "-U",
            &user,
            "-c",
            &args.concurrency.to_string(),
            "-j",
            "2",
            "-T",
            &args.seconds.to_string(),
            "-f",
        ])
        .arg(&script)
        .arg(&dbname)
        .output()
        .context("running pgbench (install postgresql-contrib / the PostgreSQL server package)")?;
    let _ = std::fs::remove_file(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("pgbench failed: {}{}", text, String::from_utf8_lossy(&out.stderr));
    }
    text.lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| l.trim_start_matches("tps = ").split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok())
        .with_context(|| format!("no tps line in pgbench output:\n{text}"))
}

/// A fresh scratch database `name` on the PostgreSQL server `pg` (dropped first if it exists):
/// the server's admin connection (to drop it afterwards) and the database's URL.
///
/// Same-host PostgreSQL: no TLS on either side. TLS on loopback protects nothing, and sqlx
/// 0.9.0 does not set TCP_NODELAY, so TLS-split writes stall on Nagle + delayed ACK (~40-100 ms
/// tails; see docs/operations.md).
pub(crate) async fn scratch_database(pg: &str, name: &str) -> anyhow::Result<(sea_orm::DatabaseConnection, String)> {
    scratch_database_from(pg, name, None).await
}

/// [`scratch_database`], as a copy of `template` when given (a grown database made by
/// `ops bench-seed`: the copy is written to and dropped, the template stays as seeded). The copy
/// is made file by file, so it takes the time of copying the template's files (about a minute
/// for a million invoices), and it keeps the template's planner statistics.
pub(crate) async fn scratch_database_from(
    pg: &str,
    name: &str,
    template: Option<&str>,
) -> anyhow::Result<(sea_orm::DatabaseConnection, String)> {
    use sea_orm::ConnectionTrait;
    let admin = sea_orm::Database::connect(format!("{}/postgres", pg.trim_end_matches('/')))
        .await
        .context("connecting to PostgreSQL")?;
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    match template {
        None => admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await?,
        Some(t) => admin
            .execute_unprepared(&format!("CREATE DATABASE {name} TEMPLATE {t} STRATEGY FILE_COPY"))
            .await
            .with_context(|| {
            format!("copying the grown database {t} (is it there, and is nothing connected to it?)")
        })?,
    };
    Ok((admin, format!("{}/{name}?sslmode=disable", pg.trim_end_matches('/'))))
}

/// What one run of a write benchmark measured, for the grown-vs-empty table.
pub(crate) struct Figures {
    /// Events handled per second (credits, deliveries).
    pub(crate) rate: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    /// Every target and check held.
    pub(crate) pass: bool,
}

/// `run` on an empty database, then, with `--grown`, on a copy of the grown one, each announced;
/// with both, the side-by-side table of `labels` (the rate's, p50's and p99's names). Returns
/// each run's figures.
pub(crate) async fn empty_then_grown(
    grown: Option<&str>,
    labels: [&str; 3],
    mut run: impl AsyncFnMut(Option<&str>) -> anyhow::Result<Figures>,
) -> anyhow::Result<Vec<Figures>> {
    let mut runs = Vec::new();
    for template in [None].into_iter().chain(grown.map(Some)) {
        if grown.is_some() {
            println!("\n== on {}", template.map_or("an empty database".to_owned(), |g| format!("a copy of {g}")));
        }
        runs.push(run(template).await?);
    }
    if let [empty, grown] = &runs[..] {
        print_side_by_side(&[
            (labels[0], empty.rate, grown.rate, true),
            (labels[1], empty.p50_ms, grown.p50_ms, false),
            (labels[2], empty.p99_ms, grown.p99_ms, false),
        ]);
    }
    Ok(runs)
}

/// `measure(database URL, key prefix)` on the scratch database `name` (a copy of `template` when
/// given) under a fresh Redis key prefix `stem-…`; the database and the keys are removed after,
/// however the measurement ended.
pub(crate) async fn on_scratch<T>(
    pg: &str,
    name: &str,
    template: Option<&str>,
    redis: &str,
    stem: &str,
    measure: impl AsyncFnOnce(&str, &str) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let (admin, db_url) = scratch_database_from(pg, name, template).await?;
    let prefix = format!("{stem}-{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
    let result = measure(&db_url, &prefix).await;
    let cleaned = delete_redis_prefix(redis, &prefix).await;
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    let out = result?;
    match cleaned {
        Ok(n) => println!("cleanup: deleted {n} Redis keys under {prefix}:*, dropped database {name}"),
        Err(e) => eprintln!("cleanup: could not delete the Redis keys under {prefix}:*: {e:#}"),
    }
    Ok(out)
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

/// The grown-vs-empty table of a bench run on both (`--grown`): each figure on the empty and
/// on the grown database, their ratio, and whether it is within the 1.2× the scale goal allows
/// (a rate: grown at least empty / 1.2; a time: grown at most empty × 1.2). Rows are
/// (figure, empty, grown, higher is better).
#[allow(clippy::float_arithmetic)]
fn print_side_by_side(rows: &[(&str, f64, f64, bool)]) {
    println!("\n| figure | empty | grown | grown / empty | within 1.2x |");
    println!("|---|---:|---:|---:|---|");
    for &(name, empty, grown, higher_better) in rows {
        let ratio = grown / empty;
        let ok = if higher_better { ratio * GROWN_WITHIN >= 1.0 } else { ratio <= GROWN_WITHIN };
        println!("| {name} | {empty:.0} | {grown:.0} | {ratio:.2} | {} |", if ok { "yes" } else { "NO" });
    }
}

/// The scale goal: a figure on the grown database within this factor of the empty one's.
pub(crate) const GROWN_WITHIN: f64 = 1.2;

/// The API on its own runtime in its own thread (two workers, as the `api` binary has on this
/// machine), so that a load generator's tasks never share run queues with the server's. `setup`
/// runs on the server's state before it listens (a bench's merchant and key); its result is
/// `setup`.
pub(crate) struct ApiThread<T> {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) setup: T,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<anyhow::Result<()>>,
}

impl<T: Send + 'static> ApiThread<T> {
    pub(crate) async fn start<F, Fut>(config: Config, setup: F) -> anyhow::Result<Self>
    where
        F: FnOnce(api::state::HttpState) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = anyhow::Result<T>> + Send,
    {
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            rt.block_on(async move {
                let state = api::bootstrap(config).await?;
                let made = setup(state.clone()).await?;
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let _ = ready_tx.send((listener.local_addr()?, made));
                api::app::serve(listener, state, async {
                    let _ = stop_rx.await;
                })
                .await?;
                Ok(())
            })
        });
        match ready_rx.await {
            Ok((addr, setup)) => Ok(ApiThread { addr, setup, stop: stop_tx, thread }),
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e.context("the API did not start")),
                _ => bail!("the API did not start"),
            },
        }
    }

    /// Stops the server and waits for its thread.
    pub(crate) fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.thread.join().map_err(|_| anyhow::anyhow!("API thread panicked"))?
    }
}
