//! `ops bench-reads`: the same read requests against an empty database and against one grown by
//! `ops bench-seed` (a merchant a year in), in one run: requests a second and p50/p99 of each on
//! both, the grown/empty p99 ratio against the goal (a request costs the same then as on day one:
//! ≤ 1.2×), then `EXPLAIN (ANALYZE, BUFFERS)` of each list's SQL on the grown database.
//!
//! The "empty" database, day one, is made fresh by the same seed at `DAY_ONE_INVOICES` (5,000
//! invoices over 100 merchants: the small merchant holds about 25), just enough that every page
//! measured is full on both sides (a day-one page of 3 rows would measure the page, not the
//! database's size), with the same schema, keys and row shapes. The cursor page is taken at
//! `DEPTH` or, when the merchant holds fewer rows, at half of them, so it is full too; only the
//! `offset=100000` page is empty on day one (that request's cost on day one). The API runs in this process on its own runtime (`bench::ApiThread`), rate limits
//! off; the load is `--concurrency` keep-alive HTTP/1.1 connections over raw hyper, one request
//! kind at a time, `--warmup` then `--seconds` each.
//!
//! The SQL explained is each list's own query, rebuilt from the domain's pieces: the caller's
//! rows (`Principal::rows`), the resource's list filter (`Filter::apply`), then what
//! `domain::db::newest_first` adds: the total's statements (`owned::total_parts`: the list
//! counters' sum, and rows counted where the counters do not hold the filter), and the page
//! ordered by `created_at DESC, id DESC` with `LIMIT`/`OFFSET` or the row-value cursor, printed
//! with its values inlined.
//! Floats here are measurements (rates, milliseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use api::auth::Permissions;
use clap::Args;
use domain::config::Config;
use domain::keys::Principal;
use domain::owned::{self, Filter, Owned, TotalPart};
use entity::{event, invoice, ledger_entry, payout, webhook_delivery};
use sea_orm::sea_query::{Expr, ExprTrait, PostgresQueryBuilder, SelectStatement};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Select, Statement,
};
use uuid::Uuid;

use crate::bench::{ApiThread, HttpResult, Samples};
use crate::bench_seed::{self, SEED_ENV, SeedInfo};

#[derive(Args, Debug)]
pub struct BenchReadsArgs {
    /// Server URL of PostgreSQL (without database).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// The grown database, made by `ops bench-seed` (read only here, apart from the API's own
    /// start-up).
    #[arg(long, default_value = "paygate_grown")]
    grown: String,
    /// The empty database (dropped and recreated, then dropped at the end).
    #[arg(long, default_value = "paygate_bench_reads_empty")]
    empty: String,
    /// Measured seconds of each request kind on each database.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Unmeasured seconds before each measurement.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Concurrent HTTP connections.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Exit non-zero unless every request kind meets the goal (grown p99 ≤ 1.2 × empty p99).
    #[arg(long)]
    check: bool,
    /// Explain with `enable_seqscan = off`: on a small database, where a sequential scan is the
    /// cheaper plan, the plans then show which index each list query can use (the smoke test).
    #[arg(long)]
    plans_without_seqscan: bool,
}

/// The goal: a request's p99 on the grown database at most this many times its p99 on the empty one.
const GOAL_RATIO: f64 = crate::bench::GROWN_WITHIN;
/// The deep page: this many rows skipped (or the row just before them, by cursor).
const DEPTH: u64 = 100_000;
/// The day-one database's invoices: every measured page full (module doc).
const DAY_ONE_INVOICES: u64 = 5_000;
/// The ledger read (the gate with most entries in the seed).
const LEDGER_GATE: &str = "tron_usdt";

/// What a request reads, for its EXPLAIN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListQuery {
    Invoices,
    InvoicesPaid,
    InvoicesBtc,
    InvoicesExternalId,
    InvoicesOffset,
    InvoicesCursor,
    Ledger,
    Events,
    Deliveries,
    Payouts,
    InvoicesSmall,
}

