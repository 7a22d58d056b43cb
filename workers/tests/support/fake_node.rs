//! The HTTP side of the fake chain nodes (`solana_node`, `tron_node`, `xrp_node`): one route
//! over the node's state, served on 127.0.0.1:0 until the node is dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::routing::MethodRouter;

/// A node's state, shared with its request handler.
pub type Shared<S> = Arc<Mutex<S>>;

pub struct FakeNode<S> {
    pub url: String,
    state: Shared<S>,
    calls: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl<S> Drop for FakeNode<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<S: Send + 'static> FakeNode<S> {
    /// Serves `handler` at `path` over `state`.
    pub async fn serve(state: S, path: &str, handler: MethodRouter<Shared<S>>) -> FakeNode<S> {
        let state = Arc::new(Mutex::new(state));
        let calls = Arc::new(AtomicU64::new(0));
        let counter = calls.clone();
        let count = middleware::from_fn(move |request: Request, next: Next| {
            counter.fetch_add(1, Ordering::SeqCst);
            next.run(request)
        });
        let app = Router::new().route(path, handler).route_layer(count).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeNode { url, state, calls, task }
    }

    /// API calls answered so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut S) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }
}

/// A fake node's chain, which grows by empty blocks (ledgers, slots).
pub trait Chain {
    fn extend_empty(&mut self, n: usize);
}

impl<S: Chain + Send + 'static> super::live::Node for FakeNode<S> {
    fn url(&self) -> String {
        self.url.clone()
    }

    async fn advance(&self, n: usize) {
        self.with(|chain| chain.extend_empty(n));
    }
}
