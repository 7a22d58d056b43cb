//! `ops bench-scan --gate bitcoin`: the live Bitcoin scanner against real node software.
//! Starts a Litecoin Core regtest node (`--litecoind`, default `$LITECOIND` or
//! `/usr/lib/litecoin/litecoind`; the same JSON-RPC as Bitcoin Core), fills `--blocks` blocks
//! with `--transfers` payments to distinct P2WPKH outputs (one `sendmany` per block), then for
//! each `--watched` count scans those blocks with the scanner's own code into a fresh PostgreSQL
//! database watching that many addresses (every receiver among them), and prints blocks/s,
//! transfers/s and the cost per transfer, which should stay flat as the watched set grows.
//! Other gates: the EVM ones have `ops bench-evm-scan`; TRON, Solana and XRP have no real node
//! software here (docs/benchmarks.md).
//! Floats here are measurements (rates, microseconds), never money.
#![allow(clippy::float_arithmetic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use bitcoin::bech32::{Hrp, segwit};
use clap::Args;
use serde_json::{Value, json};

use crate::bench_node::{NodeProcess, ScanLoad};

#[derive(Args, Debug)]
pub struct BenchScanArgs {
    /// The gate to measure; `bitcoin` (against Litecoin Core regtest).
    #[arg(long, default_value = "bitcoin")]
    gate: String,
    #[arg(long, env = "LITECOIND", default_value = "/usr/lib/litecoin/litecoind")]
    litecoind: String,
    #[arg(long, default_value_t = 20)]
    blocks: u64,
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
    ensure!(args.gate == "bitcoin", "only --gate bitcoin has real node software here (EVM: ops bench-evm-scan)");
    args.load.check(args.blocks)?;
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
    mine(&node, 100 + args.blocks + 1).await?;

    let receivers: Vec<String> = (0..args.load.transfers).map(|_| random_address()).collect();
    let start = node.rpc("getblockcount", json!([])).await?.as_u64().context("block count")?;
    let per_block = args.load.transfers.div_ceil(args.blocks as usize);
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
    crate::bench_evm::compare_watched(
        &args.load.pg,
        "bitcoin",
        chain.as_ref(),
        &receivers,
        &args.load.watched,
        &random_address,
        (start, end),
        args.load.batch,
    )
    .await
}
