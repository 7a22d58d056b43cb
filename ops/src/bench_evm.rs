//! `ops bench-evm-scan`: the live EVM scanner against a real node. Starts anvil (`--anvil`,
//! default `$ANVIL_BIN` or `anvil`), fills `--blocks` blocks with `--transfers` ETH transfers
//! (spread evenly, to distinct addresses), then for each `--watched` count scans those blocks
//! with the scanner's own code into a fresh PostgreSQL database watching that many addresses
//! (every receiver among them), and prints blocks/s, transfers/s and the cost per transfer.
//! The cost per transfer staying flat as the watched set grows is the point: matching is one
//! indexed `IN` lookup per batch, not a scan of the watched addresses.
//! Floats here are measurements (rates, microseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use chrono::Utc;
use clap::Args;
use domain::config::{Config, EvmNetworkConfig};
use entity::{Amount, Environment, invoice, payment, scan_cursor};
use sea_orm::{ConnectionTrait, EntityTrait, PaginatorTrait};
use serde_json::json;
use uuid::Uuid;
use workers::chain::evm::{EvmChain, Rpc};

use crate::bench_node::{FLAT_COST_RATIO, NodeProcess, ScanLoad};

#[derive(Args, Debug)]
pub struct BenchEvmScanArgs {
    /// The anvil binary (npm @foundry-rs/anvil-linux-amd64).
    #[arg(long, env = "ANVIL_BIN", default_value = "anvil")]
    anvil: String,
    /// Blocks the transfers are spread over. The default, 10 blocks of 1,000 ETH transfers
    /// (21,000 gas each: 21 M of anvil's 30 M block gas limit), is the benchmark goal's "blocks full of
    /// transfers"; `--blocks 1000` gives the sparse chain of the earlier figures (10 per block).
    #[arg(long, default_value_t = 10)]
    blocks: u64,
    /// Block requests kept in flight (`[evm.networks.*] fetch_concurrency`; default its default).
    #[arg(long)]
    fetch_concurrency: Option<usize>,
    #[command(flatten)]
    load: ScanLoad,
}

fn random_address() -> String {
    format!("0x{}{}", Uuid::new_v4().simple(), &Uuid::new_v4().simple().to_string()[..8])
}

