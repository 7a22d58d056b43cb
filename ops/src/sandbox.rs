//! `ops sandbox`: drive the test environment's sandbox chains from the command line (the same
//! operations as the API's test helpers, for any merchant, through the same domain functions,
//! `domain::sandbox_payments`).

use anyhow::{Context, bail};
use clap::Subcommand;
use domain::config::Config;
use domain::sandbox_payments;
use entity::{Environment, invoice, static_address};
use rust_decimal::Decimal;
use sea_orm::{DatabaseConnection, EntityTrait};
use uuid::Uuid;

#[derive(Subcommand)]
pub enum SandboxCmd {
    /// Put a deposit to a test invoice's or static address's deposit address into the next block.
    Deposit {
        #[arg(long, conflicts_with = "address", required_unless_present = "address")]
        invoice: Option<Uuid>,
        #[arg(long)]
        address: Option<Uuid>,
        #[arg(long)]
        amount: Decimal,
        #[arg(long)]
        tx_hash: Option<String>,
    },
    /// Take a deposit off the sandbox chain (as a reorg would) and wake the confirmation tracker
    /// for its payment, however deep, as `POST /v1/test/deposits/{id}/reverse` does.
    Reverse { deposit_id: Uuid },
    /// Mine blocks on a gate's sandbox chain.
    Mine {
        #[arg(long)]
        gate: String,
        #[arg(long, default_value_t = 1)]
        blocks: u64,
    },
}

fn gate(gate_id: &str) -> anyhow::Result<&'static domain::gates::Gate> {
    domain::gates::find(gate_id).with_context(|| format!("unknown gate {gate_id:?}"))
}

pub async fn run(db: &DatabaseConnection, config: &Config, cmd: SandboxCmd) -> anyhow::Result<()> {
    match cmd {
        SandboxCmd::Deposit { invoice, address, amount, tx_hash } => {
            let (env, gate_id, key) = match (invoice, address) {
                (Some(id), _) => {
                    let inv =
                        invoice::Entity::find_by_id(id).one(db).await?.with_context(|| format!("no invoice {id}"))?;
                    match (inv.gate_id, inv.address_key) {
                        (Some(g), Some(k)) => (inv.environment, g, k),
                        _ => bail!("invoice {id} has no deposit address yet"),
                    }
                }
                (None, Some(id)) => {
                    let a = static_address::Entity::find_by_id(id)
                        .one(db)
                        .await?
                        .with_context(|| format!("no static address {id}"))?;
                    (a.environment, a.gate_id, a.address_key)
                }
                (None, None) => bail!("give --invoice or --address"),
            };
            if env != Environment::Test {
                bail!("sandbox deposits exist in the test environment only");
            }
            let gate = domain::gates::find(&gate_id).context("unknown gate")?;
            if amount <= Decimal::ZERO || amount.scale() > gate.decimals {
                bail!("--amount must be > 0 with at most {} decimals", gate.decimals);
            }
            let t = sandbox_payments::deposit(db, &config.sandbox, gate, &key, amount, tx_hash.as_deref()).await?;
            println!("{} {} tx {}:{} block {}", t.id, gate_id, t.tx_hash, t.output_index, t.block_height);
        }
        SandboxCmd::Reverse { deposit_id } => {
            let t = entity::sandbox_transfer::Entity::find_by_id(deposit_id)
                .one(db)
                .await?
                .with_context(|| format!("no sandbox deposit {deposit_id}"))?;
            sandbox_payments::reverse(db, &config.sandbox, gate(&t.gate_id)?, deposit_id.into())
                .await?
                .with_context(|| format!("no sandbox deposit {deposit_id}"))?;
            println!("{deposit_id} reversed");
        }
        SandboxCmd::Mine { gate, blocks } => {
            if !(1..=100_000).contains(&blocks) {
                bail!("--blocks must be 1..=100000");
            }
            let height = sandbox_payments::mine(db, &config.sandbox, self::gate(&gate)?, blocks).await?;
            println!("{gate} height {height}");
        }
    }
    Ok(())
}
