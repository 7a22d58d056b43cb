//! `ops bench-evm-scan`: the live EVM scanner over a chain built on a real node. Starts anvil
//! (`--anvil`, default `$ANVIL_BIN` or `anvil`), fills `--blocks` blocks with `--transfers` ETH
//! transfers (spread evenly, to distinct addresses), then for each `--watched` count scans those
//! blocks with the scanner's own code into a fresh PostgreSQL database watching that many
//! addresses (every receiver among them), and prints blocks/s, transfers/s and the cost per
//! transfer: wall clock, and the CPU time of the scanner's own process per transfer, with the
//! node's and PostgreSQL's CPU apart.
//!
//! By default the blocks are served by a recorded replay (`evm_replay`): every call the scanner
//! makes is asked of anvil once, anvil is stopped, and a separate process answers from memory,
//! so the node's cost (anvil spends several times the scanner's CPU per transfer) neither bounds
//! nor hides the scanner's. `--live-node` scans anvil itself, as the earlier figures did.
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

use crate::bench_node::{FLAT_COST_RATIO, NodeProcess, ScanLoad, own_cpu_secs, postgres_backends_cpu};

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
    /// Scan anvil itself instead of the recorded replay of its blocks (the default: blocks
    /// fetched from anvil once, then served from memory by a separate process).
    #[arg(long)]
    live_node: bool,
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

    // The node the scanner reads: anvil, or the replay of what the scanner asks of it.
    let (node, name) = if args.live_node {
        (anvil, "anvil")
    } else {
        let recording = Instant::now();
        let dir = tempfile::tempdir()?;
        let (path, size) = crate::evm_replay::record(&anvil, start + 1, end, dir.path()).await?;
        drop(anvil);
        let replay = crate::evm_replay::spawn(&path, dir)?;
        println!(
            "recorded: the tip and blocks {}..={end} (with and without transactions), {:.1} MB, in {:.1} s; anvil stopped, \
             blocks served from memory by the replay process",
            start + 1,
            size as f64 / 1e6,
            recording.elapsed().as_secs_f64()
        );
        (replay, "the replay")
    };

    let mut net = EvmNetworkConfig { rpc_url: node.url.clone(), ..Default::default() };
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
    let (node_cpu, own_cpu) = (node.cpu_secs(), own_cpu_secs());
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
    if let (Some(before), Some(after)) = (own_cpu, own_cpu_secs())
        && read > 0
    {
        println!(
            "the scanner's own CPU reading them (HTTP, JSON, decoding): {:.2} s, {:.1} µs/transfer",
            after - before,
            (after - before) * 1e6 / read as f64
        );
    }
    // What the node itself spends serving them bounds any reader on the same machine.
    if let (Some(before), Some(after)) = (node_cpu, node.cpu_secs())
        && read > 0
    {
        let per_transfer = (after - before) / read as f64;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "{name}'s own CPU serving them: {:.2} s, {:.1} µs/transfer: with all {cores} cores, {name} alone could serve at most {:.0} transfers/s",
            after - before,
            per_transfer * 1e6,
            cores as f64 / per_transfer.max(f64::MIN_POSITIVE)
        );
    }
    let watch = Watch { receivers: &receivers[..sent], another: &random_address, tagged_on: None };
    let goals = Goals { tps: Some(EVM_GOAL_TPS), cpu: Some((&node, name, EVM_GOAL_CPU_US)) };
    compare_watched_with(&args.load, "evm", &chain, &watch, (start, end), goals).await
}

/// The benchmark goal for EVM scanning: transfers recorded per second, for blocks full of transfers
/// against anvil.
const EVM_GOAL_TPS: f64 = 20_000.0;

/// The requirement on the scanner's own cost: at most 25 µs of its process's CPU time per
/// transfer (40,000 transfers/s per core), flat from 10,000 to 1,000,000 watched addresses, with
/// the node's and PostgreSQL's CPU counted apart.
const EVM_GOAL_CPU_US: f64 = 25.0;

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

/// What one scan cost: wall-clock seconds, payments recorded, and CPU seconds of the scanner's
/// own process, of the node (when measured) and of the PostgreSQL backends serving the scan.
pub(crate) struct ScanCost {
    pub secs: f64,
    pub recorded: usize,
    pub own_cpu: Option<f64>,
    pub node_cpu: Option<f64>,
    pub pg_cpu: Option<f64>,
}