pub async fn run(args: BenchEvmScanArgs) -> anyhow::Result<()> {
    args.load.check(args.blocks)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new(&args.anvil)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--silent", "--no-mining"])
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", args.anvil))?;
    let anvil = NodeProcess::evm(child, format!("http://127.0.0.1:{port}"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let accounts = loop {
        if let Ok(v) = anvil.rpc("eth_accounts", json!([])).await {
            break v.as_array().cloned().unwrap_or_default();
        }
        ensure!(Instant::now() < deadline, "anvil never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ensure!(!accounts.is_empty(), "anvil has no dev accounts");

    // The chain: `blocks` blocks after the start, the transfers spread evenly over them.
    let receivers: Vec<String> = (0..args.load.transfers).map(|_| random_address()).collect();
    let start = anvil.rpc("eth_blockNumber", json!([])).await?;
    let start = u64::from_str_radix(start.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)?;
    let per_block = args.load.transfers.div_ceil(args.blocks as usize);
    let filling = Instant::now();
    let mut sent = 0usize;
    for _ in 0..args.blocks {
        for to in receivers.iter().skip(sent).take(per_block) {
            let from = &accounts[sent % accounts.len()];
            let tx =
                json!({"from": from, "to": to, "value": format!("0x{:x}", 1_000_000_000_000_000u64 + sent as u64)});
            anvil.rpc("eth_sendTransaction", json!([tx])).await?;
            sent += 1;
        }
        anvil.rpc("evm_mine", json!([])).await?;
    }
    let end = start + args.blocks;
    println!(
        "chain: {} blocks ({}..={end}) holding {sent} transfers, built in {:.1} s",
        args.blocks,
        start + 1,
        filling.elapsed().as_secs_f64()
    );

    let mut net = EvmNetworkConfig { rpc_url: anvil.url.clone(), ..Default::default() };
    net.fetch_concurrency = args.fetch_concurrency.unwrap_or(net.fetch_concurrency);
    let chain = EvmChain::new(
        domain::gates::find("ethereum").context("ethereum gate")?,
        std::sync::Arc::new(Rpc::new(&net)),
        None,
        0,
    )
    .fetching(net.fetch_concurrency);
    // Where the time goes: reading the blocks alone, in the scanner's batches, no database.
    let reading = Instant::now();
    let anvil_cpu = anvil.cpu_secs();
    let mut read = 0usize;
    let mut from = start + 1;
    while from <= end {
        let to = (from + args.load.batch - 1).min(end);
        read += workers::chain::Chain::transfers(&chain, from, to).await?.len();
        from = to + 1;
    }
    let secs = reading.elapsed().as_secs_f64();
    println!(
        "reading the blocks alone ({} in flight): {secs:.2} s, {:.0} transfers/s ({read} transfers)",
        net.fetch_concurrency,
        read as f64 / secs
    );
    // What the node itself spends serving them bounds any reader on the same machine.
    if let (Some(before), Some(after)) = (anvil_cpu, anvil.cpu_secs())
        && read > 0
    {
        let per_transfer = (after - before) / read as f64;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "anvil's own CPU serving them: {:.2} s, {:.0} µs/transfer: with all {cores} cores, anvil alone could serve at most {:.0} transfers/s",
            after - before,
            per_transfer * 1e6,
            cores as f64 / per_transfer.max(f64::MIN_POSITIVE)
        );
    }
    let watch = Watch { receivers: &receivers[..sent], another: &random_address, tagged_on: None };
    compare_watched(&args.load, "evm", &chain, &watch, (start, end), Some(EVM_GOAL_TPS)).await
}

/// The benchmark goal for EVM scanning: transfers recorded per second, for blocks full of transfers
/// against anvil.
const EVM_GOAL_TPS: f64 = 20_000.0;

/// Figures beside their goals, and with `--check` an error naming each one missed.
fn judge(load: &ScanLoad, lines: &[(String, bool)]) -> anyhow::Result<()> {
    for (line, met) in lines {
        println!("{line}: {}", if *met { "met" } else { "MISSED" });
    }
    let missed: Vec<&str> = lines.iter().filter(|(_, met)| !met).map(|(l, _)| l.as_str()).collect();
    ensure!(!load.check || missed.is_empty(), "goals missed: {}", missed.join("; "));
    Ok(())
}

/// What the invoices of a scan benchmark watch: the receivers first, then more from `another`.
/// Each is an address; with `tagged_on` (XRP: every deposit goes to the operator's one address)
/// each is a destination tag on that address instead.
pub(crate) struct Watch<'a> {
    pub receivers: &'a [String],
    pub another: &'a dyn Fn() -> String,
    pub tagged_on: Option<&'a str>,
}

/// Fresh database on `db_url` with `watched` invoices of `chain`'s gate in live watching what
/// `watch` lists, cursor at `start + 1`; scans to `end` in batches of `batch` blocks with the
/// scanner's own code and returns (seconds, payments recorded). Shared by the EVM and
/// `bench-scan` benchmarks.
pub(crate) async fn scan_once(
    chain: &dyn workers::chain::Chain,
    db_url: &str,
    watch: &Watch<'_>,
    watched: usize,
    (start, end): (u64, u64),
    batch: u64,
) -> anyhow::Result<(f64, usize)> {
    let config = Config { database_url: db_url.to_owned(), ..Config::default() };
    let db = domain::db::connect(&config).await?;
    domain::db::migrate(&db).await?;
    let merchant = domain::merchants::create_merchant(&db, "Bench", &Default::default()).await?.id;
    let now = Utc::now();
    let gate = chain.gate();
    let mut rows = Vec::with_capacity(1000);
    for i in 0..watched {
        let next = watch.receivers.get(i).cloned().unwrap_or_else(watch.another);
        let (address, tag) = match watch.tagged_on {
            Some(account) => (account, Some(next.as_str())),
            None => (next.as_str(), None),
        };
        rows.push(invoice::ActiveModel::from(watched_invoice(merchant, gate, address, tag, i, now)));
        if rows.len() == 1000 || i + 1 == watched {
            invoice::Entity::insert_many(std::mem::take(&mut rows)).exec_without_returning(&db).await?;
        }
    }
    let cursor = scan_cursor::Model {
        environment: Environment::Live,
        gate_id: gate.id.into(),
        next_height: (start + 1) as i64,
        updated_at: now,
    };
    scan_cursor::Entity::insert(scan_cursor::ActiveModel::from(cursor)).exec_without_returning(&db).await?;
    // Statistics as autovacuum keeps them on a running deployment (the watched set was bulk
    // loaded a moment ago): without them the planner takes the table for empty.
    db.execute_unprepared("ANALYZE").await?;
    let t = Instant::now();
    let mut scan = workers::scanner::Scanner::new(&db, chain, Environment::Live, batch);
    while let Some(r) = scan.next().await? {
        if r.to >= end {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let recorded = payment::Entity::find().count(&db).await? as usize;
    db.close().await?;
    Ok((secs, recorded))
}

/// Runs [`scan_once`] on a scratch database per watched count and prints one row each, then
/// the cost per transfer at the largest count against the smallest.
pub(crate) async fn compare_watched(
    load: &ScanLoad,
    label: &str,
    chain: &dyn workers::chain::Chain,
    watch: &Watch<'_>,
    range: (u64, u64),
    goal_tps: Option<f64>,
) -> anyhow::Result<()> {
    let (start, end) = range;
    let sent = watch.receivers.len();
    println!(
        "{:>10} {:>8} {:>10} {:>9} {:>10} {:>12} {:>14}",
        "watched", "blocks", "transfers", "seconds", "blocks/s", "transfers/s", "µs/transfer"
    );
    let mut per_transfer = Vec::new();
    let mut rates = Vec::new();
    for &watched in &load.watched {
        let name = format!("paygate_bench_{label}_{watched}");
        let (admin, url) = crate::bench::scratch_database(&load.pg, &name).await?;
        let result = scan_once(chain, &url, watch, watched, range, load.batch).await;
        admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
        let (secs, recorded) = result?;
        ensure!(recorded == sent, "recorded {recorded} payments of {sent} transfers with {watched} watched");
        let us = secs * 1e6 / sent as f64;
        per_transfer.push(us);
        rates.push(sent as f64 / secs);
        let blocks = end - start;
        println!(
            "{watched:>10} {blocks:>8} {sent:>10} {secs:>9.2} {:>10.0} {:>12.0} {us:>14.1}",
            blocks as f64 / secs,
            sent as f64 / secs
        );
    }
    let mut goals = Vec::new();
    if let (Some(first), Some(last)) = (per_transfer.first(), per_transfer.last()) {
        let (few, many) = (load.watched.first().copied().unwrap_or(0), load.watched.last().copied().unwrap_or(0));
        let ratio = last / first;
        goals.push((
            format!("cost per transfer {few} → {many} watched: {ratio:.2}× (goal ≤ {FLAT_COST_RATIO:.2}×, flat)"),
            ratio <= FLAT_COST_RATIO,
        ));
    }
    if let Some(goal) = goal_tps {
        let slowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
        goals.push((format!("slowest scan {slowest:.0} transfers/s (goal ≥ {goal:.0})"), slowest >= goal));
    }
    judge(load, &goals)
}

pub(crate) fn watched_invoice(
    merchant: Uuid,
    gate: &'static domain::gates::Gate,
    address: &str,
    tag: Option<&str>,
    i: usize,
    now: chrono::DateTime<Utc>,
) -> invoice::Model {
    invoice::Model {
        gate_id: Some(gate.id.into()),
        currency: Some(gate.asset.into()),
        network: Some(gate.network.into()),
        amount_requested: Some(Amount::new(rust_decimal::Decimal::ONE)),
        deposit_address: Some(address.to_owned()),
        deposit_address_tag: tag.map(str::to_owned),
        address_key: Some(domain::addresses::address_key(gate.family, address, tag)),
        derivation_index: Some(i as i64),
        expires_at: Some(now + chrono::Duration::hours(1)),
        ..invoice::Model::blank(Uuid::now_v7(), merchant, Environment::Live, now)
    }
}
