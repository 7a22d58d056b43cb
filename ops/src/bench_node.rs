//! A node process a scan benchmark starts (anvil, litecoind) and talks JSON-RPC to; killed when
//! dropped.

use std::process::Child;

use serde_json::{Value, json};

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
