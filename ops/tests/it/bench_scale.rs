//! `ops bench-seed` then `ops bench-reads` on a small grown database (2,000 invoices): every
//! request kind answers 2xx on both databases, and every list query can be served by an index
//! (explained with `enable_seqscan = off`, since at this size a sequential scan is cheaper);
//! then `ops bench-pipeline --grown` and `ops bench-webhooks --grown` on copies of it.
//! PostgreSQL server at `PAYGATE_TEST_PG` (default postgres://postgres@127.0.0.1:5432).

use std::process::{Command, Output};

fn pg() -> String {
    std::env::var("PAYGATE_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

fn ops(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ops"))
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "error")
        .output()
        .expect("run ops")
}

/// Drops the test's databases however the test ends.
struct Dropper(Vec<String>);

impl Drop for Dropper {
    fn drop(&mut self) {
        for db in &self.0 {
            let _ = Command::new("psql")
                .env("PGSSLMODE", "disable")
                .args([
                    "-q",
                    "-d",
                    &format!("{}/postgres", pg()),
                    "-c",
                    &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
                ])
                .output();
        }
    }
}

#[test]
fn seed_then_reads_answer_2xx_and_every_list_has_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("{}_{}", std::process::id(), uuid::Uuid::new_v4().simple().to_string().get(..8).unwrap());
    let (grown, empty) = (format!("paygate_bench_seed_{tag}"), format!("paygate_bench_empty_{tag}"));
    let _drop = Dropper(vec![grown.clone(), empty.clone()]);
    let pg = pg();

    let seed = ops(dir.path(), &["bench-seed", "--pg", &pg, "--database", &grown, "--invoices", "2000"]);
    let out = String::from_utf8_lossy(&seed.stdout);
    assert!(seed.status.success(), "bench-seed failed: {out}{}", String::from_utf8_lossy(&seed.stderr));
    for table in
        ["invoices", "payments", "ledger_entries", "events", "webhook_deliveries", "webhook_attempts", "payouts"]
    {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{table} ")))
            .unwrap_or_else(|| panic!("no {table} row in {out}"));
        let rows: u64 = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(rows > 0, "{table}: {line}");
    }
    assert!(out.contains("disk per million invoices"), "{out}");
    // The seed loads with the list counters' triggers off and counts the rows at the end: every
    // counter equals its rows grouped by the counter's key.
    for c in migration::list_counts::COUNTED {
        for dated in [false, c.day] {
            let counters = format!(
                "SELECT merchant_id, environment, list, status, gate_id, currency, network, kind, day, n \
                 FROM list_counts WHERE list = '{}' AND {}",
                c.list,
                if dated { "day <> ''" } else { "day = ''" }
            );
            let rows = c.grouped_sql(sea_orm::DatabaseBackend::Postgres, dated);
            let sql = format!(
                "SELECT COUNT(*) FROM ((({rows}) EXCEPT ({counters})) UNION ALL (({counters}) EXCEPT ({rows}))) AS d"
            );
            let differ = psql_value(&pg, &grown, &sql);
            assert_eq!(differ, "0", "{} (per day: {dated}): counters differ from the rows", c.list);
        }
    }

    let args = [
        "bench-reads",
        "--pg",
        &pg,
        "--grown",
        &grown,
        "--empty",
        &empty,
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--concurrency",
        "2",
        "--plans-without-seqscan",
    ];
    let reads = ops(dir.path(), &args);
    let out = String::from_utf8_lossy(&reads.stdout);
    let err = String::from_utf8_lossy(&reads.stderr);
    assert!(reads.status.success(), "bench-reads failed: {out}{err}");
    // The table: one row per request kind, none with a non-2xx answer.
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("| `GET ") || l.starts_with("| `POST ")).collect();
    assert_eq!(rows.len(), 13, "{out}");
    for row in &rows {
        let non_2xx = row.trim_end_matches('|').rsplit('|').next().unwrap().trim();
        assert_eq!(non_2xx, "0", "{row}");
    }
    // Every list statement explained names an index.
    let plans: Vec<&str> = out.lines().filter(|l| l.starts_with("-- GET ")).collect();
    assert!(plans.len() >= 20, "{out}");
    for p in &plans {
        assert!(p.contains(": uses an index"), "{p}\n{out}");
    }
    assert!(out.contains("bench-reads: all 2xx: yes; every list plan uses an index: yes"), "{out}");

    // The deposit pipeline and the webhook deliverer, each on an empty database and then on a
    // copy of the grown one, side by side: every payment credited once and every event
    // delivered, signed, on both; the grown database as seeded afterwards.
    let redis = std::env::var("PAYGATE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let (pipe_db, hooks_db) = (format!("paygate_bench_pipe_{tag}"), format!("paygate_bench_hooks_{tag}"));
    let steady_db = format!("paygate_bench_steady_{tag}");
    let _drop_copies = Dropper(vec![pipe_db.clone(), hooks_db.clone(), steady_db.clone()]);
    let count_invoices = "SELECT COUNT(*) FROM invoices";
    let invoices_before = psql_value(&pg, &grown, count_invoices);
    let out = bench_pipeline(dir.path(), &pg, &redis, &pipe_db, &["--grown", &grown, "--invoices", "30"]);
    assert_eq!(out.matches("correctness: PASS").count(), 2, "{out}");
    assert_eq!(out.matches("credited: 30 of 30 payments").count(), 2, "{out}");
    assert!(out.contains("== on a copy of paygate_bench_seed_"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("| credits/s |")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("| p99 block -> credit, ms |")), "{out}");

    // The sustained mode on an empty database: every payment credited once, and the tables the
    // confirmations write analysed once the first payment is credited (a deployment's tables have
    // statistics; without them the tracker's batched reads become whole-table scans).
    let out = bench_pipeline(dir.path(), &pg, &redis, &steady_db, &["--sustained", "--rate", "20", "--secs", "2"]);
    assert!(out.contains("credited: 40 of 40 payments"), "{out}");
    assert!(out.contains("correctness: PASS"), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("statistics: payments, invoice_credits, ledger_entries, events, balances analysed ")),
        "{out}"
    );

    let deliverer = testkit::fleet::sibling_binary("webhook-deliverer");
    let args = [
        "bench-webhooks",
        "--pg",
        &pg,
        "--redis",
        &redis,
        "--database",
        &hooks_db,
        "--grown",
        &grown,
        "--rate",
        "50",
        "--secs",
        "1",
        "--latency-ms",
        "1",
        "--warmup-secs",
        "0",
        "--deliverer-bin",
        deliverer.to_str().unwrap(),
    ];
    let hooks = ops(dir.path(), &args);
    let out = String::from_utf8_lossy(&hooks.stdout);
    assert!(hooks.status.success(), "bench-webhooks failed: {out}{}", String::from_utf8_lossy(&hooks.stderr));
    let checks: Vec<&str> = out.lines().filter(|l| l.starts_with("checks: ")).collect();
    assert_eq!(checks.len(), 2, "{out}");
    for c in &checks {
        // 50 offered and the warm-up event, each delivered once, every signature verified.
        assert!(
            c.starts_with("checks: 51 events, 51 deliveries succeeded") && c.ends_with(" 0 unverified: ok"),
            "{c}\n{out}"
        );
    }
    assert!(out.lines().any(|l| l.starts_with("| deliveries/s |")), "{out}");
    assert_eq!(psql_value(&pg, &grown, count_invoices), invoices_before, "the grown database itself is not written to");
}

