//! anvil (npm `@foundry-rs/anvil-linux-amd64`, binary in `$ANVIL_BIN` or on `PATH`) on a free
//! loopback port, for the EVM tests: JSON-RPC calls, mining, reorganisations, the test ERC-20.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn anvil_bin() -> String {
    std::env::var("ANVIL_BIN").unwrap_or_else(|_| "anvil".into())
}

pub struct Anvil {
    child: Child,
    pub url: String,
    http: reqwest::Client,
    /// The first dev account (unlocked): sends deposits and deploys.
    pub from: String,
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Anvil {
    pub async fn start() -> Anvil {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(anvil_bin())
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--silent"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "start anvil ({}): {e}; install with `npm install @foundry-rs/anvil-linux-amd64` and set ANVIL_BIN",
                    anvil_bin()
                )
            });
        let mut a =
            Anvil { child, url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new(), from: String::new() };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(v) = a.try_rpc("eth_accounts", json!([])).await {
                a.from = v[0].as_str().unwrap().to_owned();
                return a;
            }
            assert!(Instant::now() < deadline, "anvil never answered on {}", a.url);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = self.http.post(&self.url).json(&body).send().await.map_err(|e| e.to_string())?;
        let v: Value = r.json().await.map_err(|e| e.to_string())?;
        match v.get("error") {
            Some(e) => Err(e.to_string()),
            None => Ok(v["result"].clone()),
        }
    }

    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params).await.unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    pub async fn tip(&self) -> u64 {
        let v = self.rpc("eth_blockNumber", json!([])).await;
        u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }

    pub async fn mine(&self, n: u64) {
        self.rpc("anvil_mine", json!([format!("0x{n:x}")])).await;
    }

    /// Sends a transaction from the first dev account (mined at once); returns its hash.
    pub async fn send(&self, tx: Value) -> String {
        let mut tx = tx;
        tx["from"] = json!(self.from);
        let hash = self.rpc("eth_sendTransaction", json!([tx])).await.as_str().unwrap().to_owned();
        self.receipt(&hash).await;
        hash
    }

    /// The receipt, once the (auto-mined) transaction is in a block.
    pub async fn receipt(&self, hash: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.rpc("eth_getTransactionReceipt", json!([hash])).await;
            if !r.is_null() {
                return r;
            }
            assert!(Instant::now() < deadline, "{hash} never mined");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn send_eth(&self, to: &str, wei: u128) -> String {
        self.send(json!({"to": to, "value": format!("0x{wei:x}")})).await
    }

    /// Deploys the test ERC-20 with `supply` base units to the dev account.
    pub async fn deploy_token(&self, supply: u128) -> String {
        let code = include_str!("../evm/TestToken.bin").trim();
        let data = format!("0x{code}{supply:064x}");
        let hash = self.send(json!({"data": data, "gas": "0x200000"})).await;
        self.receipt(&hash).await["contractAddress"].as_str().unwrap().to_owned()
    }

    pub async fn send_token(&self, token: &str, to: &str, units: u128) -> String {
        let data = format!("0xa9059cbb{:0>64}{units:064x}", to.trim_start_matches("0x"));
        self.send(json!({"to": token, "data": data, "gas": "0x100000"})).await
    }

    /// Replaces the last `depth` blocks with empty ones: their transactions leave the chain.
    pub async fn reorg(&self, depth: u64) {
        self.rpc("anvil_reorg", json!([depth, []])).await;
    }
}
