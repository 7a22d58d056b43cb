//! `ops jobs`: queue depths, dead jobs and their replay, on the queue backend the services use
//! (`[queue]`, else Redis when `redis_url` is set, else the SQLite job file beside the database).

use std::io::Write;

use anyhow::bail;
use clap::Subcommand;
use domain::config::Config;
use workers::platform::Queues;

#[derive(Debug, Subcommand)]
pub enum JobsCmd {
    /// Jobs per queue: waiting (due), scheduled (delayed or backing off), running, dead.
    Queues,
    /// Dead jobs of a queue, newest first: id, attempts, time of failure, last error, job.
    Dead {
        /// Queue, with or without the prefix: `deposit-scan` or `paygate:deposit-scan`.
        queue: String,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Put dead jobs back on their queue, due now, attempts starting over.
    Replay {
        queue: String,
        /// Dead job ids (from `ops jobs dead`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        ids: Vec<String>,
        /// Every dead job of the queue.
        #[arg(long)]
        all: bool,
    },
}

/// The queue backend the services use.
pub async fn connect(config: &Config) -> anyhow::Result<Queues> {
    let backend = config.queue_backend()?;
    Queues::connect(&backend).await
}

/// Dead jobs put back on a queue by one command: recorded in the audit log.
#[derive(Debug, Default)]
pub struct Replayed {
    queue: String,
    count: u64,
    /// The ids asked for and found dead (empty for `--all`).
    ids: Vec<String>,
}

pub async fn run(config: &Config, cmd: JobsCmd, actor: &str) -> anyhow::Result<()> {
    let queues = connect(config).await?;
    if let JobsCmd::Replay { queue, ids, all } = &cmd {
        // Write-ahead: the queue is not in the database, so the audit row cannot share the
        // replay's transaction; it is committed before any job moves. No replay happens
        // without its row (an unreachable database stops the command first); one that fails
        // part way leaves the row and an error saying what moved.
        let db = crate::connect(config).await?;
        let queue = queues.full_name(queue);
        let dead = queues.dead_ids(&queue).await?;
        let planned = if *all {
            Replayed { queue, count: dead.len() as u64, ids: Vec::new() }
        } else {
            let found: Vec<String> = ids.iter().filter(|id| dead.binary_search(id).is_ok()).cloned().collect();
            Replayed { queue, count: found.len() as u64, ids: found }
        };
        if planned.count > 0 {
            record_replay(&db, actor, planned).await?;
        }
    }
    execute(&queues, cmd, &mut std::io::stdout(), &mut std::io::stderr()).await
}

async fn record_replay(db: &sea_orm::DatabaseConnection, actor: &str, r: Replayed) -> anyhow::Result<()> {
    let after = serde_json::json!({ "replayed": r.count, "ids": r.ids });
    let entry = domain::audit::Entry::new(actor, "jobs.replay", "queue", &r.queue).change(None, Some(after));
    domain::audit::record(db, entry).await?;
    Ok(())
}

async fn execute(queues: &Queues, cmd: JobsCmd, out: &mut impl Write, err: &mut impl Write) -> anyhow::Result<()> {
    match cmd {
        JobsCmd::Queues => {
            let depths = queues.depths().await?;
            if depths.is_empty() {
                writeln!(out, "no queue under prefix {:?} on {}", queues.prefix(), queues.backend_name())?;
                return Ok(());
            }
            let width = depths.iter().map(|d| d.queue.len()).max().unwrap_or(0).max("QUEUE".len());
            writeln!(
                out,
                "{:<width$}  {:>9}  {:>9}  {:>9}  {:>9}",
                "QUEUE", "WAITING", "SCHEDULED", "RUNNING", "DEAD"
            )?;
            for d in depths {
                writeln!(
                    out,
                    "{:<width$}  {:>9}  {:>9}  {:>9}  {:>9}",
                    d.queue, d.waiting, d.scheduled, d.running, d.dead
                )?;
            }
        }
        JobsCmd::Dead { queue, limit } => {
            let dead = queues.dead(&queue, limit).await?;
            if dead.is_empty() {
                writeln!(out, "no dead job in {}", queues.full_name(&queue))?;
                return Ok(());
            }
            writeln!(out, "{:<26}  {:>8}  {:<20}  LAST ERROR", "ID", "ATTEMPTS", "FAILED AT")?;
            for job in dead {
                let failed_at = job.failed_at.map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_default();
                writeln!(out, "{:<26}  {:>8}  {:<20}  {}", job.id, job.attempts, failed_at, job.last_error)?;
                writeln!(out, "{:<26}  job: {}", "", job.args)?;
            }
        }
        JobsCmd::Replay { queue, all: true, .. } => {
            let queue = queues.full_name(&queue);
            let count = queues
                .replay_all(&queue, |done, total| {
                    // Progress on stderr so stdout stays the result.
                    let _ = write!(err, "\rreplaying {done}/{total}");
                    let _ = err.flush();
                })
                .await?;
            writeln!(err)?;
            writeln!(out, "replayed {count} dead job(s) of {queue}")?;
        }
        JobsCmd::Replay { queue, ids, all: false } => {
            let queue = queues.full_name(&queue);
            let outcome = queues.replay(&queue, &ids).await?;
            writeln!(out, "replayed {} dead job(s) of {queue}", outcome.replayed)?;
            if !outcome.not_found.is_empty() {
                bail!("not dead jobs of {queue} (unknown, or already replayed): {}", outcome.not_found.join(", "));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use clap::Parser;
    use tokio_util::sync::CancellationToken;
    use workers::platform::{Job, JobCtx, JobError, QueueBackend, Queues, Runtime, RuntimeSettings, StageSettings};

    use super::*;

    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Settle {
        payout_id: u32,
    }

    impl Job for Settle {
        const QUEUE: &'static str = "settle";
    }

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: JobsCmd,
    }

    async fn run_cmd(queues: &Queues, args: &[&str]) -> (anyhow::Result<()>, String, String) {
        let cmd = Cli::try_parse_from(std::iter::once("jobs").chain(args.iter().copied())).unwrap().cmd;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let res = execute(queues, cmd, &mut out, &mut err).await;
        (res, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    /// Three jobs that fail permanently, dead on a SQLite queue file.
    async fn queues_with_dead_jobs(dir: &std::path::Path) -> Queues {
        let backend = QueueBackend::Sqlite { path: dir.join("jobs.sqlite"), prefix: "paygate".into() };
        let queues = Queues::connect(&backend).await.unwrap();
        for payout_id in 1..=3 {
            queues.push(Settle { payout_id }).await.unwrap();
        }
        let stop = CancellationToken::new();
        let runtime = Runtime::new(queues.clone())
            .with_settings(RuntimeSettings { poll_interval: Duration::from_millis(50), ..Default::default() })
            .stage(StageSettings::default(), |job: Settle, _ctx: JobCtx| async move {
                Err(JobError::permanent(anyhow::anyhow!("payout {} has no destination", job.payout_id)))
            });
        let running = tokio::spawn(runtime.run(stop.clone().cancelled_owned()));
        let start = Instant::now();
        while queues.dead("settle", 10).await.unwrap().len() < 3 {
            assert!(start.elapsed() < Duration::from_secs(20), "jobs did not die");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.cancel();
        running.await.unwrap().unwrap();
        queues
    }

    #[tokio::test]
    async fn list_inspect_and_replay_dead_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let queues = queues_with_dead_jobs(dir.path()).await;

        let (res, out, _) = run_cmd(&queues, &["queues"]).await;
        res.unwrap();
        let row = out.lines().find(|l| l.starts_with("paygate:settle")).expect(&out);
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["paygate:settle", "0", "0", "0", "3"]);

        let (res, out, _) = run_cmd(&queues, &["dead", "settle", "--limit", "2"]).await;
        res.unwrap();
        let rows: Vec<&str> = out.lines().skip(1).filter(|l| !l.trim_start().starts_with("job:")).collect();
        assert_eq!(rows.len(), 2, "{out}");
        assert!(rows.iter().all(|r| r.contains("has no destination") && r.split_whitespace().nth(1) == Some("1")));
        assert!(out.contains(r#"job: {"payout_id":"#), "{out}");
        let id = rows[0].split_whitespace().next().unwrap().to_owned();

        let (res, out, _) = run_cmd(&queues, &["replay", "paygate:settle", &id, "01UNKNOWN"]).await;
        assert!(out.contains("replayed 1 dead job(s) of paygate:settle"), "{out}");
        assert!(res.unwrap_err().to_string().contains("01UNKNOWN"));

        let (res, out, err) = run_cmd(&queues, &["replay", "settle", "--all"]).await;
        res.unwrap();
        assert!(out.contains("replayed 2 dead job(s)"), "{out}");
        assert!(err.contains("replaying 2/2"), "{err}");

        let depth = queues.depths().await.unwrap().pop().unwrap();
        assert_eq!((depth.waiting, depth.dead), (3, 0));
        let (res, out, _) = run_cmd(&queues, &["dead", "settle"]).await;
        res.unwrap();
        assert!(out.contains("no dead job in paygate:settle"), "{out}");
    }

    #[test]
    fn replay_needs_ids_or_all() {
        assert!(Cli::try_parse_from(["jobs", "replay", "settle"]).is_err());
        assert!(Cli::try_parse_from(["jobs", "replay", "settle", "01A", "--all"]).is_err());
        assert!(Cli::try_parse_from(["jobs", "replay", "settle", "--all"]).is_ok());
    }
}
