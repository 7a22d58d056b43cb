//! `ops`: the operator CLI. Every command reads the same configuration as the services
//! (defaults < paygate.toml < PAYGATE_* variables).

mod args;
mod audit;
mod bench;
mod bench_evm;
mod bench_fakes;
mod bench_node;
mod bench_pipeline;
mod bench_reads;
mod bench_scan;
mod bench_seed;
mod bench_webhooks;
mod deposits;
mod evm_replay;
mod jobs;
mod keys;
mod ledger;
mod merchants;
mod payouts;
mod sandbox;
mod serve;
mod sweeps;
mod treasury;
mod webhooks;

use anyhow::Context;
use clap::{Parser, Subcommand};
use domain::config::Config;
use entity::Environment;

#[derive(Parser)]
#[command(name = "ops", about = "Operate a paygate deployment", version)]
struct Cli {
    /// Who is acting, recorded in the audit log; default the OS user (`$USER`, else `whoami`).
    #[arg(long, global = true)]
    actor: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Apply database migrations.
    Migrate,
    /// Prune now what `[retention]` says has served its purpose (the webhook deliverer also does
    /// it every `retention.interval_secs`): old webhook response excerpts, ended dashboard
    /// sessions and invitations. The books and events are never pruned.
    Prune,
    /// Run the whole service in one process (the embedded default: SQLite file, sandbox chain).
    Serve,
    /// Merchants and their settings.
    #[command(subcommand)]
    Merchants(merchants::MerchantCmd),
    /// API keys.
    #[command(subcommand)]
    Keys(keys::KeyCmd),
    /// Balances and operator adjustments.
    #[command(subcommand)]
    Ledger(ledger::LedgerCmd),
    /// Payout approval and per-environment payout settings.
    #[command(subcommand)]
    Payouts(payouts::PayoutCmd),
    /// Load benchmark: invoice creation over HTTP against PostgreSQL, next to a pgbench baseline.
    Bench(bench::BenchArgs),
    /// Scan speed of the live EVM scanner against anvil, with growing watched-address sets.
    BenchEvmScan(bench_evm::BenchEvmScanArgs),
    /// `bench-evm-scan`'s recorded EVM node: answers JSON-RPC from a recording until killed.
    #[command(hide = true)]
    BenchEvmReplay(evm_replay::ReplayArgs),
    /// Scan speed of a non-EVM live scanner with growing watched-address sets: `--gate bitcoin`
    /// against Litecoin Core regtest; tron, tron_usdt, solana, solana_usdc, xrp against an
    /// in-process fake node.
    BenchScan(bench_scan::BenchScanArgs),
    /// Pipeline benchmark: a burst of sandbox deposits through scanner and tracker to ledger credits.
    BenchPipeline(bench_pipeline::BenchPipelineArgs),
    /// Webhook benchmark: one deliverer process against a receiver answering in 50 ms.
    BenchWebhooks(bench_webhooks::BenchWebhooksArgs),
    /// Grows a PostgreSQL database to a merchant's first year (`--invoices N` and every table
    /// scaled with it) for `bench-reads`.
    BenchSeed(bench_seed::BenchSeedArgs),
    /// Read requests on an empty database and on one grown by `bench-seed`, side by side, with
    /// the plans of the list queries.
    BenchReads(bench_reads::BenchReadsArgs),
    /// Sandbox chains of the test environment: deposits, reversals, blocks.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCmd),
    /// Unclaimed deposits: money that reached an address of ours but credits no invoice.
    #[command(subcommand)]
    Deposits(deposits::DepositsCmd),
    /// Job queues: depths, dead jobs, replay.
    #[command(subcommand)]
    Jobs(jobs::JobsCmd),
    /// Webhook endpoints and secrets, deliveries, their attempts and replay, test events.
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCmd),
    /// The operator audit log: every change of money or access made through `ops`.
    #[command(subcommand)]
    Audit(audit::AuditCmd),
    /// Sweeps of deposit addresses to the hot wallet or cold address: list, retry, fail.
    #[command(subcommand)]
    Sweeps(sweeps::SweepsCmd),
    /// The operator's own books: house inventory and net positions, reconciliation.
    #[command(subcommand)]
    Treasury(treasury::TreasuryCmd),
}

pub(crate) fn parse_env(s: &str) -> Result<Environment, String> {
    Environment::parse(s).ok_or_else(|| format!("expected test or live, got {s:?}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = Config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    domain::telemetry::init(config.log_format);
    let actor = &audit::resolve_actor(cli.actor)?;
    match cli.command {
        Command::Serve => serve::serve(config).await,
        Command::Merchants(cmd) => merchants::run(&config, cmd, actor).await,
        Command::Keys(cmd) => keys::run(&config, cmd, actor).await,
        Command::Ledger(cmd) => ledger::run(&config, cmd, actor).await,
        Command::Payouts(cmd) => payouts::run(&config, cmd, actor).await,
        Command::Bench(args) => bench::run(args).await,
        Command::BenchEvmScan(args) => bench_evm::run(args).await,
        Command::BenchEvmReplay(args) => evm_replay::serve(args).await,
        Command::BenchScan(args) => bench_scan::run(args).await,
        Command::BenchPipeline(args) => bench_pipeline::run(args).await,
        Command::BenchWebhooks(args) => bench_webhooks::run(args).await,
        Command::BenchSeed(args) => bench_seed::run(args).await,
        Command::BenchReads(args) => bench_reads::run(args).await,
        Command::Sandbox(cmd) => {
            let db = domain::db::connect(&config).await?;
            domain::db::migrate(&db).await?;
            sandbox::run(&db, &config, cmd).await
        }
        Command::Deposits(cmd) => deposits::run(&config, cmd, actor).await,
        Command::Jobs(cmd) => jobs::run(&config, cmd, actor).await,
        Command::Webhooks(cmd) => webhooks::run(&config, cmd, actor).await,
        Command::Sweeps(cmd) => sweeps::run(&config, cmd, actor).await,
        Command::Treasury(cmd) => treasury::run(&config, cmd, actor).await,
        Command::Audit(cmd) => audit::run(&connect(&config).await?, cmd, &mut std::io::stdout()).await,
        Command::Prune => {
            let db = connect(&config).await?;
            let p = domain::retention::prune(&db, &config.retention, chrono::Utc::now()).await?;
            println!(
                "pruned: {} webhook response excerpts, {} ended sessions, {} ended invitations",
                p.attempt_bodies, p.sessions, p.invitations
            );
            Ok(())
        }
        Command::Migrate => {
            let db = domain::db::connect(&config).await?;
            domain::db::migrate(&db).await?;
            println!("migrations applied");
            Ok(())
        }
    }
}

/// Connects and makes sure the schema is current (operators may run ops before the API).
pub(crate) async fn connect(config: &Config) -> anyhow::Result<sea_orm::DatabaseConnection> {
    let db =
        domain::db::connect(config).await.with_context(|| format!("connecting to {}", redact(&config.database_url)))?;
    domain::db::migrate(&db).await?;
    Ok(db)
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}
