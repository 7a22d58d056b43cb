//! `ops audit list` and the audit rows' contents: who acts (`--actor`, else the OS user) and
//! the before/after snapshots each audited command records (`domain::audit`).

use std::io::Write;

use chrono::{DateTime, Utc};
use clap::Subcommand;
use domain::audit::Filter;
use entity::{api_key, balance, merchant, merchant_env_settings, payout, webhook_delivery};
use serde_json::{Value, json};
use uuid::Uuid;

#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// Audit rows, newest first.
    List {
        /// Action, e.g. `ledger.adjust`, `payout.approve`, `api_key.revoke`.
        #[arg(long)]
        action: Option<String>,
        #[arg(long)]
        actor: Option<String>,
        #[arg(long)]
        merchant: Option<Uuid>,
        /// The target's id: payout, key or delivery id, gate, merchant id, queue name.
        #[arg(long)]
        target: Option<String>,
        /// At or after: RFC 3339 time or an age such as `90m`, `6h`, `2d`.
        #[arg(long, value_parser = crate::args::parse_time)]
        since: Option<DateTime<Utc>>,
        /// Before: RFC 3339 time or an age.
        #[arg(long, value_parser = crate::args::parse_time)]
        until: Option<DateTime<Utc>>,
        #[arg(long, default_value_t = 50)]
        limit: u64,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// The name audit rows carry: `--actor`, else `$USER`/`$LOGNAME`, else `whoami`.
pub fn resolve_actor(flag: Option<String>) -> anyhow::Result<String> {
    let from_env = || ["USER", "LOGNAME"].iter().find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()));
    let whoami = || {
        let out = std::process::Command::new("whoami").output().ok()?;
        let name = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !name.is_empty()).then_some(name)
    };
    let actor = match flag {
        Some(a) => a.trim().to_owned(),
        None => from_env().or_else(whoami).unwrap_or_else(|| "unknown".into()),
    };
    if actor.is_empty() || actor.len() > 128 {
        anyhow::bail!("--actor must be 1 to 128 characters");
    }
    Ok(actor)
}

pub async fn run(db: &sea_orm::DatabaseConnection, cmd: AuditCmd, out: &mut impl Write) -> anyhow::Result<()> {
    let AuditCmd::List { action, actor, merchant, target, since, until, limit, json } = cmd;
    let filter = Filter { action, actor, merchant_id: merchant, target_id: target, since, until, limit };
    let rows = domain::audit::list(db, &filter).await?;
    if json {
        for r in rows {
            let row = json!({
                "id": r.id, "at": r.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), "actor": r.actor,
                "action": r.action, "target_type": r.target_type, "target_id": r.target_id,
                "merchant_id": r.merchant_id, "environment": r.environment.map(|e| e.as_str()),
                "before": r.before, "after": r.after, "reason": r.reason,
            });
            writeln!(out, "{row}")?;
        }
        return Ok(());
    }
    writeln!(out, "{:<24}  {:<16}  {:<24}  {:<52}  {:<41}  REASON", "AT", "ACTOR", "ACTION", "TARGET", "MERCHANT/ENV")?;
    for r in rows {
        let merchant = match (r.merchant_id, r.environment) {
            (Some(m), Some(e)) => format!("{m}/{e}"),
            (Some(m), None) => m.to_string(),
            _ => "-".into(),
        };
        writeln!(
            out,
            "{:<24}  {:<16}  {:<24}  {:<52}  {:<41}  {}",
            r.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            r.actor,
            r.action,
            format!("{} {}", r.target_type, r.target_id),
            merchant,
            r.reason.unwrap_or_default()
        )?;
    }
    Ok(())
}

pub fn merchant_json(m: &merchant::Model) -> Value {
    json!({
        "name": m.name, "base_currency": m.base_currency, "invoice_lifetime_secs": m.invoice_lifetime_secs,
        "underpayment_tolerance_percent": m.underpayment_tolerance_percent.value().to_string(),
        "rate_limit_reads": m.rate_limit_reads, "rate_limit_writes": m.rate_limit_writes,
        "rate_limit_test_helpers": m.rate_limit_test_helpers,
    })
}

pub fn key_json(k: &api_key::Model) -> Value {
    json!({
        "key_prefix": k.key_prefix, "permissions": k.permissions, "label": k.label,
        "revoked_at": k.revoked_at.map(|t| t.to_rfc3339()),
    })
}

pub fn payout_json(p: &payout::Model) -> Value {
    json!({
        "status": p.status.as_str(), "executable_at": p.executable_at.map(|t| t.to_rfc3339()),
        "failure_reason": p.failure_reason,
    })
}

pub fn balance_json(b: Option<&balance::Model>) -> Value {
    match b {
        Some(b) => json!({
            "available": b.available.value().to_string(), "pending": b.pending.value().to_string(),
            "reserved": b.reserved.value().to_string(),
        }),
        None => json!({"available": "0", "pending": "0", "reserved": "0"}),
    }
}

pub fn payout_settings_json(s: &merchant_env_settings::Model) -> Value {
    json!({
        "payout_auto_approve": s.payout_auto_approve, "payout_delay_secs": s.payout_delay_secs,
        "payout_fee_allocation": s.payout_fee_allocation.as_str(),
        "network_fee_allocation": s.network_fee_allocation.as_str(),
        "refund_fee_allocation": s.refund_fee_allocation.as_str(),
        "merchant_approves": s.merchant_approves,
        "auto_approve_limit": s.auto_approve_limit.map(|a| a.0.to_string()),
    })
}

pub fn endpoint_json(info: Option<&domain::webhooks::endpoints::EndpointInfo>) -> Option<Value> {
    info.map(|i| {
        json!({
            "endpoint_id": i.id,
            "url": i.url,
            "description": i.description,
            "enabled_events": i.enabled_events,
            "disabled": i.disabled,
            "previous_secret_until": i.previous_secret_until.map(|t| t.to_rfc3339()),
        })
    })
}

pub fn delivery_json(d: &webhook_delivery::Model) -> Value {
    json!({ "status": d.status.as_str(), "attempt_count": d.attempt_count })
}
