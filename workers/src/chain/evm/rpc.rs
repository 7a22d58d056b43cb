//! One JSON-RPC endpoint with retries, and the readers of its hex quantities.

use std::time::Duration;

use alloy_primitives::U256;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::super::ChainError;
use super::super::retry::with_retries;
use domain::config::EvmNetworkConfig;

/// A JSON-RPC endpoint with retries.
pub struct Rpc {
    /// What the node is, in logs ("EVM RPC", "Solana RPC").
    node: &'static str,
    http: reqwest::Client,
    url: String,
    retries: u32,
    backoff: Duration,
    /// HTTP basic auth (Bitcoin Core's `rpcuser`/`rpcauth`), the password never logged.
    auth: Option<(String, Option<String>)>,
}

/// A failed call: the node's JSON-RPC error object when it answered with one.
struct Failure {
    error: Option<Value>,
    message: String,
}

impl Rpc {
    pub fn new(cfg: &EvmNetworkConfig) -> Rpc {
        Rpc::with("EVM RPC", &cfg.rpc_url, cfg.request_timeout_ms, cfg.max_retries, cfg.retry_backoff_ms)
    }

    /// The `node` endpoint at `url`: each call times out after `timeout_ms` and is retried
    /// `retries` times, the delay doubling from `backoff_ms`.
    pub fn with(node: &'static str, url: &str, timeout_ms: u64, retries: u32, backoff_ms: u64) -> Rpc {
        Rpc {
            node,
            http: reqwest::Client::builder().timeout(Duration::from_millis(timeout_ms)).build().unwrap_or_default(),
            url: url.to_owned(),
            retries,
            backoff: Duration::from_millis(backoff_ms),
            auth: None,
        }
    }

    /// Sends HTTP basic auth with every call.
    pub fn with_basic_auth(mut self, user: &str, password: Option<&str>) -> Rpc {
        self.auth = Some((user.to_owned(), password.map(str::to_owned)));
        self
    }

    /// One call. Errors never hold the endpoint's URL: providers put API keys in it (a reqwest
    /// error's text names the URL, so it is dropped with `without_url`).
    async fn attempt(&self, method: &str, params: &Value) -> Result<Value, Failure> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let failed = |e: reqwest::Error| Failure { error: None, message: format!("{method}: {}", e.without_url()) };
        let mut request = self.http.post(&self.url).json(&body);
        if let Some((user, password)) = &self.auth {
            request = request.basic_auth(user, password.as_ref());
        }
        let r = request.send().await.map_err(failed)?;
        let status = r.status();
        // Bitcoin Core answers an RPC error with HTTP 500 and the error object in the body.
        let v: Option<Value> = r.json().await.ok();
        let v = match v {
            Some(v) if status.is_success() || v.get("error").is_some_and(|e| !e.is_null()) => v,
            _ => return Err(Failure { error: None, message: format!("{method}: HTTP {status}") }),
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(Failure { error: Some(err.clone()), message: format!("{method}: {err}") });
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }

    /// One call, no retry; a failure is its text (the node's error object, for classifying).
    pub(crate) async fn once(&self, method: &str, params: &Value) -> Result<Value, String> {
        self.attempt(method, params).await.map_err(|f| f.message)
    }

    /// One call, no retry: `Ok(Err(error))` when the node answered with a JSON-RPC error object
    /// (for classifying), `Err` (its text) when it did not answer.
    pub(crate) async fn answer(&self, method: &str, params: &Value) -> Result<Result<Value, Value>, String> {
        match self.attempt(method, params).await {
            Ok(v) => Ok(Ok(v)),
            Err(Failure { error: Some(error), .. }) => Ok(Err(error)),
            Err(Failure { error: None, message }) => Err(message),
        }
    }

    /// Calls `method`, retrying failures `retries` times with doubling delays.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ChainError> {
        Ok(self.call_or_none(method, params, &[]).await?.unwrap_or(Value::Null))
    }

    /// [`Rpc::call`], except that a JSON-RPC error whose code is in `none_codes` is an answer,
    /// `None` (e.g. Solana's "slot was skipped"), not a failure to retry.
    pub async fn call_or_none(
        &self,
        method: &str,
        params: Value,
        none_codes: &[i64],
    ) -> Result<Option<Value>, ChainError> {
        self.call_unless(method, params, |e| e["code"].as_i64().is_some_and(|c| none_codes.contains(&c))).await
    }

    /// [`Rpc::call`], except that a JSON-RPC error object `none` accepts is an answer, `None`
    /// (e.g. Solana's "could not find account"), not a failure to retry.
    pub async fn call_unless(
        &self,
        method: &str,
        params: Value,
        none: impl Fn(&Value) -> bool,
    ) -> Result<Option<Value>, ChainError> {
        with_retries(self.node, self.retries, self.backoff, || async {
            match self.attempt(method, &params).await {
                Ok(v) => Ok(Some(v)),
                Err(Failure { error: Some(e), .. }) if none(&e) => Ok(None),
                Err(e) => Err(e.message),
            }
        })
        .await
    }
}

pub(super) fn bad(what: &str, v: &Value) -> ChainError {
    ChainError::Unavailable(format!("unexpected {what} in RPC answer: {v}"))
}

pub(super) fn hex_u64(v: &Value, what: &str) -> Result<u64, ChainError> {
    v.as_str().and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()).ok_or_else(|| bad(what, v))
}

pub(super) fn hex_u256(v: &Value, what: &str) -> Result<U256, ChainError> {
    v.as_str().and_then(|s| U256::from_str_radix(s.trim_start_matches("0x"), 16).ok()).ok_or_else(|| bad(what, v))
}

/// `value` base units as a decimal amount with `decimals` places; `None` beyond 2^96.
pub fn amount(value: U256, decimals: u32) -> Option<Decimal> {
    let v: u128 = value.try_into().ok()?;
    Decimal::try_from_i128_with_scale(i128::try_from(v).ok()?, decimals).ok().map(|d| d.normalize())
}

pub(super) fn block_param(n: u64) -> Value {
    Value::String(format!("0x{n:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_keep_every_base_unit() {
        assert_eq!(amount(U256::from(1_500_000u64), 6), Some(Decimal::new(15, 1)));
        assert_eq!(amount(U256::from(10u64).pow(U256::from(18u64)), 18), Some(Decimal::ONE));
        assert_eq!(amount(U256::from(1u64), 18).unwrap().to_string(), "0.000000000000000001");
        assert_eq!(amount(U256::MAX, 18), None);
    }
}
