//! `ops`: the operator CLI. Every command reads the same configuration as the services
//! (defaults < paygate.toml < PAYGATE_* variables).

mod args;
mod audit;
mod bench;
mod bench_evm;
mod bench_pipeline;
mod bench_webhooks;
mod jobs;
mod sandbox;
mod webhooks;

use std::str::FromStr;

use anyhow::{Context, bail};
use api::audit::{Entry, record};
use api::auth::{Permission, Permissions};
use api::config::Config;
use api::merchants::{self, MerchantSettings};
use clap::{Args, Parser, Subcommand};
use entity::Environment;
use rust_decimal::Decimal;
use uuid::Uuid;

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
    /// Run the whole service in one process (the embedded default: SQLite file, sandbox chain).
    Serve,
    /// Merchants and their settings.
    #[command(subcommand)]
    Merchants(MerchantCmd),
    /// API keys.
    #[command(subcommand)]
    Keys(KeyCmd),
    /// Balances and operator adjustments.
    #[command(subcommand)]
    Ledger(LedgerCmd),
    /// Payout approval and per-environment payout settings.
    #[command(subcommand)]
    Payouts(PayoutCmd),
    /// Load benchmark: invoice creation over HTTP against PostgreSQL, next to a pgbench baseline.
    Bench(bench::BenchArgs),
    /// Scan speed of the live EVM scanner against anvil, with growing watched-address sets.
    BenchEvmScan(bench_evm::BenchEvmScanArgs),
    /// Pipeline benchmark: a burst of sandbox deposits through scanner and tracker to ledger credits.
    BenchPipeline(bench_pipeline::BenchPipelineArgs),
    /// Webhook benchmark: one deliverer process against a receiver answering in 50 ms.
    BenchWebhooks(bench_webhooks::BenchWebhooksArgs),
    /// Sandbox chains of the test environment: deposits, reversals, blocks.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCmd),
    /// Job queues: depths, dead jobs, replay.
    #[command(subcommand)]
    Jobs(jobs::JobsCmd),
    /// Webhook endpoints and secrets, deliveries, their attempts and replay, test events.
    #[command(subcommand)]
    Webhooks(webhooks::WebhooksCmd),
    /// The operator audit log: every change of money or access made through `ops`.
    #[command(subcommand)]
    Audit(audit::AuditCmd),
}

#[derive(Subcommand)]
enum MerchantCmd {
    /// Create a merchant; prints its id.
    Create {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        settings: SettingsArgs,
    },
    /// List merchants with their settings.
    List,
    /// Change a merchant's settings (only the flags given change).
    Settings {
        merchant_id: Uuid,
        #[command(flatten)]
        settings: SettingsArgs,
        #[command(flatten)]
        rate_limits: RateLimitArgs,
    },
}

/// Per-merchant overrides of `[rate_limits]`: requests per the class's configured period, or
/// `default` to go back to the configured limit.
#[derive(Args, Default)]
struct RateLimitArgs {
    /// Reads (GET) per API key.
    #[arg(long, value_parser = parse_rate_limit)]
    rate_limit_reads: Option<RateLimitArg>,
    /// Writes (POST, ...) per API key.
    #[arg(long, value_parser = parse_rate_limit)]
    rate_limit_writes: Option<RateLimitArg>,
    /// `/v1/test/*` requests per merchant.
    #[arg(long, value_parser = parse_rate_limit)]
    rate_limit_test_helpers: Option<RateLimitArg>,
}

#[derive(Clone, Copy)]
enum RateLimitArg {
    Set(u32),
    Default,
}

fn parse_rate_limit(s: &str) -> Result<RateLimitArg, String> {
    if s == "default" {
        return Ok(RateLimitArg::Default);
    }
    s.parse::<u32>()
        .ok()
        .filter(|n| (1..=merchants::MAX_RATE_LIMIT).contains(n))
        .map(RateLimitArg::Set)
        .ok_or_else(|| format!("a number of requests from 1 to {} or `default`", merchants::MAX_RATE_LIMIT))
}

