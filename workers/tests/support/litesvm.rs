//! The LiteSVM Solana node (`support/solana_shim.py`, solders 0.29): real System, SPL Token and
//! Associated Token Account programs behind the JSON-RPC methods the live adapter calls, started
//! per test on 127.0.0.1:0 and stopped when dropped. Needs `python3` (or `$PYTHON`) with
//! `solders==0.29.0` (`.ci/run` installs it); a missing interpreter or package fails the test.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

pub struct LiteSvm {
    _child: testkit::serve::KillOnDrop,
    pub url: String,
    http: reqwest::Client,
}

impl LiteSvm {
    pub async fn start() -> LiteSvm {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/solana_shim.py");
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(&python)
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {python} {script}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let child = testkit::serve::KillOnDrop(child);
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await
        .unwrap()
        .unwrap();
        let port = line.trim().strip_prefix("port ").unwrap_or_else(|| {
            panic!("the LiteSVM shim did not start (is `pip install solders==0.29.0` done?): {line:?}")
        });
        LiteSvm { _child: child, url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() }
    }

    /// A JSON-RPC call; an error answer fails the test.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let v: Value = self.http.post(&self.url).json(&body).send().await.unwrap().json().await.unwrap();
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// Sets a switch of the shim (`losing`, `fork`, `first_held`).
    pub async fn set(&self, switch: &str, value: Value) {
        self.call("shim_set", json!([switch, value])).await;
    }

    pub async fn produce(&self, n: usize) {
        self.call("shim_produce", json!([n])).await;
    }

    pub async fn finalize(&self) {
        self.call("shim_finalize", json!([])).await;
    }

    /// `address`'s lamports.
    pub async fn lamports(&self, address: &str) -> u64 {
        self.call("shim_balance", json!([address])).await.as_u64().unwrap()
    }

    /// The units of the test mint in `owner`'s associated token account (0 without one).
    pub async fn token_units(&self, owner: &str) -> u64 {
        self.call("shim_tokenUnits", json!([owner])).await.as_u64().unwrap()
    }
}

impl super::live::Node for LiteSvm {
    fn url(&self) -> String {
        self.url.clone()
    }

    async fn advance(&self, n: usize) {
        self.produce(n).await;
    }
}
