//! `ops bench-seed`: a PostgreSQL database grown to a merchant's first year (N invoices across
//! 100 merchants, one of them holding half), filled with set-based SQL (`INSERT … SELECT` over
//! `generate_series` and over the rows already written, about a million rows a statement), for
//! `ops bench-reads` to compare reads on it with reads on an empty database.
//!
//! What it writes, for `--invoices N` (created_at spread evenly over the last 365 days):
//! - `invoices`: N; status mix 78 % paid, 1 % overpaid, 1 % underpaid, 19 % expired, 1 %
//!   cancelled, the newest 1 % mostly still pending or confirming; 12 gate slots (bitcoin ×2,
//!   tron_usdt ×3, ethereum_usdt ×2, ethereum, solana, bsc_usdt, polygon_usdc, xrp); one in 29
//!   in the test environment, the rest live.
//! - `payments`: one per invoice that received money (paid, overpaid, underpaid, confirming:
//!   about 0.8 N), with its `invoice_credits` row when credited.
//! - `payouts`: N / 5, same merchant split.
//! - `ledger_entries`: 4 per credited payment (pending in, pending out, available in, sweep fee)
//!   and 4 per finished payout (reserve out of available, into reserved, debit and fee, or the
//!   release of a failed one): about 4 N. `balance_after` is a plausible positive figure, not a
//!   running sum (no read checks it); `balances` holds each (merchant, environment, gate)'s sums.
//! - `events`: 5 per invoice (invoice.sent, invoice.confirming, the invoice's final-status event
//!   such as invoice.paid, balance.credited, invoice.late_deposit: a synthetic mix with the
//!   realistic share of invoice.paid), 5 N.
//! - `webhook_endpoints`: one per merchant and environment; `webhook_deliveries`: one per
//!   dispatched event (5 N, less the newest 0.1 % still undispatched); `webhook_attempts`: 1 per
//!   delivery, 2-3 for 5 %, 10 for the 0.5 % dead (about 1.1 per delivery); their response
//!   excerpts cleared after 90 days, as retention (`[retention]`) does.
//!
//! Each table's secondary indexes (those that back no constraint) are dropped before its load and
//! rebuilt from their own definitions after it (checked: the same definitions come back), foreign
//! keys are not checked during the load (`session_replication_role = replica`: every referenced
//! row is written first, from the rows it references; nor do the list counters' triggers fire:
//! the rows are counted into `list_counts` once at the end). The database is `VACUUM ANALYZE`d at the
//! end, as autovacuum would have done to a year-old database. The big and one small merchant's
//! live API keys (all permissions) are kept in the table `bench_seed_info` for `bench-reads`.
//!
//! Floats here are measurements (seconds, sizes), never money: amounts are NUMERIC computed in SQL.
#![allow(clippy::float_arithmetic)]

use std::time::Instant;

use anyhow::{Context, bail};
use api::auth::Permissions;
use clap::Args;
use entity::Environment;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use uuid::Uuid;

use crate::bench::scratch_database;

#[derive(Args, Debug)]
pub struct BenchSeedArgs {
    /// Server URL of PostgreSQL (without database).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pg: String,
    /// The database to create (dropped first if it exists). Use a `paygate_grown` or
    /// `paygate_bench_` name.
    #[arg(long, default_value = "paygate_grown")]
    database: String,
    /// Invoices to write; every other table scales with it.
    #[arg(long, default_value_t = 1_000_000)]
    invoices: u64,
}

/// The merchants of a seeded database.
pub(crate) const MERCHANTS: usize = 100;
/// Rows a statement writes, about.
const CHUNK_ROWS: u64 = 1_000_000;
/// The environment of the seeded keys (most seeded rows are live).
pub(crate) const SEED_ENV: Environment = Environment::Live;

/// Gates: (id, asset, network, address family, confirmations, USD price, quote decimals).
const GATES: &[(&str, &str, &str, &str, u32, &str, u32)] = &[
    ("bitcoin", "BTC", "bitcoin", "bitcoin", 3, "95000", 8),
    ("tron_usdt", "USDT", "tron", "tron", 19, "1", 2),
    ("ethereum_usdt", "USDT", "ethereum", "evm", 12, "1", 2),
    ("ethereum", "ETH", "ethereum", "evm", 12, "3500", 6),
    ("solana", "SOL", "solana", "solana", 1, "200", 4),
    ("bsc_usdt", "USDT", "bsc", "evm", 15, "1", 2),
    ("polygon_usdc", "USDC", "polygon", "evm", 128, "1", 2),
    ("xrp", "XRP", "xrp", "xrp", 1, "2.3", 2),
];
/// The gate of each of the 12 slots an invoice or payout falls in (indexes into `GATES`).
const GATE_SLOTS: &[usize] = &[0, 0, 1, 1, 1, 2, 2, 3, 4, 5, 6, 7];

/// What `bench-reads` needs from a seeded database (also in its table `bench_seed_info`).
#[derive(Debug, Clone)]
pub(crate) struct SeedInfo {
    pub big_merchant: Uuid,
    pub big_key: String,
    pub small_merchant: Uuid,
    pub small_key: String,
    pub invoices: u64,
}

/// One table's load: seconds inserting, seconds rebuilding its indexes.
pub(crate) struct Load {
    table: &'static str,
    insert_secs: f64,
    index_secs: f64,
}