impl RateLimitArgs {
    fn given(&self) -> bool {
        self.rate_limit_reads.is_some() || self.rate_limit_writes.is_some() || self.rate_limit_test_helpers.is_some()
    }

    fn apply(&self, mut l: merchants::MerchantRateLimits) -> merchants::MerchantRateLimits {
        let set = |cur: &mut Option<u32>, arg: Option<RateLimitArg>| match arg {
            Some(RateLimitArg::Set(n)) => *cur = Some(n),
            Some(RateLimitArg::Default) => *cur = None,
            None => {}
        };
        set(&mut l.reads, self.rate_limit_reads);
        set(&mut l.writes, self.rate_limit_writes);
        set(&mut l.test_helpers, self.rate_limit_test_helpers);
        l
    }
}

/// `reads=<n|default> writes=… test_helpers=…` of a merchant.
fn rate_limits_line(m: &entity::merchant::Model) -> String {
    let l = merchants::MerchantRateLimits::of(m);
    let show = |v: Option<u32>| v.map_or_else(|| "default".to_owned(), |n| n.to_string());
    format!("rate_limits: reads={} writes={} test_helpers={}", show(l.reads), show(l.writes), show(l.test_helpers))
}

#[derive(Args, Default)]
struct SettingsArgs {
    /// Fiat code for amount_in_base_currency (default USD).
    #[arg(long)]
    base_currency: Option<String>,
    /// Payment window of new invoices in seconds (default 3600).
    #[arg(long)]
    invoice_lifetime_secs: Option<i64>,
    /// Under/overpayment tolerance in percent of the requested amount (default 0).
    #[arg(long)]
    underpayment_tolerance_percent: Option<String>,
}

impl SettingsArgs {
    fn apply(&self, mut s: MerchantSettings) -> anyhow::Result<MerchantSettings> {
        if let Some(c) = &self.base_currency {
            s.base_currency = c.clone();
        }
        if let Some(l) = self.invoice_lifetime_secs {
            s.invoice_lifetime_secs = l;
        }
        if let Some(t) = &self.underpayment_tolerance_percent {
            s.underpayment_tolerance_percent =
                Decimal::from_str(t).context("--underpayment-tolerance-percent must be a decimal")?;
        }
        Ok(s)
    }
}

#[derive(Subcommand)]
enum KeyCmd {
    /// Create a key; prints it once (only its hash is stored).
    Create {
        #[arg(long)]
        merchant: Uuid,
        /// test or live
        #[arg(long, value_parser = parse_env)]
        env: Environment,
        /// Required: comma-separated permissions (invoices:read,invoices:write,…), or `all`
        /// spelled out. There is no default, so no key gets more than the operator chose.
        #[arg(long)]
        permissions: String,
        #[arg(long)]
        label: Option<String>,
    },
    /// List keys (never the keys themselves).
    List {
        #[arg(long)]
        merchant: Option<Uuid>,
    },
    /// Revoke a key by id; every API process refuses it within `auth.cache_ttl_secs`.
    Revoke { key_id: Uuid },
}

#[derive(Subcommand)]
enum PayoutCmd {
    /// Approve a payout in pending_approval; it becomes executable after the merchant's delay.
    Approve { payout_id: Uuid },
    /// Reject a payout in pending_approval: it fails with the reason and its funds are released.
    Reject {
        payout_id: Uuid,
        #[arg(long)]
        reason: String,
    },
    /// Fail an approved or queued payout that was never signed: its funds are released (a
    /// refund follows) and `payout.failed` carries the reason. Refused for a payout with a
    /// signed transaction (it may be mined): use `replace`.
    Fail {
        payout_id: Uuid,
        #[arg(long)]
        reason: String,
    },
    /// List payouts whose signed transaction is not in a block after `--older-than` since its
    /// broadcast (or since queued, when the node has not accepted it yet).
    Stuck {
        /// e.g. 10m, 90s, 2h.
        #[arg(long, default_value = "10m", value_parser = parse_age)]
        older_than: chrono::Duration,
    },
    /// Replace a stuck payout transaction: the payout executor sends a zero-value transaction to
    /// the hot wallet with the same nonce at twice the fee (within `max_fee_per_gas_gwei`);
    /// once it is mined to the gate's depth the payout fails and its funds are released.
    Replace { payout_id: Uuid },
    /// Show or change a merchant's payout settings for one environment (only given flags change).
    Settings {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = parse_env)]
        env: Environment,
        /// New payouts start approved.
        #[arg(long)]
        auto_approve: Option<bool>,
        /// Seconds between approval and execution.
        #[arg(long)]
        delay_secs: Option<i64>,
        /// customer (deducted from the recipient amount) or merchant (added to the debit).
        #[arg(long, value_parser = parse_alloc)]
        payout_fee_allocation: Option<entity::FeeAllocation>,
        #[arg(long, value_parser = parse_alloc)]
        network_fee_allocation: Option<entity::FeeAllocation>,
        /// Who bears the configured refund fee on refunds.
        #[arg(long, value_parser = parse_alloc)]
        refund_fee_allocation: Option<entity::FeeAllocation>,
    },
}

