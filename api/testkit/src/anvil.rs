//! anvil (npm `@foundry-rs/anvil-linux-amd64`, binary in `$ANVIL_BIN` or on `PATH`) on a free
//! loopback port, for the EVM tests: JSON-RPC calls, mining, reorganisations, the test ERC-20.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A JSON-RPC quantity (`"0x…"`) as a number.
pub fn quantity(v: &Value) -> u128 {
    let hex = v.as_str().unwrap_or_else(|| panic!("not a quantity: {v}"));
    u128::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{hex}: {e}"))
}

pub fn anvil_bin() -> String {
    std::env::var("ANVIL_BIN").unwrap_or_else(|_| "anvil".into())
}

pub struct Anvil {
    _child: crate::serve::KillOnDrop,
    pub url: String,
    http: reqwest::Client,
    /// The first dev account (unlocked): sends deposits and deploys.
    pub from: String,
}

impl Anvil {
    pub async fn start() -> Anvil {
        let port = crate::fleet::free_port();
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
        let (url, http) = (format!("http://127.0.0.1:{port}"), reqwest::Client::new());
        let mut a = Anvil { _child: crate::serve::KillOnDrop(child), url, http, from: String::new() };
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
        quantity(&self.rpc("eth_blockNumber", json!([])).await) as u64
    }

    /// The nonce of the transaction `hash` (known to the node).
    pub async fn nonce_of(&self, hash: &str) -> u64 {
        quantity(&self.rpc("eth_getTransactionByHash", json!([hash])).await["nonce"]) as u64
    }

    /// Transactions `address` sent (its next nonce), in the latest block.
    pub async fn tx_count(&self, address: &str) -> u64 {
        quantity(&self.rpc("eth_getTransactionCount", json!([address, "latest"])).await) as u64
    }

    /// `address`'s balance in wei.
    pub async fn balance_of(&self, address: &str) -> u128 {
        quantity(&self.rpc("eth_getBalance", json!([address, "latest"])).await)
    }

    /// `holder`'s balance of the ERC-20 `token`, in base units.
    pub async fn token_balance_of(&self, token: &str, holder: &str) -> u128 {
        let data = format!("0x70a08231{:0>64}", holder.trim_start_matches("0x").to_ascii_lowercase());
        quantity(&self.rpc("eth_call", json!([{"to": token, "data": data}, "latest"])).await)
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