pub async fn run(args: BenchSeedArgs) -> anyhow::Result<()> {
    if !(args.database.starts_with("paygate_grown") || args.database.starts_with("paygate_bench_")) {
        bail!("--database must start with paygate_grown or paygate_bench_ (it is dropped first)");
    }
    let started = Instant::now();
    let (info, loads) = seed(&args.pg, &args.database, args.invoices, true).await?;
    let total = started.elapsed().as_secs_f64();
    let db = sea_orm::Database::connect(db_url(&args.pg, &args.database)).await?;
    println!();
    println!(
        "{:<22} {:>12} {:>10} {:>10} {:>12} {:>12}",
        "table", "rows", "insert s", "index s", "size MB", "bytes/row"
    );
    let mut tables: Vec<&str> = loads.iter().map(|l| l.table).collect();
    for t in ["merchants", "api_keys", "invoice_credits", "balances", "webhook_endpoints"] {
        if !tables.contains(&t) {
            tables.push(t);
        }
    }
    for t in tables {
        let rows = count(&db, &format!("SELECT count(*) FROM {t}")).await?;
        let size = count(&db, &format!("SELECT pg_total_relation_size('{t}')")).await?;
        let (ins, idx) = loads.iter().find(|l| l.table == t).map_or((0.0, 0.0), |l| (l.insert_secs, l.index_secs));
        let per_row = size.checked_div(rows).unwrap_or(0);
        println!("{t:<22} {rows:>12} {ins:>10.1} {idx:>10.1} {:>12.1} {per_row:>12}", size as f64 / 1e6);
    }
    let db_size = count(&db, "SELECT pg_database_size(current_database())").await?;
    println!();
    println!("database {}: {:.2} GB in all", args.database, db_size as f64 / 1e9);
    println!(
        "disk per million invoices: {:.2} GB",
        db_size as f64 / 1e9 / (args.invoices as f64 / 1e6).max(f64::MIN_POSITIVE)
    );
    println!(
        "seeded in {total:.0} s; big merchant {} ({} invoices), small merchant {}",
        info.big_merchant,
        info.invoices / 2,
        info.small_merchant
    );
    println!("keys and ids are in the table bench_seed_info; next: ops bench-reads --grown {}", args.database);
    Ok(())
}

pub(crate) fn db_url(pg: &str, name: &str) -> String {
    format!("{}/{name}?sslmode=disable", pg.trim_end_matches('/'))
}

pub(crate) async fn count(db: &impl ConnectionTrait, sql: &str) -> anyhow::Result<u64> {
    let row = db
        .query_one_raw(Statement::from_string(sea_orm::DatabaseBackend::Postgres, sql))
        .await?
        .with_context(|| format!("no row from {sql}"))?;
    Ok(row.try_get_by_index::<i64>(0)?.max(0) as u64)
}

/// Reads what `seed` left in `bench_seed_info`.
pub(crate) async fn read_info(db: &DatabaseConnection) -> anyhow::Result<SeedInfo> {
    let rows = db
        .query_all_raw(Statement::from_string(
            sea_orm::DatabaseBackend::Postgres,
            "SELECT key, value FROM bench_seed_info",
        ))
        .await
        .context("reading bench_seed_info (was the database made by `ops bench-seed`?)")?;
    let mut get = std::collections::HashMap::new();
    for r in rows {
        get.insert(r.try_get_by_index::<String>(0)?, r.try_get_by_index::<String>(1)?);
    }
    let field = |k: &str| get.get(k).cloned().with_context(|| format!("bench_seed_info has no {k}"));
    Ok(SeedInfo {
        big_merchant: field("big_merchant")?.parse()?,
        big_key: field("big_key")?,
        small_merchant: field("small_merchant")?.parse()?,
        small_key: field("small_key")?,
        invoices: field("invoices")?.parse()?,
    })
}

