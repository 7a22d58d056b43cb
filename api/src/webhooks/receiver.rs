//! A webhook receiver that verifies every delivery the way a merchant should (the signature
//! with [`signature::verify`], the 300 s tolerance) and records what arrived. It backs the
//! tests, the delivery benchmark, and local development (`ops webhooks listen`). Each request
//! is answered by the next scripted [`Behaviour`], then by the default one.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;

use domain::webhooks::{DELIVERY_HEADER, signature};

/// How the receiver answers one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// 200 after this delay.
    Ok(Duration),
    /// This status at once, with a short body.
    Status(u16),
    /// 429 with `Retry-After: <secs>`.
    TooManyRequests(u64),
    /// Sleep this long before answering 200 (past the deliverer's timeout: a slow endpoint).
    Hang(Duration),
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: DateTime<Utc>,
    pub delivery_id: String,
    pub event: String,
    pub body: Value,
    /// The signature and timestamp verified with one of the receiver's secrets.
    pub verified: bool,
    /// What the receiver answered.
    pub answered: u16,
}

struct Inner {
    secrets: Mutex<Vec<String>>,
    script: Mutex<VecDeque<Behaviour>>,
    default: Mutex<Behaviour>,
    received: Mutex<Vec<Received>>,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Receiver {
    /// Listens on `addr` (`127.0.0.1:0` for any free port), verifying with `secrets`.
    pub async fn start(addr: SocketAddr, secrets: &[&str], default: Behaviour) -> std::io::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner {
            secrets: Mutex::new(secrets.iter().map(|s| (*s).to_owned()).collect()),
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(default),
            received: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new().fallback(axum::routing::post(handle)).with_state(inner.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Receiver { addr, inner, stop: Some(stop), task: Some(task) })
    }

    pub fn url(&self) -> String {
        format!("http://{}/webhooks", self.addr)
    }

    /// Answers for the next requests, in order.
    pub fn script(&self, behaviours: impl IntoIterator<Item = Behaviour>) {
        self.inner.script.lock().expect("lock").extend(behaviours);
    }

    pub fn set_default(&self, b: Behaviour) {
        *self.inner.default.lock().expect("lock") = b;
    }

    pub fn set_secrets(&self, secrets: &[&str]) {
        *self.inner.secrets.lock().expect("lock") = secrets.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().expect("lock").clone()
    }

    pub fn count(&self) -> usize {
        self.inner.received.lock().expect("lock").len()
    }
}

async fn handle(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    let now = Utc::now();
    let header = headers.get(signature::HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let verified = {
        let secrets = inner.secrets.lock().expect("lock");
        let keys: Vec<&[u8]> = secrets.iter().map(String::as_bytes).collect();
        signature::verify(header, &body, &keys, now.timestamp(), signature::TOLERANCE_SECS).is_ok()
    };
    let behaviour = {
        let next = inner.script.lock().expect("lock").pop_front();
        next.unwrap_or_else(|| inner.default.lock().expect("lock").clone())
    };
    let answered = match (&behaviour, verified) {
        (_, false) => 400,
        (Behaviour::Ok(_) | Behaviour::Hang(_), true) => 200,
        (Behaviour::Status(s), true) => *s,
        (Behaviour::TooManyRequests(_), true) => 429,
    };
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let record = Received {
        at: now,
        delivery_id: headers.get(DELIVERY_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
        event: parsed["event"].as_str().unwrap_or_default().to_owned(),
        body: parsed,
        verified,
        answered,
    };
    inner.received.lock().expect("lock").push(record);
    let status = StatusCode::from_u16(answered).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match behaviour {
        _ if !verified => (status, "signature rejected").into_response(),
        Behaviour::Ok(d) | Behaviour::Hang(d) => {
            if !d.is_zero() {
                tokio::time::sleep(d).await;
            }
            (status, "ok").into_response()
        }
        Behaviour::Status(_) => (status, "receiver failure").into_response(),
        Behaviour::TooManyRequests(secs) => (status, [("retry-after", secs.to_string())], "slow down").into_response(),
    }
}
