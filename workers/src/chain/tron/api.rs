//! The node's HTTP API (java-tron full node, or TronGrid-compatible): `POST <base>/<path>` with
//! a JSON body, retried with backoff.

use std::time::Duration;

use serde_json::Value;

use super::super::ChainError;
use super::super::retry::with_retries;
use domain::config::TronConfig;

/// A TRON node's HTTP API with retries.
pub struct TronApi {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    retries: u32,
    backoff: Duration,
}

impl TronApi {
    pub fn new(cfg: &TronConfig) -> TronApi {
        TronApi {
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(cfg.request_timeout_ms))
                .build()
                .unwrap_or_default(),
            base: cfg.api_url.trim_end_matches('/').to_owned(),
            api_key: cfg.api_key.as_ref().map(|k| k.0.clone()),
            retries: cfg.max_retries,
            backoff: Duration::from_millis(cfg.retry_backoff_ms),
        }
    }

    /// One call. Errors never hold the URL or the API key (`without_url`).
    async fn once(&self, path: &str, body: &Value) -> Result<Value, String> {
        let failed = |e: reqwest::Error| format!("{path}: {}", e.without_url());
        let mut req = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(key) = &self.api_key {
            req = req.header("TRON-PRO-API-KEY", key);
        }
        let r = req.send().await.map_err(failed)?;
        let status = r.status();
        if !status.is_success() {
            return Err(format!("{path}: HTTP {status}"));
        }
        let v: Value = r.json().await.map_err(failed)?;
        // java-tron answers some failures with 200 and `{"Error": "…"}`.
        if let Some(err) = v.get("Error") {
            return Err(format!("{path}: {err}"));
        }
        Ok(v)
    }

    /// Calls `path`, retrying failures `retries` times with doubling delays.
    pub async fn call(&self, path: &str, body: Value) -> Result<Value, ChainError> {
        with_retries("TRON API", self.retries, self.backoff, || self.once(path, &body)).await
    }
}