/// `<n>s`, `<n>m`, `<n>h` (or plain seconds).
fn parse_age(s: &str) -> Result<chrono::Duration, String> {
    let (digits, unit) = s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit()).unwrap_or(s.trim().len()));
    let n: i64 = digits.parse().map_err(|_| format!("expected a duration like 10m, 90s or 2h, got {s:?}"))?;
    match unit {
        "" | "s" => Ok(chrono::Duration::seconds(n)),
        "m" => Ok(chrono::Duration::minutes(n)),
        "h" => Ok(chrono::Duration::hours(n)),
        _ => Err(format!("expected a duration like 10m, 90s or 2h, got {s:?}")),
    }
}

fn parse_alloc(s: &str) -> Result<entity::FeeAllocation, String> {
    entity::FeeAllocation::parse(s).ok_or_else(|| format!("expected customer or merchant, got {s:?}"))
}

#[derive(Subcommand)]
enum LedgerCmd {
    /// Credit (positive) or debit (negative, refused below zero) a merchant's available
    /// balance, recorded as an `adjustment` ledger entry with the reason.
    Adjust {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = parse_env)]
        env: Environment,
        /// Gate id, e.g. `bitcoin` or `tron_usdt`.
        #[arg(long)]
        gate: String,
        /// Signed decimal, e.g. `1.5` or `-0.25`.
        #[arg(long, allow_hyphen_values = true)]
        amount: String,
        #[arg(long)]
        reason: String,
    },
    /// Show a merchant's non-zero balances.
    Balances {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = parse_env)]
        env: Environment,
    },
}

fn parse_env(s: &str) -> Result<Environment, String> {
    Environment::parse(s).ok_or_else(|| format!("expected test or live, got {s:?}"))
}

/// `invoices:read,balances:read`: the permissions a key holds, comma-separated.
fn permission_list(p: Permissions) -> String {
    Permission::ALL.iter().filter(|x| p.contains(**x)).map(|x| x.as_str()).collect::<Vec<_>>().join(",")
}