/// Creates database `name` on `pg` afresh, migrates it and fills it for `invoices` invoices.
pub(crate) async fn seed(pg: &str, name: &str, invoices: u64, verbose: bool) -> anyhow::Result<(SeedInfo, Vec<Load>)> {
    let n = invoices.max(100);
    let (_admin, url) = scratch_database(pg, name).await?;
    let db = sea_orm::Database::connect(&url).await.context("connecting to the new database")?;
    domain::db::migrate(&db).await?;

    let mut merchants = Vec::with_capacity(MERCHANTS);
    for i in 0..MERCHANTS {
        let m = domain::merchants::create_merchant(&db, &format!("bench merchant {i:03}"), &Default::default()).await?;
        merchants.push(m.id);
    }
    let key = |m: Uuid| {
        let db = &db;
        async move {
            let (_, key) =
                domain::merchants::create_api_key(db, m.into(), SEED_ENV, Permissions::all(), Some("bench-reads"))
                    .await?;
            anyhow::Ok(key)
        }
    };
    let info = SeedInfo {
        big_merchant: merchants[0],
        big_key: key(merchants[0]).await?,
        small_merchant: merchants[1],
        small_key: key(merchants[1]).await?,
        invoices: n,
    };

    // One connection for the load, so that its session settings hold for every statement.
    let mut opts = sea_orm::ConnectOptions::new(url.clone());
    opts.max_connections(1).min_connections(1).sqlx_logging(false);
    let bulk = sea_orm::Database::connect(opts).await?;
    for s in [
        "SET synchronous_commit = off",
        "SET maintenance_work_mem = '512MB'",
        "SET work_mem = '64MB'",
        "SET session_replication_role = replica",
        UUID7_FN,
    ] {
        bulk.execute_unprepared(s).await?;
    }

    let plan = Plan::new(n, &merchants);
    let mut loads = Vec::new();
    for (table, statements) in plan.statements() {
        let dropped = drop_secondary_indexes(&bulk, table).await?;
        let t = Instant::now();
        let mut rows = 0;
        for (i, sql) in statements.iter().enumerate() {
            let r = bulk.execute_unprepared(sql).await.with_context(|| format!("loading {table} (statement {i})"))?;
            rows += r.rows_affected();
        }
        let insert_secs = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for def in &dropped {
            bulk.execute_unprepared(def).await.with_context(|| format!("rebuilding {def}"))?;
        }
        let index_secs = t.elapsed().as_secs_f64();
        // By name: PostgreSQL does not deparse every predicate back to the same text (an
        // `IN (…)` list's casts move), so the definitions are compared where they were read.
        let names = |defs: &[String]| -> anyhow::Result<Vec<String>> {
            let mut n = defs.iter().map(|d| index_name(d).map(str::to_owned)).collect::<anyhow::Result<Vec<_>>>()?;
            n.sort();
            Ok(n)
        };
        let (after, want) = (names(&secondary_indexes(&bulk, table).await?)?, names(&dropped)?);
        if after != want {
            bail!("indexes of {table} differ after the rebuild: {want:?} vs {after:?}");
        }
        if verbose {
            println!(
                "{table:<20} {rows:>10} rows in {insert_secs:>6.1} s ({:>7.0} rows/s), {} indexes rebuilt in {index_secs:.1} s",
                rows as f64 / insert_secs.max(1e-9),
                dropped.len()
            );
        }
        loads.push(Load { table, insert_secs, index_secs });
    }

    // The list counters' triggers did not fire during the load (`session_replication_role`):
    // the rows are counted once, as the migration counts the rows already there.
    let t = Instant::now();
    bulk.execute_unprepared("DELETE FROM list_count_deltas").await?;
    bulk.execute_unprepared("DELETE FROM list_counts").await?;
    for c in migration::list_counts::COUNTED {
        for sql in c.backfill_sql(sea_orm::DatabaseBackend::Postgres) {
            bulk.execute_unprepared(&sql).await.with_context(|| format!("counting the rows of {}", c.table))?;
        }
    }
    if verbose {
        println!("list counters from the rows in {:.1} s", t.elapsed().as_secs_f64());
    }
    loads.push(Load { table: "list_counts", insert_secs: t.elapsed().as_secs_f64(), index_secs: 0.0 });

    bulk.execute_unprepared("DROP FUNCTION bench_seed_uuid7(timestamptz, text)").await?;
    bulk.execute_unprepared("CREATE TABLE bench_seed_info (key text PRIMARY KEY, value text NOT NULL)").await?;
    let kv = [
        ("big_merchant", info.big_merchant.to_string()),
        ("big_key", info.big_key.clone()),
        ("small_merchant", info.small_merchant.to_string()),
        ("small_key", info.small_key.clone()),
        ("invoices", n.to_string()),
        ("environment", SEED_ENV.as_str().to_owned()),
    ];
    for (k, v) in kv {
        bulk.execute_raw(Statement::from_sql_and_values(
            sea_orm::DatabaseBackend::Postgres,
            "INSERT INTO bench_seed_info (key, value) VALUES ($1, $2)",
            [k.into(), v.into()],
        ))
        .await?;
    }
    let t = Instant::now();
    bulk.execute_unprepared("SET session_replication_role = DEFAULT").await?;
    bulk.execute_unprepared("VACUUM (ANALYZE)").await?;
    if verbose {
        println!("VACUUM (ANALYZE) in {:.1} s", t.elapsed().as_secs_f64());
    }
    Ok((info, loads))
}

/// A UUIDv7-shaped id (the ids the services write, `Uuid::now_v7`) for time `ts`, its random
/// bits from `salt`: rows stay in time order in their primary keys as real ones are.
const UUID7_FN: &str = "CREATE FUNCTION bench_seed_uuid7(ts timestamptz, salt text) RETURNS uuid \
    LANGUAGE sql STABLE PARALLEL SAFE AS $$ \
    SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(h, 1, 3) \
    || '8' || substr(h, 4, 15))::uuid FROM (SELECT md5(salt) AS h) s $$";

/// `(index definition)` of `table`'s indexes that back no constraint, sorted.
async fn secondary_indexes(db: &DatabaseConnection, table: &str) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            sea_orm::DatabaseBackend::Postgres,
            "SELECT i.indexdef FROM pg_indexes i WHERE i.schemaname = 'public' AND i.tablename = $1 \
             AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = format('%I', i.indexname)::regclass) \
             ORDER BY i.indexdef",
            [table.into()],
        ))
        .await?;
    rows.iter().map(|r| Ok(r.try_get_by_index::<String>(0)?)).collect()
}

/// The name in an index definition: "CREATE [UNIQUE] INDEX name ON public.table …".
fn index_name(def: &str) -> anyhow::Result<&str> {
    def.split_whitespace().skip_while(|w| *w != "INDEX").nth(1).with_context(|| format!("index name in {def}"))
}

/// Drops `table`'s secondary indexes; returns their definitions to rebuild them.
async fn drop_secondary_indexes(db: &DatabaseConnection, table: &str) -> anyhow::Result<Vec<String>> {
    let defs = secondary_indexes(db, table).await?;
    for def in &defs {
        let name = index_name(def)?;
        db.execute_unprepared(&format!("DROP INDEX public.{name}")).await?;
    }
    Ok(defs)
}

