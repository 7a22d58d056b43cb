//! `ops bench-scan --gate <gate>`: the cost of a live non-EVM scanner per transfer as the
//! watched set grows. For each `--watched` count it scans the same blocks with the scanner's own
//! code (`scanner::Scanner`, the live adapter) into a fresh PostgreSQL database watching that many
//! addresses (every receiver among them), and prints blocks/s, transfers/s and the cost per
//! transfer, which should stay flat: matching is one indexed lookup per batch.
//!
//! - `bitcoin`: against real node software, a Litecoin Core regtest node (`--litecoind`,
//!   default `$LITECOIND` or `/usr/lib/litecoin/litecoind`; the same JSON-RPC as Bitcoin Core),
//!   filled with `--blocks` blocks (default 20) of `--transfers` payments to distinct P2WPKH
//!   outputs (one `sendmany` per block).
//! - `tron`, `tron_usdt`, `solana`, `solana_usdc`, `xrp`: no node software for these here
//!   (java-tron, a Solana validator, rippled), so against an in-process fake node
//!   (`bench_fakes`) whose `--blocks` blocks (default 200) hold the `--transfers` transfers,
//!   computed from the height: the figures are our scanner's cost (HTTP round trips to a
//!   local node, JSON decoding, matching, recording), not a node's throughput. XRP pays the
//!   operator's one address, invoices told apart by destination tag.
//!
//! The EVM gates have `ops bench-evm-scan` (anvil). Figures: docs/benchmarks.md.
//! Floats here are measurements (rates, microseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use bitcoin::bech32::{Hrp, segwit};
use clap::Args;
use serde_json::{Value, json};

use domain::chain::address::{AddressFamily, tron, xrp};
use domain::config::{SolanaConfig, TronConfig, XrpConfig};
use domain::gates;

use crate::bench_evm::{Watch, compare_watched};
use crate::bench_fakes::{self, Layout};
use crate::bench_node::{NodeProcess, ScanLoad};

/// The gates measured against an in-process fake node.
const FAKED: [&str; 5] = ["tron", "tron_usdt", "solana", "solana_usdc", "xrp"];

#[derive(Args, Debug)]
pub struct BenchScanArgs {
    /// The gate to measure: `bitcoin` (against Litecoin Core regtest), or `tron`, `tron_usdt`,
    /// `solana`, `solana_usdc`, `xrp` (against an in-process fake node).
    #[arg(long, default_value = "bitcoin")]
    gate: String,
    #[arg(long, env = "LITECOIND", default_value = "/usr/lib/litecoin/litecoind")]
    litecoind: String,
    /// Blocks holding the transfers; default 20 for bitcoin (mined by litecoind), 200 otherwise.
    #[arg(long)]
    blocks: Option<u64>,
    #[command(flatten)]
    load: ScanLoad,
}

/// Mines `n` blocks to a fresh address of the node's wallet.
async fn mine(node: &NodeProcess, n: u64) -> anyhow::Result<Value> {
    let to = node.rpc("getnewaddress", json!(["", "bech32"])).await?;
    node.rpc("generatetoaddress", json!([n, to])).await
}

/// A random mainnet P2WPKH address (what live invoices hold).
fn random_address() -> String {
    let program: [u8; 20] = rand::random();
    segwit::encode(Hrp::parse("bc").expect("hrp"), segwit::VERSION_0, &program).expect("a segwit address")
}

/// The same output script under Litecoin regtest's prefix.
fn regtest(address: &str) -> anyhow::Result<String> {
    let (_, version, program) = segwit::decode(address)?;
    Ok(segwit::encode(Hrp::parse("rltc")?, version, &program)?)
}

pub async fn run(args: BenchScanArgs) -> anyhow::Result<()> {
    match args.gate.as_str() {
        "bitcoin" => bitcoin(&args, args.blocks.unwrap_or(20)).await,
        gate if FAKED.contains(&gate) => faked(&args, args.blocks.unwrap_or(200)).await,
        other => anyhow::bail!("--gate {other}: expected bitcoin or one of {FAKED:?} (EVM: ops bench-evm-scan)"),
    }
}