fn parse_permissions(s: &str) -> anyhow::Result<Permissions> {
    if s.trim() == "all" {
        return Ok(Permissions::all());
    }
    let perms: Permissions = s
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Permission::parse(p).with_context(|| {
                let known: Vec<&str> = Permission::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown permission {p:?}; known: {}", known.join(", "))
            })
        })
        .collect::<anyhow::Result<_>>()?;
    if perms == Permissions::default() {
        anyhow::bail!("--permissions names no permission; give a comma-separated list or `all`");
    }
    Ok(perms)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = Config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    api::telemetry::init(config.log_format);
    let actor = &audit::resolve_actor(cli.actor)?;
    match cli.command {
        Command::Serve => serve(config).await,
        Command::Bench(args) => bench::run(args).await,
        Command::BenchEvmScan(args) => bench_evm::run(args).await,
        Command::BenchPipeline(args) => bench_pipeline::run(args).await,
        Command::BenchWebhooks(args) => bench_webhooks::run(args).await,
        Command::Sandbox(cmd) => {
            let db = api::db::connect(&config).await?;
            api::db::migrate(&db).await?;
            sandbox::run(&db, &config, cmd).await
        }
        Command::Jobs(cmd) => jobs::run(&config, cmd, actor).await,
        Command::Webhooks(cmd) => webhooks::run(&config, cmd, actor).await,
        Command::Audit(cmd) => audit::run(&connect(&config).await?, cmd, &mut std::io::stdout()).await,
        Command::Migrate => {
            let db = api::db::connect(&config).await?;
            api::db::migrate(&db).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Merchants(cmd) => {
            let db = connect(&config).await?;
            match cmd {
                MerchantCmd::Create { name, settings } => {
                    let settings = settings.apply(MerchantSettings::default())?;
                    let txn = api::db::begin_write(&db).await?;
                    let m = merchants::create_merchant(&txn, &name, &settings).await?;
                    let entry = Entry::new(actor, "merchant.create", "merchant", m.id)
                        .merchant(m.id, None)
                        .change(None, Some(audit::merchant_json(&m)));
                    record(&txn, entry).await?;
                    txn.commit().await?;
                    println!("{}", m.id);
                }
                MerchantCmd::List => {
                    for m in merchants::list_merchants(&db).await? {
                        println!(
                            "{}  {:<24} base={} lifetime={}s tolerance={}%",
                            m.id, m.name, m.base_currency, m.invoice_lifetime_secs, m.underpayment_tolerance_percent
                        );
                    }
                }
                MerchantCmd::Settings { merchant_id, settings, rate_limits } => {
                    let m = merchants::get_merchant(&db, merchant_id).await?;
                    let limits = rate_limits.apply(merchants::MerchantRateLimits::of(&m));
                    let current = MerchantSettings {
                        base_currency: m.base_currency,
                        invoice_lifetime_secs: m.invoice_lifetime_secs,
                        underpayment_tolerance_percent: m.underpayment_tolerance_percent.value(),
                    };
                    let settings = settings.apply(current)?;
                    let txn = api::db::begin_write(&db).await?;
                    let before = audit::merchant_json(&merchants::get_merchant(&txn, merchant_id).await?);
                    let mut m = merchants::update_settings(&txn, merchant_id, &settings).await?;
                    if rate_limits.given() {
                        m = merchants::set_rate_limits(&txn, merchant_id, &limits).await?;
                    }
                    let entry = Entry::new(actor, "merchant.settings", "merchant", m.id)
                        .merchant(m.id, None)
                        .change(Some(before), Some(audit::merchant_json(&m)));
                    record(&txn, entry).await?;
                    txn.commit().await?;
                    println!(
                        "{}  base={} lifetime={}s tolerance={}%  {}",
                        m.id,
                        m.base_currency,
                        m.invoice_lifetime_secs,
                        m.underpayment_tolerance_percent,
                        rate_limits_line(&m)
                    );
                }
            }
            Ok(())
        }
        Command::Payouts(cmd) => {
            use api::payouts::operator as payouts;
            let db = connect(&config).await?;
            match cmd {
                PayoutCmd::Approve { payout_id } => {
                    let txn = api::db::begin_write(&db).await?;
                    let before = payouts::load(&txn, payout_id).await?;
                    let p = payouts::approve(&txn, payout_id).await?;
                    record(&txn, payout_entry(actor, "payout.approve", &before, &p, None)).await?;
                    txn.commit().await?;
                    println!(
                        "{} {} executable_at={}",
                        p.id,
                        p.status.as_str(),
                        p.executable_at.map(|t| t.to_rfc3339()).unwrap_or_default()
                    );
                }
                PayoutCmd::Reject { payout_id, reason } => {
                    if reason.trim().is_empty() {
                        bail!("--reason must not be empty");
                    }
                    let txn = api::db::begin_write(&db).await?;
                    let before = payouts::load(&txn, payout_id).await?;
                    let p = payouts::reject(&txn, payout_id, reason.trim()).await?;
                    record(&txn, payout_entry(actor, "payout.reject", &before, &p, Some(reason.trim()))).await?;
                    txn.commit().await?;
                    println!("{} {} ({})", p.id, p.status.as_str(), p.failure_reason.unwrap_or_default());
                }
                PayoutCmd::Fail { payout_id, reason } => {
                    if reason.trim().is_empty() {
                        bail!("--reason must not be empty");
                    }
                    let txn = api::db::begin_write(&db).await?;
                    let before = payouts::load(&txn, payout_id).await?;
                    let p = payouts::fail_unsent(&txn, payout_id, reason.trim()).await?;
                    record(&txn, payout_entry(actor, "payout.fail", &before, &p, Some(reason.trim()))).await?;
                    txn.commit().await?;
                    println!("{} {} ({})", p.id, p.status.as_str(), p.failure_reason.unwrap_or_default());
                }
                PayoutCmd::Stuck { older_than } => stuck_payouts(&db, &config, older_than).await?,
                PayoutCmd::Replace { payout_id } => {
                    let txn = api::db::begin_write(&db).await?;
                    let before = payouts::load(&txn, payout_id).await?;
                    let r = payouts::request_replace(&txn, payout_id).await?;
                    record(&txn, payout_entry(actor, "payout.replace", &before, &before, Some(&r.reason))).await?;
                    txn.commit().await?;
                    println!(
                        "{} replacement requested at {}; the payout executor signs and sends it, the payout fails once it is mined",
                        r.payout_id,
                        r.requested_at.to_rfc3339()
                    );
                }
                PayoutCmd::Settings {
                    merchant,
                    env,
                    auto_approve,
                    delay_secs,
                    payout_fee_allocation,
                    network_fee_allocation,
                    refund_fee_allocation,
                } => {
                    merchants::get_merchant(&db, merchant).await?;
                    let txn = api::db::begin_write(&db).await?;
                    let mut s = api::payouts::service::settings(&txn, merchant, env).await?;
                    let before = audit::payout_settings_json(&s);
                    if let Some(v) = auto_approve {
                        s.payout_auto_approve = v;
                    }
                    if let Some(v) = delay_secs {
                        if !(0..=30 * 24 * 3600).contains(&v) {
                            bail!("--delay-secs must be between 0 and 2592000");
                        }
                        s.payout_delay_secs = v;
                    }
                    if let Some(v) = payout_fee_allocation {
                        s.payout_fee_allocation = v;
                    }
                    if let Some(v) = network_fee_allocation {
                        s.network_fee_allocation = v;
                    }
                    if let Some(v) = refund_fee_allocation {
                        s.refund_fee_allocation = v;
                    }
                    s.updated_at = chrono::Utc::now();
                    api::payouts::service::save_settings(&txn, s.clone()).await?;
                    let entry = Entry::new(actor, "payout.settings", "payout_settings", merchant)
                        .merchant(merchant, Some(env))
                        .change(Some(before), Some(audit::payout_settings_json(&s)));
                    record(&txn, entry).await?;
                    txn.commit().await?;
                    println!(
                        "{merchant} {env} auto_approve={} delay_secs={} payout_fee_allocation={:?} network_fee_allocation={:?} refund_fee_allocation={:?}",
                        s.payout_auto_approve,
                        s.payout_delay_secs,
                        s.payout_fee_allocation,
                        s.network_fee_allocation,
                        s.refund_fee_allocation
                    );
                }
            }
            Ok(())
        }
        Command::Ledger(cmd) => {
            let db = connect(&config).await?;
            match cmd {
                LedgerCmd::Adjust { merchant, env, gate, amount, reason } => {
                    merchants::get_merchant(&db, merchant).await?;
                    let g = api::gates::find(&gate).with_context(|| format!("unknown gate {gate:?}"))?;
                    let amount = Decimal::from_str(&amount).context("--amount must be a signed decimal")?;
                    if reason.trim().is_empty() {
                        bail!("--reason must not be empty");
                    }
                    let txn = api::db::begin_write(&db).await?;
                    let before = audit::balance_json(balance_row(&txn, merchant, env, g.id).await?.as_ref());
                    let b = api::ledger::adjust(&txn, merchant, env, g, amount, reason.trim()).await?;
                    let mut after = audit::balance_json(Some(&b));
                    after["amount"] = amount.to_string().into();
                    let entry = Entry::new(actor, "ledger.adjust", "balance", g.id)
                        .merchant(merchant, Some(env))
                        .change(Some(before), Some(after))
                        .reason(Some(&reason));
                    record(&txn, entry).await?;
                    txn.commit().await?;
                    println!(
                        "{} {} available={} pending={} reserved={}",
                        g.id, env, b.available, b.pending, b.reserved
                    );
                }
                LedgerCmd::Balances { merchant, env } => {
                    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
                    let rows = entity::balance::Entity::find()
                        .filter(entity::balance::Column::MerchantId.eq(merchant))
                        .filter(entity::balance::Column::Environment.eq(env))
                        .order_by_asc(entity::balance::Column::GateId)
                        .all(&db)
                        .await?;
                    for b in rows {
                        println!(
                            "{:<14} available={} pending={} reserved={}",
                            b.gate_id, b.available, b.pending, b.reserved
                        );
                    }
                }
            }
            Ok(())
        }
        Command::Keys(cmd) => {
            let db = connect(&config).await?;
            match cmd {
                KeyCmd::Create { merchant, env, permissions, label } => {
                    let perms = parse_permissions(&permissions)?;
                    let txn = api::db::begin_write(&db).await?;
                    let (k, key) = merchants::create_api_key(&txn, merchant, env, perms, label.as_deref()).await?;
                    let entry = Entry::new(actor, "api_key.create", "api_key", k.id)
                        .merchant(k.merchant_id, Some(k.environment))
                        .change(None, Some(audit::key_json(&k)));
                    record(&txn, entry).await?;
                    txn.commit().await?;
                    eprintln!("key id {} ({}) with permissions {}", k.id, k.environment, permission_list(perms));
                    eprintln!("store the key now, it is not shown again:");
                    println!("{key}");
                }
                KeyCmd::List { merchant } => {
                    for k in merchants::list_api_keys(&db, merchant).await? {
                        let perms: Vec<&str> =
                            k.permissions.as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
                        let state = match k.revoked_at {
                            Some(t) => format!("revoked {}", t.to_rfc3339()),
                            None => "active".into(),
                        };
                        println!(
                            "{}  merchant={} {}… {} [{}] {}",
                            k.id,
                            k.merchant_id,
                            k.key_prefix,
                            state,
                            perms.join(","),
                            k.label.unwrap_or_default()
                        );
                    }
                }
                KeyCmd::Revoke { key_id } => {
                    let txn = api::db::begin_write(&db).await?;
                    let prior = <entity::api_key::Entity as sea_orm::EntityTrait>::find_by_id(key_id).one(&txn).await?;
                    let k = merchants::revoke_api_key(&txn, key_id).await?;
                    // A key revoked before is left as it is: nothing changed, nothing to record.
                    if let Some(prior) = prior.filter(|p| p.revoked_at.is_none()) {
                        let before = audit::key_json(&prior);
                        let entry = Entry::new(actor, "api_key.revoke", "api_key", k.id)
                            .merchant(k.merchant_id, Some(k.environment))
                            .change(Some(before), Some(audit::key_json(&k)));
                        record(&txn, entry).await?;
                    }
                    txn.commit().await?;
                    println!("revoked {} at {}", k.id, k.revoked_at.map(|t| t.to_rfc3339()).unwrap_or_default());
                }
            }
            Ok(())
        }
    }
}

