//! `ops payouts`: approve, reject, fail, find stuck and replace payouts; payout settings.

use anyhow::bail;
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::merchants;
use entity::Environment;
use uuid::Uuid;

use crate::{audit, connect, parse_env};

#[derive(Subcommand)]
pub enum PayoutCmd {
    /// Approve a payout in pending_approval; it becomes executable after the merchant's delay.
    Approve { payout_id: Uuid },
    /// Reject a payout in pending_approval: it fails with the reason and its funds are released.
    Reject {
        payout_id: Uuid,
        #[arg(long)]
        reason: String,
    },
    /// Fail an approved, queued or processing payout whose transaction can never be mined:
    /// never signed, or signed and provably dead as its gate's node shows (expired past its
    /// window on TRON/Solana/XRP, its nonce used by another transaction at depth on EVM, an
    /// input double-spent at depth on Bitcoin). Its funds are released (a refund follows) and
    /// `payout.failed` carries the reason. Refused while the transaction may still be mined.
    Fail {
        payout_id: Uuid,
        #[arg(long)]
        reason: String,
    },
    /// List payouts still queued or processing `--older-than` after their broadcast (or after
    /// they were queued), on every chain, each with why it waits (never signed, in the mempool,
    /// short of its depth, unknown to the node, provably dead).
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
        /// Payouts waiting for approval are approved by the merchant in the dashboard (owner or
        /// admin, with a TOTP code) instead of with `ops payouts approve`.
        #[arg(long)]
        merchant_approves: Option<bool>,
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

/// Prints the payouts waiting longer than `older_than`, one line each with its age and why.
async fn stuck_payouts(
    db: &sea_orm::DatabaseConnection,
    config: &Config,
    older_than: chrono::Duration,
) -> anyhow::Result<()> {
    let chains = workers::chain::Chains::new(db, &config.sandbox).with_live(config);
    let stuck = workers::executor::operator::stuck(db, &chains, older_than).await?;
    for s in &stuck {
        let p = &s.payout;
        println!(
            "{} {} {} {} tx={} waiting={}m ({})",
            p.id,
            p.environment,
            p.gate_id,
            p.status.as_str(),
            p.tx_hash.as_deref().unwrap_or("-"),
            s.waiting_minutes,
            s.why
        );
    }
    if stuck.is_empty() {
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
        .merchant(after.merchant_id.into(), Some(after.environment))
        .change(Some(audit::payout_json(before)), Some(audit::payout_json(after)))
        .reason(reason)
}

pub async fn run(config: &Config, cmd: PayoutCmd, actor: &str) -> anyhow::Result<()> {
    use domain::payouts::operator as payouts;
    let db = connect(config).await?;
    match cmd {
        PayoutCmd::Approve { payout_id } => {
            let txn = domain::db::begin_write(&db).await?;
            let before = payouts::load(&txn, payout_id.into()).await?;
            let p = payouts::approve(&txn, payout_id.into()).await?;
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
            let txn = domain::db::begin_write(&db).await?;
            let before = payouts::load(&txn, payout_id.into()).await?;
            let p = payouts::reject(&txn, payout_id.into(), reason.trim()).await?;
            record(&txn, payout_entry(actor, "payout.reject", &before, &p, Some(reason.trim()))).await?;
            txn.commit().await?;
            println!("{} {} ({})", p.id, p.status.as_str(), p.failure_reason.unwrap_or_default());
        }
        PayoutCmd::Fail { payout_id, reason } => {
            if reason.trim().is_empty() {
                bail!("--reason must not be empty");
            }
            // The node is asked first (no network read inside the write transaction); the
            // failure is then guarded on exactly the transaction it judged.
            let chains = workers::chain::Chains::new(&db, &config.sandbox).with_live(config);
            let dead =
                workers::executor::operator::dead_tx(&chains, &payouts::load(&db, payout_id.into()).await?).await?;
            let txn = domain::db::begin_write(&db).await?;
            let before = payouts::load(&txn, payout_id.into()).await?;
            let p = payouts::fail(&txn, payout_id.into(), reason.trim(), dead.as_ref()).await?;
            record(&txn, payout_entry(actor, "payout.fail", &before, &p, Some(reason.trim()))).await?;
            txn.commit().await?;
            println!("{} {} ({})", p.id, p.status.as_str(), p.failure_reason.unwrap_or_default());
        }
        PayoutCmd::Stuck { older_than } => stuck_payouts(&db, config, older_than).await?,
        PayoutCmd::Replace { payout_id } => {
            let txn = domain::db::begin_write(&db).await?;
            let before = payouts::load(&txn, payout_id.into()).await?;
            let r = payouts::request_replace(&txn, payout_id.into()).await?;
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
            merchant_approves,
            delay_secs,
            payout_fee_allocation,
            network_fee_allocation,
            refund_fee_allocation,
        } => {
            merchants::get_merchant(&db, merchant.into()).await?;
            let txn = domain::db::begin_write(&db).await?;
            let mut s = domain::payouts::service::settings(&txn, merchant.into(), env).await?;
            let before = audit::payout_settings_json(&s);
            if let Some(v) = auto_approve {
                s.payout_auto_approve = v;
            }
            if let Some(v) = merchant_approves {
                s.merchant_approves = v;
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
            domain::payouts::service::save_settings(&txn, s.clone()).await?;
            let entry = Entry::new(actor, "payout.settings", "payout_settings", merchant)
                .merchant(merchant.into(), Some(env))
                .change(Some(before), Some(audit::payout_settings_json(&s)));
            record(&txn, entry).await?;
            txn.commit().await?;
            println!(
                "{merchant} {env} auto_approve={} delay_secs={} payout_fee_allocation={:?} network_fee_allocation={:?} refund_fee_allocation={:?} merchant_approves={}",
                s.payout_auto_approve,
                s.payout_delay_secs,
                s.payout_fee_allocation,
                s.network_fee_allocation,
                s.refund_fee_allocation,
                s.merchant_approves
            );
        }
    }
    Ok(())
}