async fn bitcoin(args: &BenchScanArgs, blocks: u64) -> anyhow::Result<()> {
    args.load.check(blocks)?;
    let dir = tempfile::tempdir()?;
    let free = || -> anyhow::Result<u16> { Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port()) };
    let (rpc_port, p2p_port) = (free()?, free()?);
    let child = Command::new(&args.litecoind)
        .arg("-regtest")
        .arg(format!("-datadir={}", dir.path().display()))
        .args(["-txindex=1", "-vbparams=mweb:-2:0", "-server=1", "-listen=0", "-fallbackfee=0.0002"])
        .args(["-rpcuser=bench", "-rpcpassword=bench", "-printtoconsole=0", "-maxtxfee=1"])
        .arg(format!("-rpcport={rpc_port}"))
        .arg(format!("-port={p2p_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} (apt-get install litecoind)", args.litecoind))?;
    let node = NodeProcess::bitcoin(child, format!("http://127.0.0.1:{rpc_port}/"), ("bench", "bench"), dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    while node.rpc("getblockcount", json!([])).await.is_err() {
        ensure!(Instant::now() < deadline, "litecoind never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    node.rpc("createwallet", json!(["bench"])).await?;
    // Spendable coins: one matured coinbase per later block.
    mine(&node, 100 + blocks + 1).await?;

    let receivers: Vec<String> = (0..args.load.transfers).map(|_| random_address()).collect();
    let start = node.rpc("getblockcount", json!([])).await?.as_u64().context("block count")?;
    let per_block = args.load.transfers.div_ceil(blocks as usize);
    let filling = Instant::now();
    for chunk in receivers.chunks(per_block) {
        let mut outputs = serde_json::Map::new();
        for (i, r) in chunk.iter().enumerate() {
            outputs.insert(regtest(r)?, json!(format!("0.0001{:04}", i % 10_000)));
        }
        node.rpc("sendmany", json!(["", outputs])).await?;
        mine(&node, 1).await?;
    }
    let end = node.rpc("getblockcount", json!([])).await?.as_u64().context("block count")?;
    println!(
        "chain: {} blocks ({}..={end}) holding {} transfers to watched outputs, built in {:.1} s",
        end - start,
        start + 1,
        receivers.len(),
        filling.elapsed().as_secs_f64()
    );

    let cfg = domain::config::BitcoinConfig {
        rpc_url: node.url.clone(),
        rpc_user: Some("bench".into()),
        rpc_password: Some(domain::config::Redacted("bench".into())),
        rescan_blocks: 0,
        mempool: false,
        ..Default::default()
    };
    let chain = workers::chain::bitcoin::chains(&cfg).into_iter().next().context("the bitcoin chain")?;
    let watch = Watch { receivers: &receivers, another: &random_address, tagged_on: None };
    compare_watched(&args.load, "bitcoin", chain.as_ref(), &watch, (start, end), None).await
}

/// A gate without node software here, against its fake node (`bench_fakes`).
async fn faked(args: &BenchScanArgs, blocks: u64) -> anyhow::Result<()> {
    args.load.check(blocks)?;
    let gate = domain::gates::find(&args.gate).context("unknown gate")?;
    let n = args.load.transfers;
    // An arbitrary height for the first empty block: the scan starts after it.
    let layout = Layout::new(1_000_000, blocks, n);
    let (node, chain, receivers, tagged_on) = match gate.family {
        AddressFamily::Tron => {
            let ids: Vec<[u8; 20]> = (0..n).map(|_| rand::random()).collect();
            let token = match gate.is_token {
                true => Some(gates::token_contract(gate).and_then(tron::account_id_of).context("USDT contract")?),
                false => None,
            };
            let node = bench_fakes::tron(layout, &ids, token).await?;
            let cfg = TronConfig { api_url: node.url.clone(), rescan_blocks: 0, ..Default::default() };
            let chain = workers::chain::tron::chains(&cfg);
            (node, chain, ids.iter().map(tron::address_of).collect::<Vec<_>>(), None)
        }
        AddressFamily::Solana => {
            let keys: Vec<[u8; 32]> = (0..n).map(|_| rand::random()).collect();
            let mint = gate.is_token.then(|| gates::token_contract(gate).map(str::to_owned)).flatten();
            let node = bench_fakes::solana(layout, &keys, mint).await?;
            let cfg = SolanaConfig { rpc_url: node.url.clone(), rescan_slots: 0, ..Default::default() };
            let chain = workers::chain::solana::chains(&cfg);
            (node, chain, keys.iter().map(|k| bs58::encode(k).into_string()).collect(), None)
        }
        AddressFamily::Xrp => {
            let operator = xrp::address_of(&rand::random());
            let node = bench_fakes::xrp(layout, operator.clone()).await?;
            let cfg = XrpConfig { rpc_url: node.url.clone(), ..Default::default() };
            let chain = workers::chain::xrp::chains(&cfg, Some(&operator));
            // Receiver `i` pays destination tag `i + 1`, the tag of derivation index `i`.
            (node, chain, (1..=n).map(|t| t.to_string()).collect(), Some(operator))
        }
        _ => anyhow::bail!("no fake node for {}", gate.id),
    };
    let chain = chain.into_iter().find(|c| c.gate().id == gate.id).context("the gate's live chain")?;
    println!(
        "chain: {blocks} blocks ({}..={}) holding {n} transfers ({} per block) from an in-process fake {} node at {}",
        layout.start + 1,
        layout.end,
        layout.per_block,
        gate.id,
        node.url
    );
    // More watched addresses (XRP: tags) past the receivers, all distinct.
    let next_tag = std::cell::Cell::new(n);
    let another = || -> String {
        match gate.family {
            AddressFamily::Tron => tron::address_of(&rand::random()),
            AddressFamily::Solana => bs58::encode(rand::random::<[u8; 32]>()).into_string(),
            _ => {
                next_tag.set(next_tag.get() + 1);
                next_tag.get().to_string()
            }
        }
    };
    let watch = Watch { receivers: &receivers, another: &another, tagged_on: tagged_on.as_deref() };
    let range = (layout.start, layout.end);
    compare_watched(&args.load, gate.id, chain.as_ref(), &watch, range, None).await
}
