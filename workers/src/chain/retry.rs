//! Retrying a node call: what every adapter's client does with a failed request.

use std::future::Future;
use std::time::Duration;

use super::ChainError;

/// Runs `call` until it succeeds, at most `1 + retries` times, the delay doubling from `backoff`
/// (at most 30 s) between failures, each logged as a failed `node` call ("EVM RPC", "TRON
/// API"…). The last failure's text becomes `ChainError::Unavailable`; the caller's job retries
/// the whole step later, from where it stood.
pub async fn with_retries<T, Fut>(
    node: &str,
    retries: u32,
    backoff: Duration,
    mut call: impl FnMut() -> Fut,
) -> Result<T, ChainError>
where
    Fut: Future<Output = Result<T, String>>,
{
    let mut delay = backoff;
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt >= retries => return Err(ChainError::Unavailable(e)),
            Err(e) => {
                tracing::warn!(error = %e, attempt, "{node} call failed; retrying");
                tokio::time::sleep(delay).await;
                delay = delay.saturating_mul(2).min(Duration::from_secs(30));
                attempt += 1;
            }
        }
    }
}