/// The load's statements, derived from the invoice count.
struct Plan {
    n: u64,
    /// The first second of the year, as a SQL literal.
    t0: String,
    /// Microseconds between two invoices.
    step_us: u64,
    /// `ARRAY[…]::uuid[]` of the merchants (index 1: the big one).
    merchants: String,
}

impl Plan {
    fn new(n: u64, merchants: &[Uuid]) -> Self {
        let year_us: u64 = 365 * 86_400 * 1_000_000;
        let t0 = chrono::Utc::now() - chrono::Duration::days(365);
        let list = merchants.iter().map(|m| format!("'{m}'")).collect::<Vec<_>>().join(",");
        Plan {
            n,
            t0: format!("TIMESTAMPTZ '{}'", t0.to_rfc3339()),
            step_us: year_us / n,
            merchants: format!("ARRAY[{list}]::uuid[]"),
        }
    }

    /// The time of invoice `i` (1-based, may be fractional in SQL), as a SQL expression.
    fn at(&self, i: &str) -> String {
        format!("({} + (({i})::bigint - 1) * {}::bigint * interval '1 microsecond')", self.t0, self.step_us)
    }

    /// `[lower, upper)` time bounds (SQL literals) splitting the year into spans of `per`
    /// invoices each, the first open below and the last open above.
    fn spans(&self, per: u64) -> Vec<(String, String)> {
        let per = per.max(1);
        let chunks = self.n.div_ceil(per).max(1);
        (0..chunks)
            .map(|c| {
                let lo =
                    if c == 0 { "'-infinity'::timestamptz".to_owned() } else { self.at(&(c * per + 1).to_string()) };
                let hi = if c + 1 == chunks {
                    "'infinity'::timestamptz".to_owned()
                } else {
                    self.at(&((c + 1) * per + 1).to_string())
                };
                (lo, hi)
            })
            .collect()
    }

    /// The gates as a VALUES list: `(slot, id, asset, network, family, confirmations, price, qd)`
    /// over the 12 slots when `slots`, else once each without the slot.
    fn gates(slots: bool) -> String {
        let row = |g: &(&str, &str, &str, &str, u32, &str, u32)| {
            let (id, asset, network, family, conf, price, qd) = *g;
            format!("'{id}', '{asset}', '{network}', '{family}', {conf}, {price}::numeric, {qd}")
        };
        if slots {
            let rows: Vec<String> =
                GATE_SLOTS.iter().enumerate().map(|(s, &g)| format!("({s}, {})", row(&GATES[g]))).collect();
            format!("(VALUES {}) AS g(slot, id, asset, network, family, confirmations, price, qd)", rows.join(", "))
        } else {
            let rows: Vec<String> = GATES.iter().map(|g| format!("({})", row(g))).collect();
            format!("(VALUES {}) AS g(id, asset, network, family, confirmations, price, qd)", rows.join(", "))
        }
    }

    /// The merchant (uuid expression) of invoice or payout `i`: every other one is the big
    /// merchant's, the rest spread evenly over the other 99.
    fn merchant_of(&self, i: &str) -> String {
        format!("({})[CASE WHEN {i} % 2 = 0 THEN 1 ELSE 2 + ({i} / 2) % {} END]", self.merchants, MERCHANTS - 1)
    }

    fn statements(&self) -> Vec<(&'static str, Vec<String>)> {
        vec![
            ("webhook_endpoints", vec![self.endpoints()]),
            ("invoices", self.invoices()),
            ("payments", self.payments()),
            ("invoice_credits", vec![INVOICE_CREDITS.to_owned()]),
            ("payouts", self.payouts()),
            ("ledger_entries", self.ledger()),
            ("balances", vec![BALANCES.to_owned()]),
            ("events", self.events()),
            ("webhook_deliveries", self.deliveries()),
            ("webhook_attempts", self.attempts()),
        ]
    }

    fn endpoints(&self) -> String {
        format!(
            "INSERT INTO webhook_endpoints (id, merchant_id, environment, url, description, enabled_events, disabled, \
             secret_ciphertext, previous_secret_ciphertext, previous_secret_expires_at, created_at, updated_at) \
             SELECT gen_random_uuid(), m, e, 'https://merchant-' || left(m::text, 8) || '.example.com/webhooks/paygate', \
             'orders', '[]', false, 'bench-seed-no-secret', NULL, NULL, {t0}, {t0} \
             FROM unnest({ms}) AS m CROSS JOIN (VALUES ('live'), ('test')) AS env(e)",
            t0 = self.t0,
            ms = self.merchants
        )
    }

