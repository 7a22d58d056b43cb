//! One JSON-RPC endpoint with retries, and the readers of its hex quantities.

use std::time::Duration;

use alloy_primitives::U256;
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::super::ChainError;
use domain::config::EvmNetworkConfig;

/// A JSON-RPC endpoint with retries.
pub struct Rpc {
    http: reqwest::Client,
    url: String,
    retries: u32,
    backoff: Duration,
}

impl Rpc {
    pub fn new(cfg: &EvmNetworkConfig) -> Rpc {
        Rpc {
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(cfg.request_timeout_ms))
                .build()
                .unwrap_or_default(),
            url: cfg.rpc_url.clone(),
            retries: cfg.max_retries,
            backoff: Duration::from_millis(cfg.retry_backoff_ms),
        }
    }

    /// One call. Errors never hold the endpoint's URL: providers put API keys in it (a reqwest
    /// error's text names the URL, so it is dropped with `without_url`).
    pub(crate) async fn once(&self, method: &str, params: &Value) -> Result<Value, String> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let failed = |e: reqwest::Error| format!("{method}: {}", e.without_url());
        let r = self.http.post(&self.url).json(&body).send().await.map_err(failed)?;
        let status = r.status();
        if !status.is_success() {
            return Err(format!("{method}: HTTP {status}"));
        }
        let v: Value = r.json().await.map_err(failed)?;
        if let Some(err) = v.get("error") {
            return Err(format!("{method}: {err}"));
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }

    /// Calls `method`, retrying failures `retries` times with doubling delays.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ChainError> {
        let mut delay = self.backoff;
        let mut attempt = 0;
        loop {
            match self.once(method, &params).await {
                Ok(v) => return Ok(v),
                Err(e) if attempt >= self.retries => return Err(ChainError::Unavailable(e)),
                Err(e) => {
                    tracing::warn!(error = %e, attempt, "EVM RPC call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = delay.saturating_mul(2).min(Duration::from_secs(30));
                    attempt += 1;
                }
            }
        }
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
