//! `ops deposits`: money that reached an address of ours but credits no invoice (recorded by
//! the deposit scanner as unclaimed: an untagged XRP payment, another asset sent to a deposit
//! address). The operator lists them with their depth, returns the money by hand once one is
//! refundable (at its gate's confirmations, not missing), and marks each resolved
//! (`domain::unclaimed`).

use clap::Subcommand;
use domain::config::Config;
use domain::unclaimed;
use entity::Environment;
use uuid::Uuid;

use crate::{connect, parse_env};

#[derive(Subcommand)]
pub enum DepositsCmd {
    /// Unclaimed deposits, oldest first, with their confirmations and whether each is refundable:
    /// unresolved ones still on the chain unless `--all`.
    Unclaimed {
        #[arg(long, value_parser = parse_env)]
        env: Option<Environment>,
        /// Resolved and gone ones too.
        #[arg(long)]
        all: bool,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Marks an unclaimed deposit resolved (returned to its sender, or otherwise accounted for);
    /// refused while it is not refundable (short of its gate's confirmations, missing, gone).
    Resolve {
        id: Uuid,
        /// What was done, e.g. `returned in tx 9F3A…`.
        #[arg(long)]
        reason: String,
    },
}

pub async fn run(config: &Config, cmd: DepositsCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        DepositsCmd::Unclaimed { env, all, json } => {
            for d in unclaimed::list(&db, env, all).await? {
                if json {
                    println!("{}", unclaimed::to_json(&d));
                    continue;
                }
                let state = match (d.resolved_at, unclaimed::not_refundable(&d)) {
                    (Some(t), _) => format!("resolved {}", t.to_rfc3339()),
                    (None, None) => "refundable".to_owned(),
                    (None, Some(_)) if d.missing_since_height.is_some() => "missing: not refundable".to_owned(),
                    (None, Some(_)) => format!("{}: not refundable", d.status),
                };
                println!(
                    "{} {} {:<12} {} #{} {} {} {} {}/{} confirmations {}",
                    d.id,
                    d.environment,
                    d.gate_id,
                    d.tx_hash,
                    d.output_index,
                    d.amount,
                    d.address_key,
                    d.reason,
                    d.confirmations.max(0),
                    unclaimed::required_confirmations(&d),
                    state,
                );
            }
        }
        DepositsCmd::Resolve { id, reason } => {
            unclaimed::resolve(&db, id.into(), &reason, actor).await?;
            println!("{id} resolved");
        }
    }
    Ok(())
}