    fn invoices(&self) -> Vec<String> {
        let n = self.n;
        let open_from = n - n / 100;
        let mut out = Vec::new();
        let mut lo = 1;
        while lo <= n {
            let hi = (lo + CHUNK_ROWS - 1).min(n);
            out.push(format!(
                "INSERT INTO invoices (id, merchant_id, environment, gate_id, currency, network, amount_requested, \
                 amount_paid, amount_usd, amount_fiat, fiat_currency, amount_in_base_currency, base_currency, \
                 exchange_rate, status, deposit_address, deposit_address_tag, address_key, derivation_index, \
                 description, external_id, idempotency_key, request_hash, metadata, redirect_url, source, \
                 static_address_id, expires_at, paid_at, created_at, updated_at, is_deferred, draft_expires_at, \
                 activated_at, activation_count, is_locked_fiat, target_settlement_asset, settlement_target_currency, \
                 settlement_target_network, payer_email, sent_at, cancelled_at, email_due_at) \
                 SELECT bench_seed_uuid7(t, 'inv' || i), merchant_id, env, id, asset, network, req, \
                 CASE status WHEN 'paid' THEN req WHEN 'overpaid' THEN round(req * 1.1, qd) \
                   WHEN 'underpaid' THEN round(req * 0.5, qd) ELSE 0 END, \
                 usd, CASE WHEN fiat THEN usd END, CASE WHEN fiat THEN 'USD' END, usd, 'USD', price, \
                 status, addr, tag, family || ':' || addr || ':' || coalesce(tag, ''), i, \
                 'Order #' || i, 'order-' || i, \
                 CASE WHEN h % 3 = 0 THEN 'idem-' || i END, \
                 CASE WHEN h % 3 = 0 THEN md5('rq' || i) || md5('rh' || i) END, \
                 CASE WHEN h % 2 = 0 THEN json_build_object('order_id', i, 'customer', 'cust-' || (i % 50000)) END, \
                 CASE WHEN h % 4 = 0 THEN 'https://shop.example.com/orders/' || i END, \
                 'api', NULL, t + interval '15 minutes', paid_at, t, \
                 coalesce(paid_at, CASE status WHEN 'expired' THEN t + interval '15 minutes' \
                   WHEN 'cancelled' THEN t + interval '5 minutes' ELSE t END), \
                 false, NULL, NULL, 0, fiat, 'passthrough', NULL, NULL, \
                 CASE WHEN h % 10 = 0 THEN 'payer' || i || '@example.com' END, \
                 CASE WHEN h % 10 = 0 THEN t END, \
                 CASE WHEN status = 'cancelled' THEN t + interval '5 minutes' END, NULL \
                 FROM ( \
                   SELECT s.*, g.*, round(s.usd / g.price, g.qd) AS req, \
                     CASE WHEN s.status IN ('paid', 'overpaid', 'underpaid') \
                       THEN s.t + (120 + s.h % 600) * interval '1 second' END AS paid_at, \
                     CASE g.family WHEN 'bitcoin' THEN 'bc1q' || left(s.hx, 38) \
                       WHEN 'evm' THEN '0x' || left(s.hx, 40) WHEN 'tron' THEN 'T' || left(upper(s.hx), 33) \
                       WHEN 'solana' THEN left(s.hx, 44) ELSE 'rPaygateBenchSeedDepositAddr1' END AS addr, \
                     CASE WHEN g.family = 'xrp' THEN s.i::text END AS tag \
                   FROM ( \
                     SELECT i, {at} AS t, mod(abs(hashint8(i)::bigint), 1000) AS h, \
                       {merchant} AS merchant_id, \
                       CASE WHEN i % 29 = 0 THEN 'test' ELSE 'live' END AS env, \
                       mod(abs(hashint8(i * 7 + 3)::bigint), 12) AS slot, \
                       round(5 + mod(abs(hashint8(i * 31 + 1)::bigint), 50000) / 100.0, 2) AS usd, \
                       mod(abs(hashint8(i * 13 + 5)::bigint), 5) < 2 AS fiat, \
                       md5('a' || i) || md5('b' || i) AS hx, \
                       CASE WHEN i > {open_from} THEN \
                         (CASE WHEN mod(abs(hashint8(i)::bigint), 1000) < 600 THEN 'pending' \
                          WHEN mod(abs(hashint8(i)::bigint), 1000) < 900 THEN 'confirming' ELSE 'paid' END) \
                       ELSE (CASE WHEN mod(abs(hashint8(i)::bigint), 1000) < 780 THEN 'paid' \
                          WHEN mod(abs(hashint8(i)::bigint), 1000) < 790 THEN 'overpaid' \
                          WHEN mod(abs(hashint8(i)::bigint), 1000) < 800 THEN 'underpaid' \
                          WHEN mod(abs(hashint8(i)::bigint), 1000) < 990 THEN 'expired' ELSE 'cancelled' END) END AS status \
                     FROM generate_series({lo}::bigint, {hi}::bigint) AS i \
                   ) s JOIN {gates} ON g.slot = s.slot \
                 ) x",
                at = self.at("i"),
                merchant = self.merchant_of("i"),
                gates = Self::gates(true),
            ));
            lo = hi + 1;
        }
        out
    }

