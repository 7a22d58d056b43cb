//! A backend wrapper that keeps a half-done fetch moving while its worker drains.
//!
//! apalis 1.0 polls a backend's fetch only while the worker takes jobs. A worker paused for a
//! graceful stop does not, so a fetch that was half-way when the pause came would wait, unpolled,
//! until the stop. On the SQLite queue that fetch is a transaction (`BEGIN`, `UPDATE …
//! RETURNING`, `COMMIT`) holding the database's write lock: a job still running that enqueues a
//! follow-up would wait on it for the whole busy timeout (30 s), then fail. [`Draining`] polls
//! such a fetch from `poll_ready`, which apalis still calls while the worker is paused, so the
//! transaction commits and releases the lock.

use std::task::{Context, Poll};

use apalis::prelude::{Backend, WorkerContext};
use apalis_core::backend::{BackendConfig, WireFormatBackend};

pub(super) struct Draining<B: Backend> {
    inner: B,
    /// The inner backend's last `poll_next` was `Pending`: a fetch may be half-way.
    fetching: bool,
    /// What that fetch ended with while the worker was paused, handed out first if it takes jobs
    /// again. A worker pauses only to stop, so a task here is not run by it: it stays claimed by
    /// this worker and runs again once the worker's heartbeat has lapsed, as after a crash.
    finished: Option<Option<Result<B::Task, B::Error>>>,
}

impl<B: Backend> Draining<B> {
    pub(super) fn new(inner: B) -> Draining<B> {
        Draining { inner, fetching: false, finished: None }
    }
}

impl<B: Backend> Backend for Draining<B> {
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(&mut self, cx: &mut Context<'_>, worker: &WorkerContext) -> Poll<Result<(), B::Error>> {
        let ready = self.inner.poll_ready(cx, worker);
        if self.fetching
            && self.finished.is_none()
            && worker.is_paused()
            && matches!(ready, Poll::Ready(Ok(())))
            && let Poll::Ready(next) = self.inner.poll_next(cx, worker)
        {
            self.fetching = false;
            self.finished = Some(next);
        }
        ready
    }

    fn poll_next(&mut self, cx: &mut Context<'_>, worker: &WorkerContext) -> Poll<Option<Result<B::Task, B::Error>>> {
        if let Some(next) = self.finished.take() {
            return Poll::Ready(next);
        }
        let next = self.inner.poll_next(cx, worker);
        self.fetching = next.is_pending();
        next
    }

    fn poll_close(&mut self, cx: &mut Context<'_>, worker: &WorkerContext) -> Poll<Result<(), B::Error>> {
        self.inner.poll_close(cx, worker)
    }
}

impl<B: Backend + BackendConfig> BackendConfig for Draining<B> {
    type Id = B::Id;
    type Args = B::Args;
    type Kind = B::Kind;
    type Config = B::Config;
    type Layer = B::Layer;

    fn config(&self) -> &B::Config {
        self.inner.config()
    }

    fn middleware(&mut self, worker: &mut WorkerContext) -> B::Layer {
        self.inner.middleware(worker)
    }
}

impl<B: Backend + WireFormatBackend> WireFormatBackend for Draining<B> {
    type Codec = B::Codec;
    type Compact = B::Compact;

    fn codec(&self) -> &B::Codec {
        self.inner.codec()
    }
}
