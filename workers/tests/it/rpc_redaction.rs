//! Live deposit safety: provider API keys live in RPC and rates URLs, so a failing call must never
//! put its URL (nor the secret in its path or query) into an error or a log line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use domain::config::{EvmNetworkConfig, RatesConfig, RatesSourceConfig};
use domain::rates::{Provider, Rates};
use entity::Environment;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use workers::chain::evm::Rpc;

const SECRET: &str = "sEcReTkEy0123456789";

/// Log lines written by the test's subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(logs.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

/// A port nothing listens on (bound, then released).
async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

/// A server answering every request with `200 OK` and a body that is not JSON.
async fn garbage_server() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await;
                let body = "not json at all";
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    port
}

/// Neither the secret (path or query) nor the URL; the host and port alone are no secret (the
/// HTTP client's own trace lines name them).
fn assert_clean(what: &str, text: &str, port: u16) {
    assert!(!text.contains(SECRET), "{what} shows the secret: {text}");
    assert!(!text.contains(&format!("http://127.0.0.1:{port}/")), "{what} shows the URL: {text}");
    assert!(!text.contains("apikey="), "{what} shows the URL's query: {text}");
}

fn rpc(port: u16) -> Rpc {
    Rpc::new(&EvmNetworkConfig {
        rpc_url: format!("http://127.0.0.1:{port}/v3/{SECRET}?apikey={SECRET}"),
        request_timeout_ms: 2_000,
        max_retries: 1,
        retry_backoff_ms: 1,
        ..EvmNetworkConfig::default()
    })
}

#[tokio::test(flavor = "current_thread")]
async fn rpc_errors_never_show_the_url_or_its_secret() {
    let (logs, _guard) = capture();
    // Connection refused, then an answer that is not JSON: both reqwest errors name the URL.
    for port in [closed_port().await, garbage_server().await] {
        let err = rpc(port).call("eth_blockNumber", json!([])).await.expect_err("the call fails");
        let text = err.to_string();
        assert!(text.contains("eth_blockNumber"), "the error says what failed: {text}");
        assert_clean("the RPC error", &text, port);
        let logged = logs.text();
        assert!(logged.contains("EVM RPC call failed"), "the retry is logged: {logged}");
        assert_clean("the RPC log", &logged, port);
    }
}

fn rates_source(port: u16) -> RatesSourceConfig {
    RatesSourceConfig {
        url: format!("http://127.0.0.1:{port}/api/{SECRET}"),
        request_timeout_secs: 2,
        ..RatesConfig::default().live
    }
}

#[tokio::test(flavor = "current_thread")]
async fn rates_errors_never_show_the_url_or_its_secret() {
    let (logs, _guard) = capture();
    for port in [closed_port().await, garbage_server().await] {
        let err = Provider::from_config(&rates_source(port)).fetch().await.expect_err("the fetch fails");
        let text = err.to_string();
        assert!(text.contains("rates"), "{text}");
        assert_clean("the rates error", &text, port);
        assert_clean("the rates error (debug)", &format!("{err:?}"), port);
        // The background refresher logs the failure.
        let rates = Rates::new(&RatesConfig { test: rates_source(port), live: rates_source(port) });
        // Nothing fetched, nothing published: the database is never written.
        let db = sea_orm::Database::connect("sqlite::memory:").await.expect("an in-memory database");
        rates.start(&db).await;
        assert!(rates.list(Environment::Live, None, None).is_empty());
        let logged = logs.text();
        assert!(logged.contains("initial rates refresh failed"), "the failure is logged: {logged}");
        assert_clean("the rates log", &logged, port);
    }
}