/// Prints the payouts not in a block after `older_than`: one line each with its age, nonce
/// state and what the chain says (where this process can ask it: sandbox, configured EVM nodes).
async fn stuck_payouts(
    db: &sea_orm::DatabaseConnection,
    config: &Config,
    older_than: chrono::Duration,
) -> anyhow::Result<()> {
    use workers::chain::Outgoing;
    let chains = workers::chain::Chains::new(db, &config.sandbox).with_evm(&config.evm);
    let now = chrono::Utc::now();
    let mut listed = 0;
    for p in api::payouts::operator::stuck_candidates(db, older_than).await? {
        let hash = p.tx_hash.clone().unwrap_or_default();
        let chain = match chains.get(p.environment, &p.gate_id) {
            Some(c) => match c.outgoing(&hash).await {
                Ok(Outgoing::Confirmations { confirmations, .. }) if confirmations > 0 => continue,
                Ok(Outgoing::Failed(_)) => continue,
                Ok(Outgoing::Confirmations { .. }) => "in the mempool".to_owned(),
                Ok(Outgoing::Unknown) => "unknown to the node".to_owned(),
                // The error may name the endpoint (and a provider key in its URL): not printed.
                Err(_) => "the node did not answer".to_owned(),
            },
            None => "no chain adapter here".to_owned(),
        };
        let since = p.broadcast_at.or(p.queued_at).unwrap_or(p.updated_at);
        println!(
            "{} {} {} {} tx={} waiting={}m ({})",
            p.id,
            p.environment,
            p.gate_id,
            p.status.as_str(),
            hash,
            (now - since).num_minutes(),
            chain
        );
        listed += 1;
    }
    if listed == 0 {
        println!("no stuck payouts");
    }
    Ok(())
}