/// One request kind: a fixed path, or one of several (random invoice ids).
struct Kind {
    name: &'static str,
    paths: Vec<String>,
    /// The small merchant's key instead of the big one's.
    small: bool,
    list: Option<ListQuery>,
    /// POSTed as JSON (a write: invoice creation) instead of a GET.
    body: Option<&'static str>,
}

/// The values a database's requests need, read from it.
struct Targets {
    info: SeedInfo,
    invoice_ids: Vec<Uuid>,
    external_id: String,
    /// The id of the invoice just before the deep page (newest first), and the offset used.
    cursor: Uuid,
    created_after: String,
    created_before: String,
    /// A test key of the big merchant: invoices are created in the test environment, on the
    /// sandbox chain (the live gates need the operator's deposit keys). Same tables and indexes.
    big_test_key: String,
}

/// One request kind on one database, over its legs.
#[derive(Default)]
struct Measured {
    samples: Samples,
    /// Non-2xx answers by status (0: transport error), measured window and warm-up alike.
    bad: BTreeMap<u16, u64>,
    first_bad: Option<String>,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        self.samples.merge(other.samples);
        for (k, v) in other.bad {
            *self.bad.entry(k).or_default() += v;
        }
        self.first_bad = self.first_bad.take().or(other.first_bad);
    }
}

/// A request kind's figures on both databases.
struct Row {
    name: &'static str,
    empty: HttpResult,
    grown: HttpResult,
    bad: u64,
    /// What the non-2xx answers were, per database.
    bad_detail: Vec<String>,
}