/// Fresh database `name` on `db_url` with `watched` invoices of `chain`'s gate in live watching
/// what `watch` lists, cursor at `start + 1`; scans to `end` in batches of `batch` blocks with
/// the scanner's own code and returns what it cost ([`ScanCost`]; `node` is the process serving
/// the chain, if any). Shared by the EVM and `bench-scan` benchmarks.
pub(crate) async fn scan_once(
    chain: &dyn workers::chain::Chain,
    (db_url, name): (&str, &str),
    watch: &Watch<'_>,
    watched: usize,
    (start, end): (u64, u64),
    batch: u64,
    node: Option<&NodeProcess>,
) -> anyhow::Result<ScanCost> {
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
    let (own_before, node_before, pg_before) =
        (own_cpu_secs(), node.and_then(NodeProcess::cpu_secs), postgres_backends_cpu(name));
    let t = Instant::now();
    let mut scan = workers::scanner::Scanner::new(&db, chain, Environment::Live, batch);
    while let Some(r) = scan.next().await? {
        if r.to >= end {
            break;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let (own_after, node_after, pg_after) =
        (own_cpu_secs(), node.and_then(NodeProcess::cpu_secs), postgres_backends_cpu(name));
    let spent = |before: Option<f64>, after: Option<f64>| before.zip(after).map(|(b, a)| a - b);
    // A backend that started during the scan spent all its CPU on it.
    let pg_cpu = (!pg_after.is_empty())
        .then(|| pg_after.iter().map(|(pid, after)| after - pg_before.get(pid).copied().unwrap_or(0.0)).sum());
    let recorded = payment::Entity::find().count(&db).await? as usize;
    db.close().await?;
    Ok(ScanCost {
        secs,
        recorded,
        own_cpu: spent(own_before, own_after),
        node_cpu: spent(node_before, node_after),
        pg_cpu,
    })
}

/// The goals a scan comparison judges besides the flat cost: the slowest scan's transfers/s,
/// and (with the node serving the chain, its name, and the bound in µs) the scanner's own CPU per
/// transfer, which also prints the CPU columns.
pub(crate) struct Goals<'a> {
    pub tps: Option<f64>,
    pub cpu: Option<(&'a NodeProcess, &'a str, f64)>,
}

/// [`compare_watched_with`] judging the wall-clock goal `goal_tps` only.
pub(crate) async fn compare_watched(
    load: &ScanLoad,
    label: &str,
    chain: &dyn workers::chain::Chain,
    watch: &Watch<'_>,
    range: (u64, u64),
    goal_tps: Option<f64>,
) -> anyhow::Result<()> {
    compare_watched_with(load, label, chain, watch, range, Goals { tps: goal_tps, cpu: None }).await
}

/// Runs [`scan_once`] on a scratch database per watched count and prints one row each, then
/// the cost per transfer at the largest count against the smallest, and the goals' verdicts.
pub(crate) async fn compare_watched_with(
    load: &ScanLoad,
    label: &str,
    chain: &dyn workers::chain::Chain,
    watch: &Watch<'_>,
    range: (u64, u64),
    goals: Goals<'_>,
) -> anyhow::Result<()> {
    let (start, end) = range;
    let sent = watch.receivers.len();
    let node = goals.cpu.map(|(node, ..)| node);
    print!(
        "{:>10} {:>8} {:>10} {:>9} {:>10} {:>12} {:>14}",
        "watched", "blocks", "transfers", "seconds", "blocks/s", "transfers/s", "µs/transfer"
    );
    if let Some((_, name, _)) = goals.cpu {
        print!(" | CPU µs/transfer: {:>8} {:>12} {:>10}", "scanner", name, "PostgreSQL");
    }
    println!();
    let us_per = |secs: Option<f64>| secs.map(|s| s * 1e6 / sent as f64);
    let cell = |us: Option<f64>| us.map_or_else(|| "n/a".to_owned(), |us| format!("{us:.1}"));
    let mut per_transfer = Vec::new();
    let mut cpu_per_transfer = Vec::new();
    let mut rates = Vec::new();
    for &watched in &load.watched {
        let name = format!("paygate_bench_{label}_{watched}");
        let (admin, url) = crate::bench::scratch_database(&load.pg, &name).await?;
        let result = scan_once(chain, (&url, &name), watch, watched, range, load.batch, node).await;
        admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
        let cost = result?;
        let (secs, recorded) = (cost.secs, cost.recorded);
        ensure!(recorded == sent, "recorded {recorded} payments of {sent} transfers with {watched} watched");
        let us = secs * 1e6 / sent as f64;
        per_transfer.push(us);
        rates.push(sent as f64 / secs);
        let blocks = end - start;
        print!(
            "{watched:>10} {blocks:>8} {sent:>10} {secs:>9.2} {:>10.0} {:>12.0} {us:>14.1}",
            blocks as f64 / secs,
            sent as f64 / secs
        );
        if goals.cpu.is_some() {
            let own = us_per(cost.own_cpu);
            cpu_per_transfer.push(own.unwrap_or(f64::INFINITY));
            print!(
                " | CPU µs/transfer: {:>8} {:>12} {:>10}",
                cell(own),
                cell(us_per(cost.node_cpu)),
                cell(us_per(cost.pg_cpu))
            );
        }
        println!();
    }
    let (few, many) = (load.watched.first().copied().unwrap_or(0), load.watched.last().copied().unwrap_or(0));
    let mut lines = Vec::new();
    if let (Some(first), Some(last)) = (per_transfer.first(), per_transfer.last()) {
        let ratio = last / first;
        lines.push((
            format!("cost per transfer {few} → {many} watched: {ratio:.2}× (goal ≤ {FLAT_COST_RATIO:.2}×, flat)"),
            ratio <= FLAT_COST_RATIO,
        ));
    }
    if let Some((_, _, bound)) = goals.cpu {
        let worst = cpu_per_transfer.iter().copied().fold(0.0, f64::max);
        lines.push((format!("scanner CPU per transfer, worst {worst:.1} µs (goal ≤ {bound:.0} µs)"), worst <= bound));
        if let (Some(first), Some(last)) = (cpu_per_transfer.first(), cpu_per_transfer.last()) {
            let ratio = last / first;
            lines.push((
                format!(
                    "scanner CPU per transfer {few} → {many} watched: {ratio:.2}× (goal ≤ {FLAT_COST_RATIO:.2}×, flat)"
                ),
                ratio <= FLAT_COST_RATIO,
            ));
        }
    }
    if let Some(goal) = goals.tps {
        let slowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
        lines.push((format!("slowest scan {slowest:.0} transfers/s (goal ≥ {goal:.0})"), slowest >= goal));
    }
    judge(load, &lines)
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
