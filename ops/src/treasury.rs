//! `ops treasury`: the operator's own books (the house account, `domain::treasury`).

use std::str::FromStr;

use anyhow::{Context, bail};
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::treasury;
use entity::Environment;
use rust_decimal::Decimal;

use crate::{connect, parse_env};

#[derive(Subcommand)]
pub enum TreasuryCmd {
    /// Add (positive) or take out (negative, refused below zero) the house's inventory of a
    /// gate: what the `treasury` venue pays converted settlements from. A `house_funding`
    /// ledger entry with the reason, recorded in the audit log.
    Fund {
        #[arg(long, value_parser = parse_env)]
        env: Environment,
        /// Gate id, e.g. `tron_usdt`.
        #[arg(long)]
        gate: String,
        /// Signed decimal, e.g. `5000` or `-250.5`.
        #[arg(long, allow_hyphen_values = true)]
        amount: String,
        #[arg(long)]
        reason: String,
    },
    /// Reconciliation per gate: what is owed (merchant balances, unclaimed deposits) against
    /// what the chains hold (deposit addresses, hot wallet, cold address, read from the nodes),
    /// with the house's own balance between; difference = holdings − owed − house.
    Report {
        #[arg(long, value_parser = parse_env, default_value = "live")]
        env: Environment,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Exits non-zero when a gate's holdings fall short of what is owed by more than its
    /// `treasury.gates.<gate>.tolerance`, or a balance could not be read (for cron and alerting).
    Check {
        #[arg(long, value_parser = parse_env, default_value = "live")]
        env: Environment,
    },
    /// The house's holdings per gate and its net position per asset (with the exposure caps),
    /// so the operator can rebalance on an exchange.
    Position {
        #[arg(long, value_parser = parse_env, default_value = "live")]
        env: Environment,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(config: &Config, cmd: TreasuryCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        TreasuryCmd::Fund { env, gate, amount, reason } => {
            let g = domain::gates::find(&gate).with_context(|| format!("unknown gate {gate:?}"))?;
            let amount = Decimal::from_str(&amount).context("--amount must be a signed decimal")?;
            if reason.trim().is_empty() {
                bail!("--reason must not be empty");
            }
            let txn = domain::db::begin_write(&db).await?;
            let before = treasury::holdings(&txn, env).await?.get(g.id).copied().unwrap_or_default();
            let b = treasury::fund(&txn, env, g, amount, &reason).await?;
            let change = |v: Decimal| serde_json::json!({ "gate": g.id, "available": v.to_string() });
            let mut after = change(b.available.0);
            after["amount"] = amount.to_string().into();
            let entry = Entry::new(actor, "treasury.fund", "house_balance", g.id)
                .merchant(treasury::HOUSE, Some(env))
                .change(Some(change(before)), Some(after))
                .reason(Some(&reason));
            record(&txn, entry).await?;
            txn.commit().await?;
            println!("house {} {} available={}", g.id, env, b.available);
        }
        TreasuryCmd::Report { env, json } => {
            let reports = reconcile(config, &db, env).await?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({ "environment": env.as_str(), "gates": reports })
                    )?
                );
            } else {
                print_report(env, &reports);
            }
        }
        TreasuryCmd::Check { env } => {
            let reports = reconcile(config, &db, env).await?;
            let short: Vec<String> = reports
                .iter()
                .filter(|r| r.short())
                .map(|r| match r.difference {
                    Some(d) => format!("{}: holdings short by {} (tolerance {})", r.gate, -d, r.tolerance),
                    None => format!("{}: not read ({})", r.gate, r.unread.join("; ")),
                })
                .collect();
            if !short.is_empty() {
                bail!("treasury check failed ({env}):\n  {}", short.join("\n  "));
            }
            println!("treasury check passed ({env}): {} gate(s) within tolerance", reports.len());
        }
        TreasuryCmd::Position { env, json } => {
            let holdings = treasury::holdings(&db, env).await?;
            let positions = treasury::positions(&holdings);
            let caps = &config.settlement.treasury.max_exposure;
            let cap_of = |asset: &str| caps.iter().find(|(a, _)| a.eq_ignore_ascii_case(asset)).map(|(_, c)| *c);
            if json {
                let gates: serde_json::Map<String, serde_json::Value> =
                    holdings.iter().map(|(g, v)| (g.clone(), v.to_string().into())).collect();
                let assets: serde_json::Map<String, serde_json::Value> = positions
                    .iter()
                    .map(|(a, v)| {
                        let cap = cap_of(a).map(|c| c.to_string());
                        ((*a).to_owned(), serde_json::json!({ "position": v.to_string(), "max_exposure": cap }))
                    })
                    .collect();
                let out = serde_json::json!({ "environment": env.as_str(), "gates": gates, "assets": assets });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("house holdings ({env})");
                for (g, v) in &holdings {
                    println!("  {g:<16} {v}");
                }
                println!("net position per asset");
                for (a, v) in &positions {
                    let cap = cap_of(a).map_or_else(|| "none (not taken)".to_owned(), |c| c.to_string());
                    println!("  {a:<8} {v:<24} max_exposure={cap}");
                }
            }
        }
    }
    Ok(())
}

/// The reconciliation of `env`, its balances read through the same chain adapters the workers use.
async fn reconcile(
    config: &Config,
    db: &sea_orm::DatabaseConnection,
    env: Environment,
) -> anyhow::Result<Vec<workers::treasury::GateReport>> {
    let chains = workers::chain::Chains::new(db, &config.sandbox).with_live(config);
    Ok(workers::treasury::report(db, &chains, config, env).await?)
}

fn print_report(env: Environment, reports: &[workers::treasury::GateReport]) {
    println!("treasury reconciliation ({env}); difference = holdings - owed - house");
    println!(
        "{:<14} {:>18} {:>14} {:>14} {:>18} {:>16} {:>16} {:>18}",
        "gate", "owed merchants", "unclaimed", "house", "deposits (addrs)", "hot", "cold", "difference"
    );
    let opt = |v: Option<Decimal>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    for r in reports {
        let deposits = format!("{} ({})", r.holdings.deposits, r.holdings.deposit_addresses);
        let diff = r.difference.map_or_else(|| "UNREAD".to_owned(), |d| d.to_string());
        let flag = if r.short() { "  SHORT" } else { "" };
        println!(
            "{:<14} {:>18} {:>14} {:>14} {:>18} {:>16} {:>16} {:>18}{flag}",
            r.gate,
            r.owed.merchants,
            r.owed.unclaimed,
            r.owed.house,
            deposits,
            opt(r.holdings.hot),
            opt(r.holdings.cold),
            diff
        );
        for u in &r.unread {
            println!("    unread: {u}");
        }
    }
}