pub async fn run(args: BenchReadsArgs) -> anyhow::Result<()> {
    if !(args.empty.starts_with("paygate_grown") || args.empty.starts_with("paygate_bench_")) {
        bail!("--empty must start with paygate_bench_ (it is dropped first)");
    }
    let grown_url = bench_seed::db_url(&args.pg, &args.grown);
    let grown_db = sea_orm::Database::connect(&grown_url).await.context("connecting to the grown database")?;
    let grown_targets = targets(&grown_db).await?;
    let grown_invoices = bench_seed::count(&grown_db, "SELECT count(*) FROM invoices").await?;
    let grown_size = bench_seed::count(&grown_db, "SELECT pg_database_size(current_database())").await?;

    println!("making the empty database {} (the seed at {DAY_ONE_INVOICES} invoices)", args.empty);
    bench_seed::seed(&args.pg, &args.empty, DAY_ONE_INVOICES, false).await?;
    let empty_url = bench_seed::db_url(&args.pg, &args.empty);
    let empty_db = sea_orm::Database::connect(&empty_url).await?;
    let empty_targets = targets(&empty_db).await?;
    let empty_invoices = bench_seed::count(&empty_db, "SELECT count(*) FROM invoices").await?;

    println!(
        "grown: {} ({grown_invoices} invoices, {:.2} GB); empty: {} ({empty_invoices} invoices); {} connections, {} s each (+{} s warm-up)",
        args.grown,
        grown_size as f64 / 1e9,
        args.empty,
        args.concurrency,
        args.seconds,
        args.warmup
    );
    let rows = measure_all(&args, (&empty_url, &empty_targets), (&grown_url, &grown_targets)).await?;

    println!();
    println!(
        "| request | empty req/s | empty p50 ms | empty p99 ms | grown req/s | grown p50 ms | grown p99 ms | grown/empty p99 | goal ≤ {GOAL_RATIO}× | non-2xx |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let mut all_pass = true;
    let mut all_2xx = true;
    for r in &rows {
        let (e, g) = (&r.empty, &r.grown);
        let ratio = g.p99_ms / e.p99_ms;
        let pass = ratio <= GOAL_RATIO;
        all_pass &= pass;
        all_2xx &= r.bad == 0 && e.requests > 0 && g.requests > 0;
        println!(
            "| `{}` | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {ratio:.2}× | {} | {} |",
            r.name,
            e.rps(),
            e.p50_ms,
            e.p99_ms,
            g.rps(),
            g.p50_ms,
            g.p99_ms,
            if pass { "PASS" } else { "FAIL" },
            r.bad
        );
    }
    for r in &rows {
        for d in &r.bad_detail {
            println!("`{}`: {d}", r.name);
        }
    }

    println!();
    println!(
        "EXPLAIN (ANALYZE, BUFFERS) on {} (the big merchant's lists){}:",
        args.grown,
        if args.plans_without_seqscan { ", enable_seqscan = off" } else { "" }
    );
    let kinds = kinds(&grown_targets);
    let mut every_plan_indexed = true;
    for k in &kinds {
        let Some(list) = k.list else { continue };
        let who = principal(if k.small { grown_targets.info.small_merchant } else { grown_targets.info.big_merchant });
        for (part, sql) in list_sql(list, &who, &grown_targets, &grown_db).await? {
            let plan = explain(&grown_db, &sql, args.plans_without_seqscan).await?;
            let access = access_paths(&plan);
            let indexed = access.iter().any(|a| a.contains("Index"));
            let seq = access.iter().any(|a| a.starts_with("Seq Scan"));
            every_plan_indexed &= indexed;
            println!();
            println!(
                "-- {} [{part}]: {}{}",
                k.name,
                if indexed { "uses an index" } else { "NO INDEX" },
                if seq { " (and a Seq Scan)" } else { "" }
            );
            println!("{sql};");
            for l in &plan {
                println!("    {l}");
            }
        }
    }
    println!();
    println!(
        "bench-reads: all 2xx: {}; every list plan uses an index: {}; goal ≤ {GOAL_RATIO}× p99: {}",
        yes(all_2xx),
        yes(every_plan_indexed),
        if all_pass { "PASS" } else { "FAIL" }
    );
    drop(empty_db);
    let admin = admin(&args.pg).await?;
    admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", args.empty)).await?;
    if !all_2xx {
        bail!("some requests were answered with a non-2xx status");
    }
    if args.check && !all_pass {
        bail!("grown/empty p99 goal not met");
    }
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

async fn admin(pg: &str) -> anyhow::Result<DatabaseConnection> {
    Ok(sea_orm::Database::connect(format!("{}/postgres", pg.trim_end_matches('/'))).await?)
}

/// A principal as the API builds it for a key of `merchant`'s (the seeded environment).
fn principal(merchant: Uuid) -> Principal {
    Principal {
        key_id: Uuid::nil().into(),
        merchant_id: merchant.into(),
        environment: SEED_ENV,
        permissions: Permissions::all(),
        user_id: None,
    }
}

async fn one_string(db: &DatabaseConnection, sql: &str, values: Vec<sea_orm::Value>) -> anyhow::Result<Option<String>> {
    let row = db.query_one_raw(Statement::from_sql_and_values(sea_orm::DatabaseBackend::Postgres, sql, values)).await?;
    Ok(match row {
        Some(r) => Some(r.try_get_by_index::<String>(0)?),
        None => None,
    })
}

async fn targets(db: &DatabaseConnection) -> anyhow::Result<Targets> {
    let info = bench_seed::read_info(db).await?;
    let env = SEED_ENV.as_str();
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            sea_orm::DatabaseBackend::Postgres,
            "SELECT id::text FROM invoices WHERE merchant_id = $1 AND environment = $2 ORDER BY random() LIMIT 2000",
            [info.big_merchant.into(), env.into()],
        ))
        .await?;
    let invoice_ids =
        rows.iter().map(|r| Ok(r.try_get_by_index::<String>(0)?.parse()?)).collect::<anyhow::Result<Vec<Uuid>>>()?;
    if invoice_ids.is_empty() {
        bail!("the big merchant has no invoices");
    }
    let mine = bench_seed::count(
        db,
        &format!("SELECT count(*) FROM invoices WHERE merchant_id = '{}' AND environment = '{env}'", info.big_merchant),
    )
    .await?;
    let at = |offset: u64| {
        format!(
            "SELECT {{}} FROM invoices WHERE merchant_id = $1 AND environment = $2 ORDER BY created_at DESC, id DESC OFFSET {offset} LIMIT 1"
        )
    };
    let by = |offset: u64, col: &str| at(offset).replace("{}", col);
    let external_id = one_string(db, &by(mine / 2, "external_id"), vec![info.big_merchant.into(), env.into()])
        .await?
        .context("an external_id")?;
    let cursor =
        one_string(db, &by(Ord::clamp(mine / 2, 1, DEPTH) - 1, "id::text"), vec![info.big_merchant.into(), env.into()])
            .await?
            .context("the cursor row")?
            .parse()?;
    let (_, big_test_key) = domain::merchants::create_api_key(
        db,
        info.big_merchant.into(),
        entity::Environment::Test,
        Permissions::all(),
        Some("bench-reads writes"),
    )
    .await?;
    let now = chrono::Utc::now();
    let fmt = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    Ok(Targets {
        info,
        invoice_ids,
        external_id,
        cursor,
        created_after: fmt(now - chrono::Duration::days(30)),
        created_before: fmt(now),
        big_test_key,
    })
}