    /// One payment per invoice that received money; a confirmed one holds the depth the tracker
    /// stopped watching it at (`workers::pipeline::final_depth`: its confirmations where those
    /// are final, else twice them), as a year-old payment does.
    fn payments(&self) -> Vec<String> {
        self.spans(CHUNK_ROWS)
            .into_iter()
            .map(|(lo, hi)| {
                format!(
                    "INSERT INTO payments (id, invoice_id, environment, gate_id, tx_hash, output_index, amount, \
                     confirmations, required_confirmations, status, block_height, detected_at, confirmed_at, created_at, \
                     credited_gate_id, credited_amount, credited_at, reversed_at, checked_at, missing_since_height, \
                     missing_last_height, missing_checks, next_check_at, track_token, revivals, credited_fiat_currency, \
                     credited_fiat_rate, credited_fiat_value) \
                     SELECT bench_seed_uuid7(d, 'pay' || inv.id), inv.id, inv.environment, inv.gate_id, \
                     CASE WHEN g.family = 'evm' THEN '0x' ELSE '' END || md5('tx1' || inv.id) || md5('tx2' || inv.id), 0, \
                     amount, CASE WHEN confirming THEN g.confirmations / 2 WHEN g.family IN ('solana', 'xrp') THEN g.confirmations \
                     ELSE g.confirmations * 2 END, g.confirmations, \
                     CASE WHEN confirming THEN 'confirming' ELSE 'confirmed' END, 800000 + inv.derivation_index, \
                     d, CASE WHEN NOT confirming THEN inv.paid_at END, d, \
                     CASE WHEN NOT confirming THEN inv.gate_id END, CASE WHEN NOT confirming THEN amount END, \
                     CASE WHEN NOT confirming THEN inv.paid_at END, NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, \
                     CASE WHEN NOT confirming THEN 'USD' END, CASE WHEN NOT confirming THEN g.price END, \
                     CASE WHEN NOT confirming THEN round(amount * g.price, 2) END \
                     FROM (SELECT inv.*, inv.status = 'confirming' AS confirming, \
                             CASE WHEN inv.status = 'confirming' THEN inv.amount_requested ELSE inv.amount_paid END AS amount, \
                             coalesce(inv.paid_at, inv.created_at + interval '3 minutes') - interval '2 minutes' AS d \
                           FROM invoices inv \
                           WHERE inv.status IN ('paid', 'overpaid', 'underpaid', 'confirming') \
                             AND inv.created_at >= {lo} AND inv.created_at < {hi}) inv \
                     JOIN {gates} ON g.id = inv.gate_id",
                    gates = Self::gates(false)
                )
            })
            .collect()
    }

    fn payouts(&self) -> Vec<String> {
        let p = (self.n / 5).max(1);
        let open_from = p - p / 200;
        let mut out = Vec::new();
        let mut lo = 1;
        while lo <= p {
            let hi = (lo + CHUNK_ROWS - 1).min(p);
            out.push(format!(
                "INSERT INTO payouts (id, merchant_id, environment, gate_id, currency, network, amount, \
                 amount_in_base_currency, recipient_amount, merchant_debit_amount, fee_amount, payout_fee_allocation, \
                 network_fee, configured_network_fee_amount, network_fee_allocation, destination, destination_tag, \
                 status, tx_hash, idempotency_key, description, metadata, failure_reason, executable_at, approved_at, \
                 completed_at, cancelled_at, created_at, updated_at, signed_tx, queued_at, broadcast_at, checked_at) \
                 SELECT bench_seed_uuid7(t, 'po' || j), merchant_id, env, id, asset, network, amount, usd, amount, \
                 amount + fee, 0, 'merchant', fee, fee, 'merchant', \
                 CASE family WHEN 'bitcoin' THEN 'bc1q' || left(hx, 38) WHEN 'evm' THEN '0x' || left(hx, 40) \
                   WHEN 'tron' THEN 'T' || left(upper(hx), 33) WHEN 'solana' THEN left(hx, 44) \
                   ELSE 'rPaygateBenchSeedPayoutDest1' END, \
                 CASE WHEN family = 'xrp' THEN (j % 100000)::text END, \
                 status, CASE WHEN status IN ('processing', 'completed', 'failed') THEN md5('ptx' || j) || md5('ptx2' || j) END, \
                 CASE WHEN h % 2 = 0 THEN 'po-' || j END, 'Withdrawal #' || j, NULL, \
                 CASE WHEN status = 'failed' THEN 'broadcast rejected: insufficient funds in hot wallet' END, \
                 t, CASE WHEN status NOT IN ('pending_approval', 'cancelled') THEN t + interval '1 minute' END, \
                 CASE WHEN status = 'completed' THEN t + interval '20 minutes' END, \
                 CASE WHEN status = 'cancelled' THEN t + interval '2 minutes' END, \
                 t, t + interval '20 minutes', NULL, \
                 CASE WHEN status IN ('queued', 'processing', 'completed', 'failed') THEN t + interval '2 minutes' END, \
                 CASE WHEN status IN ('processing', 'completed', 'failed') THEN t + interval '3 minutes' END, \
                 CASE WHEN status IN ('completed', 'failed') THEN t + interval '20 minutes' END \
                 FROM ( \
                   SELECT s.*, g.*, round(s.usd / g.price, g.qd) AS amount, \
                     greatest(round(0.5 / g.price, g.qd), 1 / power(10::numeric, g.qd)) AS fee \
                   FROM ( \
                     SELECT j, {at} + interval '20 minutes' AS t, mod(abs(hashint8(j + 17)::bigint), 1000) AS h, \
                       {merchant} AS merchant_id, CASE WHEN j % 29 = 0 THEN 'test' ELSE 'live' END AS env, \
                       mod(abs(hashint8(j * 11 + 2)::bigint), 12) AS slot, \
                       round(20 + mod(abs(hashint8(j * 37 + 9)::bigint), 50000) / 100.0, 2) AS usd, \
                       md5('p' || j) || md5('q' || j) AS hx, \
                       CASE WHEN j > {open_from} THEN (ARRAY['pending_approval', 'approved', 'queued', 'processing'])[1 + j % 4] \
                         WHEN mod(abs(hashint8(j + 17)::bigint), 1000) < 950 THEN 'completed' \
                         WHEN mod(abs(hashint8(j + 17)::bigint), 1000) < 980 THEN 'failed' ELSE 'cancelled' END AS status \
                     FROM generate_series({lo}::bigint, {hi}::bigint) AS j \
                   ) s JOIN {gates} ON g.slot = s.slot \
                 ) x",
                at = self.at("(j - 1) * 5 + 1"),
                merchant = self.merchant_of("j"),
                gates = Self::gates(true),
            ));
            lo = hi + 1;
        }
        out
    }

