//! The job platform end to end, on SQLite by default and on Redis with `--features redis-tests`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::common::{Running, TestQueues, eventually, metric, stage};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use workers::platform::{self, Job, JobCtx, JobError, Runtime, metrics};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Ping {
    invoice_id: u64,
}

impl Job for Ping {
    const QUEUE: &'static str = "ping";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pong {
    invoice_id: u64,
}

impl Job for Pong {
    const QUEUE: &'static str = "pong";
}

const WAIT: Duration = Duration::from_secs(20);

async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(WAIT, rx.recv()).await.expect("timed out waiting for a job").expect("channel open")
}

/// Stops the runtime gracefully, then removes the test's queues (dropping them).
async fn stop_and_clean_up(running: Running, t: TestQueues) {
    running.stop().await;
    drop(t);
}

/// Waits until every `(counter, queue, value)` of `prom`'s rendering has its value.
async fn wait_for_counters(
    prom: &metrics_exporter_prometheus::PrometheusHandle,
    what: &str,
    counters: &[(&str, &String, f64)],
) {
    eventually(WAIT, what, || {
        let rendered = prom.render();
        let done = counters.iter().all(|(name, queue, value)| metric(&rendered, name, queue) == Some(*value));
        async move { done.then_some(()) }
    })
    .await;
}