fn kinds(t: &Targets) -> Vec<Kind> {
    let list = |name: &'static str, path: String, list: ListQuery| Kind {
        name,
        paths: vec![path],
        small: false,
        list: Some(list),
        body: None,
    };
    vec![
        Kind {
            name: "GET /v1/invoices/{id}",
            paths: t.invoice_ids.iter().map(|id| format!("/v1/invoices/{id}")).collect(),
            small: false,
            list: None,
            body: None,
        },
        // Writes cost the same too: each new invoice goes into the invoices' indexes (and the
        // list counters) however many rows they already hold. In the big merchant's test
        // environment (`Targets::big_test_key`).
        Kind {
            name: "POST /v1/invoices",
            paths: vec!["/v1/invoices".into()],
            small: false,
            list: None,
            body: Some(r#"{"currency": "BTC", "amount": "0.001"}"#),
        },
        list("GET /v1/invoices?limit=20", "/v1/invoices?limit=20".into(), ListQuery::Invoices),
        list(
            "GET /v1/invoices?limit=20&status=paid",
            "/v1/invoices?limit=20&status=paid".into(),
            ListQuery::InvoicesPaid,
        ),
        list(
            "GET /v1/invoices?limit=20&currency=BTC",
            "/v1/invoices?limit=20&currency=BTC".into(),
            ListQuery::InvoicesBtc,
        ),
        list(
            "GET /v1/invoices?limit=20&external_id=…",
            format!("/v1/invoices?limit=20&external_id={}", t.external_id),
            ListQuery::InvoicesExternalId,
        ),
        list(
            "GET /v1/invoices?limit=20&offset=100000",
            format!("/v1/invoices?limit=20&offset={DEPTH}"),
            ListQuery::InvoicesOffset,
        ),
        list(
            "GET /v1/invoices?limit=20&starting_after=… (same page)",
            format!("/v1/invoices?limit=20&starting_after={}", t.cursor),
            ListQuery::InvoicesCursor,
        ),
        list(
            "GET /v1/balances/tron_usdt/ledger?limit=20",
            format!("/v1/balances/{LEDGER_GATE}/ledger?limit=20"),
            ListQuery::Ledger,
        ),
        list(
            "GET /v1/events?type=invoice.paid&created_after=…&created_before=… (30 days)",
            format!(
                "/v1/events?limit=20&type=invoice.paid&created_after={}&created_before={}",
                t.created_after, t.created_before
            ),
            ListQuery::Events,
        ),
        list("GET /v1/webhook_deliveries?limit=20", "/v1/webhook_deliveries?limit=20".into(), ListQuery::Deliveries),
        list("GET /v1/payouts?limit=20", "/v1/payouts?limit=20".into(), ListQuery::Payouts),
        Kind {
            name: "GET /v1/invoices?limit=20 (a small merchant)",
            paths: vec!["/v1/invoices?limit=20".into()],
            small: true,
            list: Some(ListQuery::InvoicesSmall),
            body: None,
        },
    ]
}