    fn ledger(&self) -> Vec<String> {
        let cols = "INSERT INTO ledger_entries (id, merchant_id, environment, gate_id, bucket, entry_type, amount, \
                    balance_after, reference_type, reference_id, description, created_at)";
        // Four per credited payment (one per confirming one), ~250k payments a statement.
        let mut out: Vec<String> = self
            .spans(CHUNK_ROWS / 4 * 5 / 4)
            .into_iter()
            .map(|(lo, hi)| {
                format!(
                    "{cols} SELECT bench_seed_uuid7(at, 'le' || k || p.id), inv.merchant_id, p.environment, p.gate_id, \
                     bucket, entry_type, amt, abs(amt) * 3, 'payment', p.id, NULL, at \
                     FROM payments p JOIN invoices inv ON inv.id = p.invoice_id \
                     CROSS JOIN LATERAL (VALUES \
                       (1, 'pending', 'invoice_credit', p.amount, p.detected_at), \
                       (2, 'pending', 'invoice_credit', -p.amount, p.confirmed_at), \
                       (3, 'available', 'invoice_credit', p.amount, p.confirmed_at + interval '1 millisecond'), \
                       (4, 'available', 'sweep_fee', -greatest(round(p.amount * 0.001, 8), 0.00000001), \
                        p.confirmed_at + interval '1 hour') \
                     ) AS e(k, bucket, entry_type, amt, at) \
                     WHERE p.created_at >= {lo} AND p.created_at < {hi} AND (k = 1 OR p.status = 'confirmed')"
                )
            })
            .collect();
        // Four per finished payout, two per open one.
        out.push(format!(
            "{cols} SELECT bench_seed_uuid7(at, 'lp' || k || p.id), p.merchant_id, p.environment, p.gate_id, \
             bucket, entry_type, amt, abs(amt) * 3, 'payout', p.id, NULL, at \
             FROM payouts p CROSS JOIN LATERAL (VALUES \
               (1, 'available', 'payout_reserve', -p.merchant_debit_amount, p.created_at), \
               (2, 'reserved', 'payout_reserve', p.merchant_debit_amount, p.created_at), \
               (3, 'reserved', CASE WHEN p.status = 'completed' THEN 'payout_debit' ELSE 'payout_release' END, \
                CASE WHEN p.status = 'completed' THEN -p.amount ELSE -p.merchant_debit_amount END, p.updated_at), \
               (4, CASE WHEN p.status = 'completed' THEN 'reserved' ELSE 'available' END, \
                CASE WHEN p.status = 'completed' THEN 'network_fee' ELSE 'payout_release' END, \
                CASE WHEN p.status = 'completed' THEN -p.network_fee ELSE p.merchant_debit_amount END, p.updated_at) \
             ) AS e(k, bucket, entry_type, amt, at) \
             WHERE k <= 2 OR p.status IN ('completed', 'failed', 'cancelled')"
        ));
        out
    }

    fn events(&self) -> Vec<String> {
        let undispatched_from = self.n - self.n / 1000;
        self.spans(CHUNK_ROWS / 5)
            .into_iter()
            .map(|(lo, hi)| {
                format!(
                    "INSERT INTO events (id, merchant_id, environment, event_type, dedupe_key, payload, created_at, \
                     dispatched_at, invoice_id, payout_id) \
                     SELECT bench_seed_uuid7(at, 'ev' || k || inv.id), inv.merchant_id, inv.environment, typ, \
                     typ || ':' || inv.id || ':seed-' || k, \
                     CASE WHEN typ = 'balance.credited' THEN json_build_object('invoice_id', inv.id, \
                       'payment_id', bench_seed_uuid7(coalesce(inv.paid_at, inv.created_at + interval '3 minutes') \
                       - interval '2 minutes', 'pay' || inv.id), 'external_id', inv.external_id, \
                       'outcome', 'source_credited', 'failure_class', 'not_required', \
                       'source_amount', inv.amount_paid::text, 'source_currency', inv.currency, \
                       'source_network', inv.network, 'credited_amount', inv.amount_paid::text, \
                       'credited_currency', inv.currency, 'credited_network', inv.network) \
                     ELSE json_build_object('invoice_id', inv.id, 'external_id', inv.external_id, \
                       'currency', inv.currency, 'network', inv.network, 'environment', inv.environment, \
                       'amount_requested', inv.amount_requested::text, 'amount_paid', inv.amount_paid::text, \
                       'status', inv.status, 'activation_count', inv.activation_count) END, \
                     at, CASE WHEN inv.derivation_index <= {undispatched_from} THEN at + interval '1 second' END, \
                     inv.id, NULL \
                     FROM invoices inv CROSS JOIN LATERAL (SELECT k, inv.created_at + k * interval '1 minute' AS at, \
                       CASE k WHEN 1 THEN 'invoice.sent' WHEN 2 THEN 'invoice.confirming' \
                         WHEN 3 THEN (CASE inv.status WHEN 'paid' THEN 'invoice.paid' WHEN 'overpaid' THEN 'invoice.overpaid' \
                           WHEN 'underpaid' THEN 'invoice.underpaid' WHEN 'expired' THEN 'invoice.expired' \
                           WHEN 'cancelled' THEN 'invoice.resolved' WHEN 'pending' THEN 'invoice.activated' \
                           ELSE 'invoice.confirming' END) \
                         WHEN 4 THEN 'balance.credited' ELSE 'invoice.late_deposit' END AS typ \
                       FROM generate_series(1, 5) AS k) e \
                     WHERE inv.created_at >= {lo} AND inv.created_at < {hi}"
                )
            })
            .collect()
    }

