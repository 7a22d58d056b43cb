//! `ops deposits`: money that reached an address of ours but credits no invoice (recorded by
//! the deposit scanner as unclaimed: an untagged XRP payment, another asset sent to a deposit
//! address). The operator lists them, returns the money by hand, and marks each resolved.

use anyhow::{Context, bail};
use chrono::Utc;
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use entity::{Environment, unclaimed_deposit};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{connect, parse_env};

#[derive(Subcommand)]
pub enum DepositsCmd {
    /// Unclaimed deposits, oldest first: unresolved ones unless `--all`.
    Unclaimed {
        #[arg(long, value_parser = parse_env)]
        env: Option<Environment>,
        /// Resolved ones too.
        #[arg(long)]
        all: bool,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Marks an unclaimed deposit resolved (returned to its sender, or otherwise accounted for).
    Resolve {
        id: Uuid,
        /// What was done, e.g. `returned in tx 9F3A…`.
        #[arg(long)]
        reason: String,
    },
}

fn to_json(d: &unclaimed_deposit::Model) -> Value {
    json!({
        "id": d.id, "environment": d.environment.as_str(), "gate": d.gate_id, "tx_hash": d.tx_hash,
        "output_index": d.output_index, "address_key": d.address_key, "amount": d.amount.0.to_string(),
        "block_height": d.block_height, "reason": d.reason.as_str(), "seen_at": d.seen_at.to_rfc3339(),
        "resolved_at": d.resolved_at.map(|t| t.to_rfc3339()), "resolution": d.resolution,
    })
}

pub async fn run(config: &Config, cmd: DepositsCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        DepositsCmd::Unclaimed { env, all, json } => {
            let mut q = unclaimed_deposit::Entity::find().order_by_asc(unclaimed_deposit::Column::SeenAt);
            if let Some(env) = env {
                q = q.filter(unclaimed_deposit::Column::Environment.eq(env));
            }
            if !all {
                q = q.filter(unclaimed_deposit::Column::ResolvedAt.is_null());
            }
            for d in q.all(&db).await? {
                if json {
                    println!("{}", to_json(&d));
                } else {
                    println!(
                        "{} {} {:<12} {} #{} {} {} {} {}",
                        d.id,
                        d.environment,
                        d.gate_id,
                        d.tx_hash,
                        d.output_index,
                        d.amount,
                        d.address_key,
                        d.reason,
                        d.resolved_at
                            .map_or_else(|| "unresolved".to_owned(), |t| format!("resolved {}", t.to_rfc3339())),
                    );
                }
            }
        }
        DepositsCmd::Resolve { id, reason } => {
            if reason.trim().is_empty() {
                bail!("--reason must not be empty");
            }
            let txn = domain::db::begin_write(&db).await?;
            let before = unclaimed_deposit::Entity::find_by_id(id)
                .one(&txn)
                .await?
                .with_context(|| format!("no unclaimed deposit {id}"))?;
            // Guarded: of two operators resolving it, one does.
            let after = unclaimed_deposit::Entity::update_many()
                .col_expr(unclaimed_deposit::Column::ResolvedAt, Expr::value(Utc::now()))
                .col_expr(unclaimed_deposit::Column::Resolution, Expr::value(reason.trim()))
                .filter(unclaimed_deposit::Column::Id.eq(id))
                .filter(unclaimed_deposit::Column::ResolvedAt.is_null())
                .exec_with_returning(&txn)
                .await?;
            let Some(after) = after.into_iter().next() else {
                bail!("unclaimed deposit {id} is already resolved");
            };
            let entry = Entry::new(actor, "deposit.resolve", "unclaimed_deposit", id)
                .change(Some(to_json(&before)), Some(to_json(&after)))
                .reason(Some(&reason));
            record(&txn, entry).await?;
            txn.commit().await?;
            println!("{id} resolved");
        }
    }
    Ok(())
}