/// The audit row of an operator payout decision.
fn payout_entry(
    actor: &str,
    action: &'static str,
    before: &entity::payout::Model,
    after: &entity::payout::Model,
    reason: Option<&str>,
) -> Entry {
    Entry::new(actor, action, "payout", after.id)
        .merchant(after.merchant_id, Some(after.environment))
        .change(Some(audit::payout_json(before)), Some(audit::payout_json(after)))
        .reason(reason)
}

async fn balance_row(
    db: &impl sea_orm::ConnectionTrait,
    merchant: Uuid,
    env: Environment,
    gate: &str,
) -> anyhow::Result<Option<entity::balance::Model>> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    Ok(entity::balance::Entity::find()
        .filter(entity::balance::Column::MerchantId.eq(merchant))
        .filter(entity::balance::Column::Environment.eq(env))
        .filter(entity::balance::Column::GateId.eq(gate))
        .one(db)
        .await?)
}

/// Connects and makes sure the schema is current (operators may run ops before the API).
pub(crate) async fn connect(config: &Config) -> anyhow::Result<sea_orm::DatabaseConnection> {
    let db =
        api::db::connect(config).await.with_context(|| format!("connecting to {}", redact(&config.database_url)))?;
    api::db::migrate(&db).await?;
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

async fn serve(config: Config) -> anyhow::Result<()> {
    if config.redis_url.is_some() {
        bail!(
            "`ops serve` runs the embedded single-process mode; unset redis_url (PAYGATE_REDIS_URL) or run the api and worker binaries"
        );
    }
    let listen = config.listen;
    let seed = config.embedded.seed_demo;
    let queues = workers::process::connect_queues(&config).await?;
    let worker_config = std::sync::Arc::new(config.clone());
    let state = api::bootstrap(config).await?;
    if seed && let Some((m, key)) = merchants::seed_demo(&state.db).await? {
        // Written without `println!`: a server whose stdout was closed must keep serving.
        use std::io::Write;
        let _ = write!(
            std::io::stdout(),
            "\nFirst start: created merchant {:?} ({}) and a test API key with every permission.\n\
             It is shown only this once:\n\n    {key}\n\n\
             Try:  curl -s -H 'X-API-Key: {key}' -H 'Content-Type: application/json' \\\n        \
             -d '{{\"currency\":\"BTC\",\"amount\":\"0.001\"}}' http://{listen}/v1/invoices\n\n",
            m.name,
            m.id
        );
        let _ = std::io::stdout().flush();
    }
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "paygate (embedded) listening; API docs at /docs");
    // Every worker stage runs in this process on the embedded queue.
    let stop = tokio_util::sync::CancellationToken::new();
    let (api_stop, stages_stop, after_api) = (stop.clone(), stop.clone(), stop.clone());
    let stages = tokio::spawn(workers::process::run_stages(
        &workers::stages::Stage::ALL,
        state.db.clone(),
        worker_config,
        queues,
        async move { stages_stop.cancelled().await },
    ));
    tokio::spawn(async move {
        api::app::shutdown_signal().await;
        stop.cancel();
    });
    api::app::serve(listener, state, async move { api_stop.cancelled().await }).await?;
    after_api.cancel();
    stages.await??;
    Ok(())
}
