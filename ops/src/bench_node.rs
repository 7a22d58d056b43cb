//! What the scan benchmarks (`bench-evm-scan`, `bench-scan`) share: the node process they start
//! (anvil, litecoind) and talk JSON-RPC to, killed when dropped, and the load options.
//! Floats here are measurements (CPU seconds), never money.
#![allow(clippy::float_arithmetic)]

use std::process::Child;

use serde_json::{Value, json};

/// The load of a scan benchmark, besides its block count.
#[derive(clap::Args, Debug)]
pub struct ScanLoad {
    /// Server URL of PostgreSQL (without database); scratch databases are created on it.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pub pg: String,
    #[arg(long, default_value_t = 10_000)]
    pub transfers: usize,
    /// Watched-address counts to compare (each at least `--transfers`).
    #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000])]
    pub watched: Vec<usize>,
    /// Blocks per scan batch.
    #[arg(long, default_value_t = 100)]
    pub batch: u64,
    /// Exit non-zero when a figure misses its goal (printed beside it either way).
    #[arg(long)]
    pub check: bool,
}

/// The benchmark goal for the cost per transfer as the watched set grows: flat, within the
/// run-to-run noise of a shared 2-core machine.
pub const FLAT_COST_RATIO: f64 = 1.25;

impl ScanLoad {
    /// Refuses a load that measures nothing or watches fewer addresses than it pays.
    pub fn check(&self, blocks: u64) -> anyhow::Result<()> {
        anyhow::ensure!(blocks > 0 && self.transfers > 0, "--blocks and --transfers must be positive");
        anyhow::ensure!(
            self.watched.iter().all(|w| *w >= self.transfers),
            "every --watched count must be at least --transfers"
        );
        Ok(())
    }
}

pub struct NodeProcess {
    pub child: Child,
    pub url: String,
    http: reqwest::Client,
    /// HTTP basic auth (Bitcoin Core's `rpcuser`/`rpcpassword`).
    auth: Option<(&'static str, &'static str)>,
    /// `"2.0"` (EVM) or `"1.0"` (Bitcoin Core).
    jsonrpc: &'static str,
    /// Kept until the node is gone (its data directory).
    _dir: Option<tempfile::TempDir>,
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl NodeProcess {
    /// CPU time the node process has used so far (user + system, all its threads), from
    /// `/proc/<pid>/stat`; `None` off Linux.
    pub fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
        let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: f64 = rest.get(11)?.parse::<f64>().ok()? + rest.get(12)?.parse::<f64>().ok()?;
        let per_sec = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
            .unwrap_or(100.0);
        Some(ticks / per_sec)
    }

    pub fn evm(child: Child, url: String) -> NodeProcess {
        NodeProcess { child, url, http: reqwest::Client::new(), auth: None, jsonrpc: "2.0", _dir: None }
    }

    pub fn bitcoin(
        child: Child,
        url: String,
        auth: (&'static str, &'static str),
        dir: tempfile::TempDir,
    ) -> NodeProcess {
        NodeProcess { child, url, http: reqwest::Client::new(), auth: Some(auth), jsonrpc: "1.0", _dir: Some(dir) }
    }

    pub async fn rpc(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let body = json!({"jsonrpc": self.jsonrpc, "id": 1, "method": method, "params": params});
        let mut req = self.http.post(&self.url).json(&body);
        if let Some((user, password)) = self.auth {
            req = req.basic_auth(user, Some(password));
        }
        let v: Value = req.send().await?.json().await?;
        match v.get("error") {
            Some(e) if !e.is_null() => anyhow::bail!("{method}: {e}"),
            _ => Ok(v["result"].clone()),
        }
    }
}
