//! `ops keys`: create, list and revoke API keys.

use anyhow::Context;
use api::auth::{Permission, Permissions};
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::merchants;
use entity::{Environment, MerchantId};
use uuid::Uuid;

use crate::{audit, connect, parse_env};

#[derive(Subcommand)]
pub enum KeyCmd {
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

pub async fn run(config: &Config, cmd: KeyCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        KeyCmd::Create { merchant, env, permissions, label } => {
            let perms = parse_permissions(&permissions)?;
            let txn = domain::db::begin_write(&db).await?;
            let (k, key) = merchants::create_api_key(&txn, merchant.into(), env, perms, label.as_deref()).await?;
            let entry = Entry::new(actor, "api_key.create", "api_key", k.id)
                .merchant(k.merchant_id.into(), Some(k.environment))
                .change(None, Some(audit::key_json(&k)));
            record(&txn, entry).await?;
            txn.commit().await?;
            eprintln!("key id {} ({}) with permissions {}", k.id, k.environment, permission_list(perms));
            eprintln!("store the key now, it is not shown again:");
            println!("{key}");
        }
        KeyCmd::List { merchant } => {
            for k in merchants::list_api_keys(&db, merchant.map(MerchantId::from)).await? {
                let perms: Vec<&str> =
                    k.permissions.as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
                let state = match k.revoked_at {
                    Some(t) if t > chrono::Utc::now() => format!("rolled, works until {}", t.to_rfc3339()),
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
            let txn = domain::db::begin_write(&db).await?;
            let prior = <entity::api_key::Entity as sea_orm::EntityTrait>::find_by_id(key_id).one(&txn).await?;
            let k = merchants::revoke_api_key(&txn, key_id.into()).await?;
            // A key revoked before is left as it is: nothing changed, nothing to record (a rolled
            // key still in its overlap is revoked now: recorded).
            if let Some(prior) = prior.filter(|p| p.revoked_at != k.revoked_at) {
                let before = audit::key_json(&prior);
                let entry = Entry::new(actor, "api_key.revoke", "api_key", k.id)
                    .merchant(k.merchant_id.into(), Some(k.environment))
                    .change(Some(before), Some(audit::key_json(&k)));
                record(&txn, entry).await?;
            }
            txn.commit().await?;
            println!("revoked {} at {}", k.id, k.revoked_at.map(|t| t.to_rfc3339()).unwrap_or_default());
        }
    }
    Ok(())
}