/// Each request kind on both databases, empty, grown, grown, empty (`--seconds` each), so that
/// a drift of the shared machine over the run weighs on both sides alike.
async fn measure_all(
    args: &BenchReadsArgs,
    (empty_url, empty_t): (&str, &Targets),
    (grown_url, grown_t): (&str, &Targets),
) -> anyhow::Result<Vec<Row>> {
    let config = |url: &str| {
        let mut config = Config { database_url: url.to_owned(), ..Config::default() };
        config.db.max_connections = 16;
        config.embedded.seed_demo = false;
        config.rate_limits.enabled = false;
        config
    };
    let empty_api = ApiThread::start(config(empty_url), |_| async { Ok(()) }).await?;
    let grown_api = ApiThread::start(config(grown_url), |_| async { Ok(()) }).await?;
    let mut rows = Vec::new();
    for (ke, kg) in kinds(empty_t).into_iter().zip(kinds(grown_t)) {
        let (mut e, mut g) = (Measured::default(), Measured::default());
        for grown in [false, true, true, false] {
            let (api, t, k) = if grown { (&grown_api, grown_t, &kg) } else { (&empty_api, empty_t, &ke) };
            let key = match (k.small, k.body) {
                (true, _) => &t.info.small_key,
                (false, Some(_)) => &t.big_test_key,
                (false, None) => &t.info.big_key,
            };
            let m = load(args, api.addr, key, &k.paths, k.body).await?;
            if grown { g.merge(m) } else { e.merge(m) }
        }
        let detail = |label: &str, m: &Measured| {
            (!m.bad.is_empty())
                .then(|| format!("{label}: non-2xx {:?}; first: {}", m.bad, m.first_bad.as_deref().unwrap_or("-")))
        };
        let bad_detail: Vec<String> = [detail("empty", &e), detail("grown", &g)].into_iter().flatten().collect();
        let bad = e.bad.values().sum::<u64>() + g.bad.values().sum::<u64>();
        let row = Row { name: ke.name, empty: e.samples.summary(), grown: g.samples.summary(), bad, bad_detail };
        eprintln!(
            "  {:<58} empty {:>6.0} req/s p50 {:>6.2} p99 {:>6.2} ms | grown {:>6.0} req/s p50 {:>6.2} p99 {:>6.2} ms{}",
            row.name,
            row.empty.rps(),
            row.empty.p50_ms,
            row.empty.p99_ms,
            row.grown.rps(),
            row.grown.p50_ms,
            row.grown.p99_ms,
            if bad > 0 { format!("  non-2xx {bad}") } else { String::new() }
        );
        rows.push(row);
    }
    empty_api.stop()?;
    grown_api.stop()?;
    Ok(rows)
}