/// A runtime of one `Ping` stage (3 attempts) whose jobs report `report(&ctx)` as they run, and
/// the receiving end of the reports.
fn reporting<T: Send + 'static>(
    t: &TestQueues,
    report: impl Fn(&JobCtx) -> T + Send + Sync + 'static,
) -> (Running, mpsc::UnboundedReceiver<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let report = Arc::new(report);
    let running = Running::start(Runtime::new(t.queues.clone()).stage(stage(3), move |_job: Ping, ctx: JobCtx| {
        let (tx, report) = (tx.clone(), report.clone());
        async move {
            tx.send(report(&ctx)).unwrap();
            Ok(())
        }
    }));
    (running, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_once_and_can_enqueue_follow_ups() {
    let t = TestQueues::new().await;
    let prom = metrics::install_recorder();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let pong_tx = tx.clone();
    let running = Running::start(
        Runtime::new(t.queues.clone())
            .stage(stage(3), move |job: Ping, ctx: JobCtx| {
                let tx = tx.clone();
                async move {
                    assert_eq!(ctx.attempt(), 1);
                    assert!(ctx.worker().starts_with("ping-"), "{}", ctx.worker());
                    ctx.queues().push(Pong { invoice_id: job.invoice_id }).await?;
                    tx.send(format!("ping {}", job.invoice_id)).unwrap();
                    Ok(())
                }
            })
            .stage(stage(3), move |job: Pong, _ctx: JobCtx| {
                let tx = pong_tx.clone();
                async move {
                    tx.send(format!("pong {}", job.invoice_id)).unwrap();
                    Ok(())
                }
            }),
    );

    let id = t.queues.push(Ping { invoice_id: 42 }).await.unwrap();
    assert_eq!(id.len(), 26, "a ULID: {id}");
    let mut seen = vec![recv(&mut rx).await, recv(&mut rx).await];
    seen.sort();
    assert_eq!(seen, ["ping 42", "pong 42"]);

    let ping = t.queues.queue_name::<Ping>();
    assert_eq!(ping, format!("{}:ping", t.queues.prefix()));
    let pong = t.queues.queue_name::<Pong>();
    let counters = [(metrics::JOBS_PROCESSED, &ping, 1.0), (metrics::JOBS_PROCESSED, &pong, 1.0)];
    wait_for_counters(&prom, "processed counters", &counters).await;
    running.stop().await;
    // Nothing ran twice.
    assert!(rx.try_recv().is_err());

    let depths = t.queues.depths().await.unwrap();
    assert!(depths.iter().all(|d| d.waiting + d.scheduled + d.running + d.dead == 0), "{depths:?}");
    assert_eq!(depths.into_iter().map(|d| d.queue).collect::<Vec<_>>(), [ping.clone(), pong]);
    // Completed jobs are purged (by the janitor, or here).
    t.queues.purge_done("ping").await.unwrap();
    assert_eq!(t.stored_jobs(&ping).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_with_backoff_until_success() {
    let t = TestQueues::new().await;
    let prom = metrics::install_recorder();
    let calls = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let counted = calls.clone();
    let running = Running::start(Runtime::new(t.queues.clone()).stage(stage(5), move |job: Ping, ctx: JobCtx| {
        let (calls, tx) = (counted.clone(), tx.clone());
        async move {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            assert_eq!(ctx.attempt(), n, "attempts are counted across retries");
            if n < 3 {
                return Err(JobError::retry(anyhow::anyhow!("node unreachable (attempt {n})")));
            }
            tx.send(job).unwrap();
            Ok(())
        }
    }));

    t.queues.push(Ping { invoice_id: 7 }).await.unwrap();
    assert_eq!(recv(&mut rx).await, Ping { invoice_id: 7 });
    let queue = t.queues.queue_name::<Ping>();
    let counters = [(metrics::JOBS_RETRIED, &queue, 2.0), (metrics::JOBS_PROCESSED, &queue, 1.0)];
    wait_for_counters(&prom, "retried and processed counters", &counters).await;
    running.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(rx.try_recv().is_err(), "processed once");
    assert_eq!(metric(&prom.render(), metrics::JOBS_FAILED, &queue), None);
    assert!(t.queues.dead(Ping::QUEUE, 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_retries_dead_letter_then_replay() {
    let t = TestQueues::new().await;
    let prom = metrics::install_recorder();
    let healthy = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (h, c) = (healthy.clone(), calls.clone());
    let running = Running::start(Runtime::new(t.queues.clone()).stage(stage(3), move |job: Ping, ctx: JobCtx| {
        let (healthy, calls, tx) = (h.clone(), c.clone(), tx.clone());
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            if !healthy.load(Ordering::SeqCst) {
                return Err(anyhow::anyhow!("rpc timeout on attempt {}", ctx.attempt()).into());
            }
            tx.send((job, ctx.attempt())).unwrap();
            Ok(())
        }
    }));

    t.queues.push(Ping { invoice_id: 9 }).await.unwrap();
    let dead = eventually(WAIT, "a dead job", || {
        let q = t.queues.clone();
        async move { q.dead("ping", 10).await.unwrap().pop() }
    })
    .await;
    assert_eq!(dead.args, serde_json::json!({ "invoice_id": 9 }));
    assert_eq!(dead.attempts, 3);
    assert_eq!(dead.last_error, "rpc timeout on attempt 3");
    assert!(dead.failed_at.is_some());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let queue = t.queues.queue_name::<Ping>();
    let depth = t.queues.depths().await.unwrap().into_iter().find(|d| d.queue == queue).unwrap();
    assert_eq!((depth.waiting, depth.scheduled, depth.running, depth.dead), (0, 0, 0, 1));
    let rendered = prom.render();
    assert_eq!(metric(&rendered, metrics::JOBS_FAILED, &queue), Some(1.0));
    assert_eq!(metric(&rendered, metrics::JOBS_RETRIED, &queue), Some(2.0));

    // Unknown ids are reported, not replayed; the dead job runs again from attempt 1.
    healthy.store(true, Ordering::SeqCst);
    let outcome = t.queues.replay(&queue, &[dead.id.clone(), "01NOTAJOB".to_owned()]).await.unwrap();
    assert_eq!(outcome.replayed, 1);
    assert_eq!(outcome.not_found, ["01NOTAJOB"]);
    assert_eq!(recv(&mut rx).await, (Ping { invoice_id: 9 }, 1));
    assert!(t.queues.dead("ping", 10).await.unwrap().is_empty());
    // A second replay of the same id finds nothing.
    assert_eq!(t.queues.replay("ping", std::slice::from_ref(&dead.id)).await.unwrap().replayed, 0);
    stop_and_clean_up(running, t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_failure_is_dead_at_once_and_replay_all_counts() {
    let t = TestQueues::new().await;
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let running = Running::start(Runtime::new(t.queues.clone()).stage(stage(10), move |job: Ping, _ctx: JobCtx| {
        let calls = c.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(JobError::permanent(anyhow::anyhow!("invoice {} does not exist", job.invoice_id)))
        }
    }));
    for invoice_id in 1..=3 {
        t.queues.push(Ping { invoice_id }).await.unwrap();
    }
    let dead = eventually(WAIT, "three dead jobs", || {
        let q = t.queues.clone();
        async move { Some(q.dead("ping", 10).await.unwrap()).filter(|d| d.len() == 3) }
    })
    .await;
    assert!(dead.iter().all(|d| d.attempts == 1 && d.last_error.ends_with("does not exist")), "{dead:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "no retry");
    assert_eq!(t.queues.dead("ping", 2).await.unwrap().len(), 2, "limit");
    running.stop().await;

    // With no worker running, replayed jobs wait in the queue.
    let mut progress = Vec::new();
    let replayed = t.queues.replay_all("ping", |done, total| progress.push((done, total))).await.unwrap();
    assert_eq!(replayed, 3);
    assert_eq!(progress.first(), Some(&(0, 3)));
    assert_eq!(progress.last(), Some(&(3, 3)));
    let depth = t.queues.depths().await.unwrap().pop().unwrap();
    assert_eq!((depth.waiting + depth.scheduled, depth.dead), (3, 0), "{depth:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_job_waits_for_its_delay() {
    let t = TestQueues::new().await;
    let (running, mut rx) = reporting(&t, |_| Instant::now());
    let delay = Duration::from_millis(1500);
    let pushed = Instant::now();
    t.queues.push_after(Ping { invoice_id: 1 }, delay).await.unwrap();
    let depth = t.queues.depths().await.unwrap().pop().unwrap();
    assert_eq!(depth.scheduled, 1, "{depth:?}");
    let started = recv(&mut rx).await;
    assert!(started.duration_since(pushed) >= delay, "ran after {:?}", started.duration_since(pushed));
    stop_and_clean_up(running, t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_the_in_flight_job_finish() {
    let t = TestQueues::new().await;
    let finished = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let one_at_a_time = platform::StageSettings { concurrency: 1, ..stage(3) };
    let (f, sent) = (finished.clone(), tx.clone());
    let handler = move |job: Ping, _ctx: JobCtx| {
        let (finished, tx) = (f.clone(), sent.clone());
        async move {
            tx.send(job.invoice_id).unwrap();
            tokio::time::sleep(Duration::from_millis(800)).await;
            finished.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    };
    for invoice_id in 1..=3 {
        t.queues.push(Ping { invoice_id }).await.unwrap();
    }
    let running = Running::start(Runtime::new(t.queues.clone()).stage(one_at_a_time.clone(), handler.clone()));
    recv(&mut rx).await;
    running.stop().await;
    assert_eq!(finished.load(Ordering::SeqCst), 1, "the runtime returned before its in-flight job finished");
    // The job that ran is acknowledged; the ones fetched but not started went back to the queue.
    let depth = t.queues.depths().await.unwrap().pop().unwrap();
    assert_eq!((depth.waiting + depth.scheduled, depth.running, depth.dead), (2, 0, 0), "{depth:?}");

    let running = Running::start(Runtime::new(t.queues.clone()).stage(one_at_a_time, handler));
    eventually(WAIT, "the other two jobs", || {
        let done = finished.load(Ordering::SeqCst) == 3;
        async move { done.then_some(()) }
    })
    .await;
    stop_and_clean_up(running, t).await;
}

/// Jobs still running when a graceful stop begins can enqueue their follow-ups. Each round keeps
/// chains of jobs flowing (every job pushes the next), so the backend is always fetching,
/// acknowledging or claiming something, then stops the runtime mid-stream: every push a handler
/// began must have gone through. (On the SQLite queue, a worker that stopped driving its backend
/// while jobs ran left a half-done transaction holding the write lock, and a running job's push
/// waited on it for the busy timeout and failed: see `runner::stop_when_drained`, `draining`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_running_when_a_stop_begins_can_still_enqueue() {
    const CHAINS: u64 = 4;
    for round in 0..8 {
        let t = TestQueues::new().await;
        let (begun, pushed) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (b, p) = (begun.clone(), pushed.clone());
        let busy = platform::StageSettings { concurrency: CHAINS as usize, ..stage(1) };
        let running = Running::start(Runtime::new(t.queues.clone()).stage(busy, move |job: Ping, ctx: JobCtx| {
            let (begun, pushed) = (b.clone(), p.clone());
            async move {
                begun.fetch_add(1, Ordering::SeqCst);
                ctx.queues().push(Ping { invoice_id: job.invoice_id + CHAINS }).await?;
                pushed.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }));
        for invoice_id in 0..CHAINS {
            t.queues.push(Ping { invoice_id }).await.unwrap();
        }
        eventually(WAIT, "the chains to run", || {
            let flowing = pushed.load(Ordering::SeqCst) >= 20 + round;
            async move { flowing.then_some(()) }
        })
        .await;
        running.stop().await;
        let (begun, pushed) = (begun.load(Ordering::SeqCst), pushed.load(Ordering::SeqCst));
        assert_eq!(pushed, begun, "round {round}: a job running when the stop began could not enqueue");
        drop(t);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_survive_a_killed_runtime() {
    let t = TestQueues::new().await;
    let (tx, mut rx) = mpsc::unbounded_channel::<(u64, String)>();
    let handler = move |job: Ping, ctx: JobCtx| {
        let tx = tx.clone();
        async move {
            tx.send((job.invoice_id, ctx.worker().to_owned())).unwrap();
            if job.invoice_id == 1 {
                // Stuck until the process dies.
                std::future::pending::<()>().await;
            }
            Ok(())
        }
    };

    // Job 1 is in flight and job 2 not yet due when the first runtime dies.
    let first = Running::start(Runtime::new(t.queues.clone()).stage(stage(3), handler.clone()));
    t.queues.push(Ping { invoice_id: 1 }).await.unwrap();
    let (id, first_worker) = recv(&mut rx).await;
    assert_eq!(id, 1);
    t.queues.push_after(Ping { invoice_id: 2 }, Duration::from_secs(1)).await.unwrap();
    first.kill().await;

    // A new process (own connection, new worker name) picks up both, job 1 once the dead
    // worker's heartbeat has lapsed.
    let second = Running::start(Runtime::new(t.reconnect().await).stage(stage(3), handler));
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (id, worker) = recv(&mut rx).await;
        assert_ne!(worker, first_worker);
        seen.push(id);
    }
    seen.sort();
    assert_eq!(seen, [1, 2]);
    second.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_worker_is_replaced_under_a_new_name() {
    let t = TestQueues::new().await;
    let (running, mut rx) = reporting(&t, |ctx| ctx.worker().to_owned());
    t.queues.push(Ping { invoice_id: 1 }).await.unwrap();
    let first = recv(&mut rx).await;
    t.unregister_worker(&t.queues.queue_name::<Ping>(), &first).await;
    t.queues.push(Ping { invoice_id: 2 }).await.unwrap();
    let second = recv(&mut rx).await;
    assert_ne!(first, second);
    // <stage>-<host>-<pid>-<random>
    assert!(second.starts_with("ping-") && second.contains(&format!("-{}-", std::process::id())), "{second}");
    stop_and_clean_up(running, t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_endpoints_report_health_readiness_and_metrics() {
    let t = TestQueues::new().await;
    let (running, mut rx) = reporting(&t, |_| ());
    t.queues.push(Ping { invoice_id: 1 }).await.unwrap();
    recv(&mut rx).await;

    let database_up = Arc::new(AtomicBool::new(true));
    let (up, queues) = (database_up.clone(), t.queues.clone());
    let readiness = move || {
        let (up, queues) = (up.clone(), queues.clone());
        async move {
            anyhow::ensure!(up.load(Ordering::SeqCst), "database ping failed");
            queues.ping().await
        }
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let server =
        platform::serve_ops_http(SocketAddr::from(([127, 0, 0, 1], 0)), readiness, stop.clone().cancelled_owned())
            .await
            .unwrap();
    let base = format!("http://{}", server.local_addr());
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).send();

    assert_eq!(get("/health").await.unwrap().status(), 200);
    assert_eq!(get("/ready").await.unwrap().status(), 200);
    database_up.store(false, Ordering::SeqCst);
    let not_ready = get("/ready").await.unwrap();
    assert_eq!(not_ready.status(), 503);
    assert!(not_ready.text().await.unwrap().contains("database ping failed"));
    assert_eq!(get("/health").await.unwrap().status(), 200, "health does not depend on readiness");

    let queue = t.queues.queue_name::<Ping>();
    let body = eventually(WAIT, "processed counter on /metrics", || {
        let request = get("/metrics");
        let queue = queue.clone();
        async move {
            let body = request.await.unwrap().text().await.unwrap();
            (metric(&body, metrics::JOBS_PROCESSED, &queue) == Some(1.0)).then_some(body)
        }
    })
    .await;
    assert!(body.contains(&format!("{}_bucket{{queue=\"{queue}\"", metrics::QUEUE_LAG)), "{body}");
    assert!(body.contains(&format!("{}{{queue=\"{queue}\",state=\"waiting\"}}", metrics::QUEUE_DEPTH)), "{body}");

    stop.cancel();
    server.wait().await.unwrap();
    stop_and_clean_up(running, t).await;
}