/// `ops bench-pipeline` on a fresh database `db` with blocks, scans and tracker looks every 200 ms
/// (a smoke run's seconds, not a benchmark's), plus `extra`; fails the test unless it exits 0.
/// Its standard output.
fn bench_pipeline(dir: &std::path::Path, pg: &str, redis: &str, db: &str, extra: &[&str]) -> String {
    let mut args = vec!["bench-pipeline", "--pg", pg, "--redis", redis, "--database", db];
    args.extend(["--block-interval-ms", "200", "--scan-interval-ms", "200", "--track-interval-ms", "200"]);
    args.extend_from_slice(extra);
    let run = ops(dir, &args);
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "bench-pipeline {extra:?} failed: {out}{}", String::from_utf8_lossy(&run.stderr));
    out
}

/// The answer of one query in database `db`, as `psql -tA` prints it.
fn psql_value(pg: &str, db: &str, sql: &str) -> String {
    let psql = Command::new("psql")
        .env("PGSSLMODE", "disable")
        .args(["-tA", "-d", &format!("{pg}/{db}"), "-c", sql])
        .output()
        .expect("psql");
    assert!(psql.status.success(), "{}", String::from_utf8_lossy(&psql.stderr));
    String::from_utf8_lossy(&psql.stdout).trim().to_owned()
}
