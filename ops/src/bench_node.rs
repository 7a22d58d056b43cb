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

/// CPU time (user + system, all threads) process `pid` (a number, or `self`) has used so far,
/// from `/proc/<pid>/stat`; `None` off Linux or once the process is gone.
pub fn process_cpu_secs(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = rest.get(11)?.parse::<f64>().ok()? + rest.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks())
}

/// Clock ticks per second of `/proc`'s CPU times (`getconf CLK_TCK`, else the usual 100).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse::<f64>().ok())
            .unwrap_or(100.0)
    })
}

/// CPU time this process (the scanner under measurement) has used so far, user + system, all
/// threads, from `/proc/self/stat`.
pub fn own_cpu_secs() -> Option<f64> {
    process_cpu_secs("self")
}

/// CPU time used so far by the PostgreSQL backends connected to `database` (their process
/// title names it: `postgres: [<cluster>:] <user> <database> <client> <state>`), by process id; summed over
/// the processes alive at both readings it is what they spent between them. PostgreSQL's
/// background processes (WAL writer, checkpointer) are not counted.
pub fn postgres_backends_cpu(database: &str) -> std::collections::HashMap<u32, f64> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let title = String::from_utf8_lossy(&cmdline);
        // After `postgres:` and, on Debian, the cluster (`15/main:`): the user, then the database.
        let mut words = title.split([' ', '\0']).filter(|w| !w.is_empty());
        if words.next() != Some("postgres:") || !words.take(3).any(|w| w == database) {
            continue;
        }
        if let Some(cpu) = process_cpu_secs(&pid.to_string()) {
            out.insert(pid, cpu);
        }
    }
    out
}

impl NodeProcess {
    /// CPU time the node process has used so far (user + system, all its threads), from
    /// `/proc/<pid>/stat`; `None` off Linux.
    pub fn cpu_secs(&self) -> Option<f64> {
        process_cpu_secs(&self.child.id().to_string())
    }

    pub fn evm(child: Child, url: String) -> NodeProcess {
        NodeProcess { child, url, http: reqwest::Client::new(), auth: None, jsonrpc: "2.0", _dir: None }
    }

    /// A node process whose files live in `dir` until it is gone (the EVM replay and its recording).
    pub fn replay(child: Child, url: String, dir: tempfile::TempDir) -> NodeProcess {
        NodeProcess { child, url, http: reqwest::Client::new(), auth: None, jsonrpc: "2.0", _dir: Some(dir) }
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