/// `args.concurrency` connections sending GET `paths` (a random one each time) with `key`, or
/// POST with `body`.
async fn load(
    args: &BenchReadsArgs,
    addr: std::net::SocketAddr,
    key: &str,
    paths: &[String],
    body: Option<&'static str>,
) -> anyhow::Result<Measured> {
    let paths: Arc<Vec<String>> = Arc::new(paths.to_vec());
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(Mutex::new((BTreeMap::<u16, u64>::new(), None::<String>)));
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let (key, paths, measuring, stop, errors, bad) =
            (key.to_owned(), paths.clone(), measuring.clone(), stop.clone(), errors.clone(), bad.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(16_384);
            while !stop.load(Ordering::Relaxed) {
                // An HTTP/1 connection takes its next request only once it has finished the last
                // one (its task sees the body read to the end): sending before that is refused
                // on the client's side ("connection was not ready"), which is no answer of the
                // server's. A connection that cannot take one any more was closed: counted as a
                // transport error, and this connection's load ends.
                if let Err(e) = sender.ready().await {
                    if let Ok(mut b) = bad.lock() {
                        *b.0.entry(0).or_default() += 1;
                        b.1.get_or_insert_with(|| format!("(connection) -> 0 closed: {e}"));
                    }
                    break;
                }
                let path = if paths.len() == 1 { &paths[0] } else { &paths[rand::random_range(0..paths.len())] };
                let req = match body {
                    None => hyper::Request::get(path.as_str()),
                    Some(_) => hyper::Request::post(path.as_str()).header("content-type", "application/json"),
                }
                .header("host", addr.to_string())
                .header("x-api-key", &key)
                .body(http_body_util::Full::new(bytes::Bytes::from_static(body.unwrap_or("").as_bytes())));
                let t = Instant::now();
                let (ok, status, body) = match req {
                    Ok(req) => match sender.send_request(req).await {
                        Ok(resp) => {
                            let status = resp.status().as_u16();
                            match http_body_util::BodyExt::collect(resp.into_body()).await {
                                Ok(b) => ((200..300).contains(&status), status, b.to_bytes()),
                                Err(_) => (false, status, bytes::Bytes::new()),
                            }
                        }
                        Err(e) => (false, 0, bytes::Bytes::from(format!("transport error: {e}"))),
                    },
                    Err(e) => (false, 0, bytes::Bytes::from(format!("bad request: {e}"))),
                };
                if ok {
                    if measuring.load(Ordering::Relaxed) {
                        lat.push(t.elapsed().as_micros() as u32);
                    }
                } else {
                    if measuring.load(Ordering::Relaxed) {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Ok(mut b) = bad.lock() {
                        *b.0.entry(status).or_default() += 1;
                        if b.1.is_none() {
                            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
                            b.1 = Some(format!("{path} -> {status} {text}"));
                        }
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
    let samples = Samples { lat: all, errors: errors.load(Ordering::Relaxed), elapsed };
    let (bad, first_bad) = std::mem::take(&mut *bad.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    Ok(Measured { samples, bad, first_bad })
}

/// The statements of `list` for `who` as the API runs them: its total (`owned::total_parts`:
/// the list counters, and rows counted where they do not hold the filter), then the page
/// (`newest_first`).
async fn list_sql(
    list: ListQuery,
    who: &Principal,
    t: &Targets,
    db: &DatabaseConnection,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    use domain::invoices::service::ListFilter as InvoiceFilter;
    let ic = (invoice::Column::CreatedAt, invoice::Column::Id);
    let invoices = |f: InvoiceFilter, at: Page| {
        let mut out = totals(who, &f);
        out.push(page_of(f.apply(who.rows::<invoice::Entity>()), ic, 20, at));
        out
    };
    Ok(match list {
        ListQuery::Invoices | ListQuery::InvoicesSmall => invoices(InvoiceFilter::default(), Page::Offset(0)),
        ListQuery::InvoicesExternalId => {
            invoices(InvoiceFilter { external_id: Some(t.external_id.clone()), ..Default::default() }, Page::Offset(0))
        }
        ListQuery::InvoicesPaid => {
            invoices(InvoiceFilter { status: Some(entity::InvoiceStatus::Paid), ..Default::default() }, Page::Offset(0))
        }
        ListQuery::InvoicesBtc => {
            invoices(InvoiceFilter { currency: Some("BTC".into()), ..Default::default() }, Page::Offset(0))
        }
        ListQuery::InvoicesOffset => invoices(InvoiceFilter::default(), Page::Offset(DEPTH)),
        ListQuery::InvoicesCursor => {
            // The cursor's own row first (`owned::cursor`), then the total and the page after it.
            let row = who.rows::<invoice::Entity>().filter(invoice::Column::Id.eq(t.cursor)).one(db).await?;
            let row = row.context("the cursor row")?;
            let mut out =
                vec![("cursor row", sql_of(who.rows::<invoice::Entity>().filter(invoice::Column::Id.eq(t.cursor))))];
            out.extend(invoices(InvoiceFilter::default(), Page::After(row.created_at.into(), row.id)));
            out
        }
        ListQuery::Ledger => {
            let gate = domain::gates::find(LEDGER_GATE).context("ledger gate")?;
            let q = ledger_entry::Entity::find()
                .filter(ledger_entry::Column::MerchantId.eq(who.merchant_id))
                .filter(ledger_entry::Column::Environment.eq(who.environment))
                .filter(ledger_entry::Column::GateId.eq(gate.id));
            let tally = domain::ledger::tally(gate.id, None);
            let days = domain::list_counts::Days::Whole;
            let total = domain::list_counts::statement(who, tally.list, &tally.key, days);
            vec![
                ("count: counters", total.to_string(PostgresQueryBuilder)),
                page_of(q, (ledger_entry::Column::CreatedAt, ledger_entry::Column::Id), 20, Page::Offset(0)),
            ]
        }
        ListQuery::Events => {
            let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).map(|t| t.to_utc());
            let f = domain::events::query::ListFilter {
                event_type: Some("invoice.paid"),
                created_after: Some(parse(&t.created_after)?),
                created_before: Some(parse(&t.created_before)?),
                invoice_id: None,
                payout_id: None,
            };
            let mut out = totals(who, &f);
            let cols = (event::Column::CreatedAt, event::Column::Id);
            out.push(page_of(f.apply(who.rows::<event::Entity>()), cols, 20, Page::Offset(0)));
            out
        }
        ListQuery::Deliveries => {
            let f = domain::webhooks::deliveries::DeliveryFilter::default();
            let mut out = totals(who, &f);
            let cols = (webhook_delivery::Column::CreatedAt, webhook_delivery::Column::Id);
            out.push(page_of(f.apply(who.rows::<webhook_delivery::Entity>()), cols, 20, Page::Offset(0)));
            out
        }
        ListQuery::Payouts => {
            let f = domain::payouts::service::ListFilter { status: None };
            let mut out = totals(who, &f);
            let cols = (payout::Column::CreatedAt, payout::Column::Id);
            out.push(page_of(f.apply(who.rows::<payout::Entity>()), cols, 20, Page::Offset(0)));
            out
        }
    })
}

enum Page {
    Offset(u64),
    After(sea_orm::Value, Uuid),
}

/// The statements of a list's total (`owned::total_parts`).
fn totals<E: Owned>(who: &Principal, f: &impl Filter<E>) -> Vec<(&'static str, String)> {
    owned::total_parts(who, f)
        .into_iter()
        .map(|part| match part {
            TotalPart::Counters(s) => ("count: counters", s.to_string(PostgresQueryBuilder)),
            TotalPart::Rows(q) => (
                "count: rows",
                SelectStatement::new()
                    .expr(Expr::cust("COUNT(*) AS num_items"))
                    .from_subquery(q.into_query().clear_order_by().to_owned(), "sub_query")
                    .to_owned()
                    .to_string(PostgresQueryBuilder),
            ),
        })
        .collect()
}

/// The page statement `domain::db::newest_first` runs for `q`.
fn page_of<E: EntityTrait>(
    q: Select<E>,
    (created, id): (E::Column, E::Column),
    limit: u64,
    at: Page,
) -> (&'static str, String) {
    let page = match at {
        Page::Offset(offset) => q.order_by_desc(created).order_by_desc(id).limit(limit).offset(offset),
        Page::After(c, i) => q
            .filter(Expr::tuple([Expr::col(created), Expr::col(id)]).lt(Expr::tuple([Expr::val(c), Expr::val(i)])))
            .order_by_desc(created)
            .order_by_desc(id)
            .limit(limit + 1)
            .offset(0),
    };
    ("page", sql_of(page))
}

fn sql_of<E: EntityTrait>(q: Select<E>) -> String {
    q.into_query().to_string(PostgresQueryBuilder)
}

async fn explain(db: &DatabaseConnection, sql: &str, without_seqscan: bool) -> anyhow::Result<Vec<String>> {
    use sea_orm::TransactionTrait;
    let txn = db.begin().await?;
    if without_seqscan {
        txn.execute_unprepared("SET LOCAL enable_seqscan = off").await?;
    }
    let rows = txn
        .query_all_raw(Statement::from_string(
            sea_orm::DatabaseBackend::Postgres,
            format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"),
        ))
        .await
        .with_context(|| format!("EXPLAIN {sql}"))?;
    txn.rollback().await?;
    rows.iter().map(|r| Ok(r.try_get_by_index::<String>(0)?)).collect()
}

/// The plan's access paths: "Index Only Scan using … on …", "Seq Scan on …", ….
fn access_paths(plan: &[String]) -> Vec<String> {
    plan.iter()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("->").trim_start();
            let scan = [
                "Index Only Scan",
                "Index Scan Backward",
                "Index Scan",
                "Bitmap Index Scan",
                "Seq Scan",
                "Parallel Seq Scan",
                "Parallel Index",
            ]
            .iter()
            .any(|s| l.starts_with(s));
            scan.then(|| l.split("  (").next().unwrap_or(l).to_owned())
        })
        .collect()
}
