//! `ops ledger`: adjustments and balances.

use std::str::FromStr;

use anyhow::{Context, bail};
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::merchants;
use entity::Environment;
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::{audit, connect, parse_env};

#[derive(Subcommand)]
pub enum LedgerCmd {
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

pub async fn run(config: &Config, cmd: LedgerCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        LedgerCmd::Adjust { merchant, env, gate, amount, reason } => {
            merchants::get_merchant(&db, merchant.into()).await?;
            let g = domain::gates::find(&gate).with_context(|| format!("unknown gate {gate:?}"))?;
            let amount = Decimal::from_str(&amount).context("--amount must be a signed decimal")?;
            if reason.trim().is_empty() {
                bail!("--reason must not be empty");
            }
            let txn = domain::db::begin_write(&db).await?;
            let before = audit::balance_json(balance_row(&txn, merchant, env, g.id).await?.as_ref());
            let b = domain::ledger::adjust(&txn, merchant.into(), env, g, amount, reason.trim()).await?;
            let mut after = audit::balance_json(Some(&b));
            after["amount"] = amount.to_string().into();
            let entry = Entry::new(actor, "ledger.adjust", "balance", g.id)
                .merchant(merchant.into(), Some(env))
                .change(Some(before), Some(after))
                .reason(Some(&reason));
            record(&txn, entry).await?;
            txn.commit().await?;
            println!("{} {} available={} pending={} reserved={}", g.id, env, b.available, b.pending, b.reserved);
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
                println!("{:<14} available={} pending={} reserved={}", b.gate_id, b.available, b.pending, b.reserved);
            }
        }
    }
    Ok(())
}
