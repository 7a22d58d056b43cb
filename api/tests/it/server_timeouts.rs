//! Operational hardening: the API listener's header read, request and idle timeouts, its connection cap,
//! graceful shutdown and `ConnectInfo`, over real sockets on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::routing::get;
use domain::config::ServerConfig;
use testkit::TestApp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// Far beyond any timeout used here: a condition not met by then is a failure.
const DEADLINE: Duration = Duration::from_secs(15);

/// Generous settings; each test shortens the one it exercises.
fn settings() -> ServerConfig {
    ServerConfig {
        header_read_timeout_ms: 10_000,
        request_timeout_ms: 10_000,
        idle_timeout_ms: 10_000,
        max_connections: 64,
        metrics_listen: None,
    }
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(app: Router, settings: ServerConfig) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            api::app::serve_router(listener, app, &settings, async {
                let _ = rx.await;
            })
            .await
        });
        Server { addr, stop: Some(tx), task }
    }
}

fn ok_router() -> Router {
    Router::new().route("/ok", get(|| async { "ok" }))
}

const GET_OK: &[u8] = b"GET /ok HTTP/1.1\r\nhost: t\r\n\r\n";

/// Reads one HTTP/1.1 response with a `content-length` body; returns its head and body.
async fn read_response(s: &mut TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return (head, String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).to_string());
            }
        }
        let n = tokio::time::timeout(DEADLINE, s.read(&mut chunk)).await.expect("response in time").expect("read");
        assert!(n > 0, "connection closed before a full response: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Waits (up to `DEADLINE`) until the server closes `s`; returns when it did.
async fn wait_closed(s: &mut TcpStream) -> Instant {
    let mut chunk = [0u8; 256];
    let until = Instant::now() + DEADLINE;
    loop {
        match tokio::time::timeout_at(until, s.read(&mut chunk)).await {
            Err(_) => panic!("the server did not close the connection within {DEADLINE:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return Instant::now(),
            Ok(Ok(_)) => continue,
        }
    }
}

async fn get_ok(addr: SocketAddr) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(GET_OK).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok");
}

#[tokio::test]
async fn slowloris_client_sending_headers_byte_by_byte_is_cut_off() {
    let server = Server::start(ok_router(), ServerConfig { header_read_timeout_ms: 300, ..settings() }).await;
    let s = TcpStream::connect(server.addr).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let started = Instant::now();
    // One byte every 50 ms of a header block that never ends: the client is always "sending".
    let writer = tokio::spawn(async move {
        let head = b"GET /ok HTTP/1.1\r\nhost: t\r\nx-slow: ";
        for b in head.iter().copied().chain(std::iter::repeat(b'a')) {
            if wr.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut chunk = [0u8; 256];
    let closed = loop {
        match tokio::time::timeout(DEADLINE, rd.read(&mut chunk)).await {
            Err(_) => panic!("a slowloris client held the connection for {DEADLINE:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => break Instant::now(),
            Ok(Ok(_)) => continue,
        }
    };
    writer.abort();
    assert!(closed - started >= Duration::from_millis(250), "closed before the timeout: {:?}", closed - started);
    // Others are still served.
    get_ok(server.addr).await;
}

#[tokio::test]
async fn idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let server = Server::start(ok_router(), ServerConfig { idle_timeout_ms: 300, ..settings() }).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    // Two requests on one connection: keep-alive works while the client is active.
    for _ in 0..2 {
        s.write_all(GET_OK).await.unwrap();
        let (head, _) = read_response(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    let answered = Instant::now();
    let closed = wait_closed(&mut s).await;
    assert!(closed - answered >= Duration::from_millis(250), "closed too early: {:?}", closed - answered);
}

#[tokio::test]
async fn connections_beyond_max_connections_wait_until_one_closes() {
    let server = Server::start(ok_router(), ServerConfig { max_connections: 1, ..settings() }).await;
    let mut first = TcpStream::connect(server.addr).await.unwrap();
    first.write_all(GET_OK).await.unwrap();
    read_response(&mut first).await;
    // The second connection is not served while the first (keep-alive) holds the only slot.
    let mut second = TcpStream::connect(server.addr).await.unwrap();
    second.write_all(GET_OK).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), second.read(&mut byte)).await;
    assert!(early.is_err(), "the second connection was served beyond max_connections: {early:?}");
    drop(first);
    let (head, body) = read_response(&mut second).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok");
}

/// A request that times out is 504 `request_timeout` (spec §7 keeps 503 for an offline gate).
#[tokio::test]
async fn handler_running_past_the_request_timeout_gets_504_request_timeout_envelope() {
    let app = ok_router().route("/slow", get(std::future::pending::<&'static str>));
    let server = Server::start(app, ServerConfig { request_timeout_ms: 300, ..settings() }).await;
    let http = reqwest::Client::new();
    let r = tokio::time::timeout(DEADLINE, http.get(format!("http://{}/slow", server.addr)).send())
        .await
        .expect("an answer, not a hung connection")
        .unwrap();
    assert_eq!(r.status(), 504);
    let header_id = r.headers().get("x-request-id").expect("x-request-id").to_str().unwrap().to_owned();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    assert_eq!(body["meta"]["request_id"], header_id.as_str(), "{body}");
    // A caller's own request id is kept.
    let r = http.get(format!("http://{}/slow", server.addr)).header("x-request-id", "mine-1").send().await.unwrap();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["meta"]["request_id"], "mine-1", "{body}");
    // Quick handlers are unaffected.
    let r = http.get(format!("http://{}/ok", server.addr)).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

/// Any operation can outlast the request timeout: `/openapi.json` lists 504 `request_timeout` on
/// every one, and no operation lists a timeout under 503 (kept for offline gates).
#[tokio::test]
async fn openapi_lists_504_request_timeout_on_every_operation() {
    let app = TestApp::spawn().await;
    let doc = app.get("/openapi.json", None).await;
    let paths = doc.body["paths"].as_object().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            let timeout = &op["responses"]["504"];
            assert!(timeout["description"].as_str().is_some_and(|d| d.contains("request_timeout")), "{method} {path}");
            assert_eq!(timeout["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorEnvelope");
            let unavailable = op["responses"]["503"]["description"].as_str().unwrap_or("");
            assert!(!unavailable.contains("timeout"), "{method} {path}: {unavailable}");
        }
    }
    assert!(operations >= 20, "{operations} operations");
}

#[tokio::test]
async fn normal_requests_are_unaffected_and_handlers_see_the_peer_address() {
    // The real API (`serve`, default `[server]` settings).
    let app = TestApp::spawn().await;
    for _ in 0..5 {
        let r = app.http.get(app.url("/health")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "ok");
    }
    let r = app.http.get(app.url("/v1/currencies?environment=test")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // ConnectInfo (the rate limiter's client IP) is the socket's peer.
    let echo =
        Router::new().route("/peer", get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.to_string() }));
    let server = Server::start(echo, settings()).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    let local = s.local_addr().unwrap();
    s.write_all(b"GET /peer HTTP/1.1\r\nhost: t\r\n\r\n").await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, local.to_string());
}

#[tokio::test]
async fn graceful_shutdown_lets_an_in_flight_request_finish() {
    let entered = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let app = {
        let (entered, release) = (entered.clone(), release.clone());
        ok_router().route(
            "/slow",
            get(move || async move {
                entered.notify_one();
                release.notified().await;
                "finished"
            }),
        )
    };
    let mut server = Server::start(app, settings()).await;
    let mut s = TcpStream::connect(server.addr).await.unwrap();
    s.write_all(b"GET /slow HTTP/1.1\r\nhost: t\r\n\r\n").await.unwrap();
    tokio::time::timeout(DEADLINE, entered.notified()).await.expect("the handler started");
    server.stop.take().unwrap().send(()).unwrap();
    // The server keeps running while the request is in flight...
    let early = tokio::time::timeout(Duration::from_millis(300), &mut server.task).await;
    assert!(early.is_err(), "the server stopped with a request in flight");
    release.notify_one();
    // ...which completes, after which the server stops and accepts nothing new.
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "finished");
    tokio::time::timeout(DEADLINE, &mut server.task).await.expect("server stopped").unwrap().unwrap();
    assert!(TcpStream::connect(server.addr).await.is_err(), "still accepting after shutdown");
}
