//! `ops sweeps`: the sweeps the payout executor's process runs (`workers::sweeper`).

use anyhow::bail;
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use entity::{SweepStatus, sweep};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use uuid::Uuid;

use crate::connect;

#[derive(Subcommand)]
pub enum SweepsCmd {
    /// Sweeps, newest first: open ones (planned, topping up, sending) unless `--all`.
    List {
        #[arg(long)]
        all: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Send an open sweep's stored transaction (its gas top-up, or the sweep) again now and
    /// print the node's answer. Nothing new is signed; the payout executor does that.
    Retry { sweep_id: Uuid },
    /// End an open sweep whose transaction can never be mined: nothing signed yet, or its stored
    /// transaction provably dead as the node shows. Refused while it may still be mined. The
    /// address is planned afresh by a later round.
    Fail {
        sweep_id: Uuid,
        #[arg(long)]
        reason: String,
    },
}

fn row_json(s: &sweep::Model) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "environment": s.environment.as_str(),
        "gate_id": s.gate_id,
        "address": s.address,
        "destination": s.destination,
        "status": s.status.as_str(),
        "planned_amount": s.planned_amount.0.to_string(),
        "amount": s.amount.map(|a| a.0.to_string()),
        "topup_amount": s.topup_amount.map(|a| a.0.to_string()),
        "topup_tx_hash": s.topup_tx_hash,
        "tx_hash": s.tx_hash,
        "fee": s.fee.map(|a| a.0.to_string()),
        "failure_reason": s.failure_reason,
        "created_at": s.created_at,
        "confirmed_at": s.confirmed_at,
    })
}

pub async fn run(config: &Config, cmd: SweepsCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    let chains = || workers::chain::Chains::new(&db, &config.sandbox).with_live(config);
    match cmd {
        SweepsCmd::List { all, json } => {
            let mut q = sweep::Entity::find().order_by_desc(sweep::Column::Id);
            if !all {
                q = q.filter(sweep::Column::Status.is_in([
                    SweepStatus::Planned,
                    SweepStatus::ToppingUp,
                    SweepStatus::Sending,
                ]));
            }
            let rows = q.all(&db).await?;
            if json {
                let out: Vec<_> = rows.iter().map(row_json).collect();
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                for s in &rows {
                    let amount = s.amount.map_or_else(|| format!("~{}", s.planned_amount), |a| a.to_string());
                    let tx = s.tx_hash.as_deref().or(s.topup_tx_hash.as_deref()).unwrap_or("-");
                    println!(
                        "{} {:<14} {:<10} {} -> {} {} tx={}{}",
                        s.id,
                        s.gate_id,
                        s.status.as_str(),
                        s.address,
                        s.destination,
                        amount,
                        tx,
                        s.failure_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                    );
                }
            }
        }
        SweepsCmd::Retry { sweep_id } => {
            let Some(s) = sweep::Entity::find_by_id(sweep_id).one(&db).await? else { bail!("no sweep {sweep_id}") };
            match workers::sweeper::resend(&chains(), &s).await? {
                Some(answer) => println!("{sweep_id} {}: the node answered {answer:?}", s.status.as_str()),
                None => println!(
                    "{sweep_id} {}: no stored transaction to send (the payout executor signs the next step)",
                    s.status.as_str()
                ),
            }
        }
        SweepsCmd::Fail { sweep_id, reason } => {
            if reason.trim().is_empty() {
                bail!("--reason must not be empty");
            }
            let (before, after) = workers::sweeper::fail_by_operator(&db, &chains(), sweep_id, reason.trim()).await?;
            let entry = Entry::new(actor, "sweep.fail", "sweep", sweep_id)
                .change(Some(row_json(&before)), Some(row_json(&after)))
                .reason(Some(reason.trim()));
            record(&db, entry).await?;
            println!("{sweep_id} {} ({})", after.status.as_str(), after.failure_reason.unwrap_or_default());
        }
    }
    Ok(())
}