    fn deliveries(&self) -> Vec<String> {
        self.spans(CHUNK_ROWS / 5)
            .into_iter()
            .map(|(lo, hi)| {
                format!(
                    "INSERT INTO webhook_deliveries (id, event_id, merchant_id, environment, event_type, body, status, \
                     attempt_count, retry_step, next_attempt_at, lease_until, enqueued_at, last_status_code, last_error, \
                     event_created_at, created_at, updated_at, delivered_at, dead_at, order_key, wait_for_earlier, \
                     endpoint_id) \
                     SELECT bench_seed_uuid7(at, 'wd' || e.id), e.id, e.merchant_id, e.environment, e.event_type, \
                     json_build_object('id', e.id, 'event', e.event_type, \
                       'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
                       'data', e.payload)::text, \
                     status, attempts, CASE WHEN status = 'succeeded' THEN 0 ELSE attempts END, \
                     at + (attempts - 1) * interval '30 seconds', NULL, at, \
                     CASE status WHEN 'succeeded' THEN 200 WHEN 'dead' THEN 500 END, \
                     CASE WHEN status = 'dead' THEN 'HTTP 500 from the endpoint' END, \
                     e.created_at, at, at + (attempts - 1) * interval '30 seconds', \
                     CASE WHEN status = 'succeeded' THEN at + (attempts - 1) * interval '30 seconds' END, \
                     CASE WHEN status = 'dead' THEN at + (attempts - 1) * interval '30 seconds' END, \
                     e.invoice_id, false, ep.id \
                     FROM (SELECT e.*, e.dispatched_at AS at, h, \
                             CASE WHEN e.created_at > now() - interval '1 hour' AND h % 2 = 0 THEN 'retrying' \
                               WHEN h < 990 OR h >= 995 THEN 'succeeded' ELSE 'dead' END AS status, \
                             CASE WHEN e.created_at > now() - interval '1 hour' AND h % 2 = 0 THEN 1 \
                               WHEN h < 940 OR h >= 995 THEN 1 WHEN h < 990 THEN 2 + h % 2 ELSE 10 END AS attempts \
                           FROM (SELECT e.*, mod(abs(hashtext(e.id::text)::bigint), 1000) AS h FROM events e \
                                 WHERE e.dispatched_at IS NOT NULL \
                                   AND e.created_at >= {lo} AND e.created_at < {hi}) e) e \
                     JOIN webhook_endpoints ep ON ep.merchant_id = e.merchant_id AND ep.environment = e.environment"
                )
            })
            .collect()
    }

    fn attempts(&self) -> Vec<String> {
        self.spans(CHUNK_ROWS / 6)
            .into_iter()
            .map(|(lo, hi)| {
                format!(
                    "INSERT INTO webhook_attempts (id, delivery_id, attempt_no, url, started_at, latency_ms, status_code, \
                     error, response_body, succeeded) \
                     SELECT bench_seed_uuid7(at, 'wa' || a || d.id), d.id, a, \
                     'https://merchant-' || left(d.merchant_id::text, 8) || '.example.com/webhooks/paygate', at, \
                     40 + mod(abs(hashtext(d.id::text || a)::bigint), 300), \
                     CASE WHEN ok THEN 200 ELSE 500 END, CASE WHEN NOT ok THEN 'HTTP 500' END, \
                     CASE WHEN at < now() - interval '90 days' THEN NULL \
                       WHEN ok THEN '{{\"received\":true}}' ELSE 'Internal Server Error' END, ok \
                     FROM webhook_deliveries d CROSS JOIN LATERAL (SELECT a, d.created_at + (a - 1) * interval '30 seconds' AS at, \
                       (a = d.attempt_count AND d.status = 'succeeded') AS ok \
                       FROM generate_series(1, d.attempt_count) AS a) x \
                     WHERE d.created_at >= {lo} AND d.created_at < {hi}"
                )
            })
            .collect()
    }
}

const INVOICE_CREDITS: &str = "INSERT INTO invoice_credits (invoice_id, gate_id, merchant_id, environment, credited, \
     refunded, updated_at) \
     SELECT id, gate_id, merchant_id, environment, amount_paid, 0, paid_at FROM invoices \
     WHERE status IN ('paid', 'overpaid', 'underpaid')";

const BALANCES: &str = "INSERT INTO balances (id, merchant_id, environment, gate_id, available, pending, reserved, \
     created_at, updated_at) \
     SELECT gen_random_uuid(), merchant_id, environment, gate_id, \
     coalesce(sum(amount) FILTER (WHERE bucket = 'available'), 0), \
     greatest(coalesce(sum(amount) FILTER (WHERE bucket = 'pending'), 0), 0), \
     greatest(coalesce(sum(amount) FILTER (WHERE bucket = 'reserved'), 0), 0), min(created_at), max(created_at) \
     FROM ledger_entries GROUP BY merchant_id, environment, gate_id";
