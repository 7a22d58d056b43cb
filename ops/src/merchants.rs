//! `ops merchants`: create, list and change merchants' settings (rate limits included).

use std::str::FromStr;

use anyhow::Context;
use clap::{Args, Subcommand};
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::merchants::{self, MerchantSettings};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::{audit, connect};

#[derive(Subcommand)]
pub enum MerchantCmd {
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
    /// Invite a person to the merchant's dashboard; prints a one-time link (valid for
    /// `dashboard.invitation_ttl_secs`) where they set a password and enrol TOTP.
    Invite {
        merchant_id: Uuid,
        #[arg(long)]
        email: String,
        /// owner, admin, developer or viewer.
        #[arg(long, value_parser = parse_role)]
        role: entity::Role,
    },
}

fn parse_role(s: &str) -> Result<entity::Role, String> {
    entity::Role::parse(s).ok_or_else(|| format!("expected one of: {}", entity::Role::WIRE_LIST))
}

/// Per-merchant overrides of `[rate_limits]`: requests per the class's configured period, or
/// `default` to go back to the configured limit.
#[derive(Args, Default)]
pub struct RateLimitArgs {
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
pub enum RateLimitArg {
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

/// `reads=<n|default> writes=… test_helpers=…` of a merchant.
fn rate_limits_line(m: &entity::merchant::Model) -> String {
    let l = merchants::MerchantRateLimits::of(m);
    let show = |v: Option<u32>| v.map_or_else(|| "default".to_owned(), |n| n.to_string());
    format!("rate_limits: reads={} writes={} test_helpers={}", show(l.reads), show(l.writes), show(l.test_helpers))
}

#[derive(Args, Default)]
pub struct SettingsArgs {
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

pub async fn run(config: &Config, cmd: MerchantCmd, actor: &str) -> anyhow::Result<()> {
    let db = connect(config).await?;
    match cmd {
        MerchantCmd::Create { name, settings } => {
            let settings = settings.apply(MerchantSettings::default())?;
            let txn = domain::db::begin_write(&db).await?;
            let m = merchants::create_merchant(&txn, &name, &settings).await?;
            let entry = Entry::new(actor, "merchant.create", "merchant", m.id)
                .merchant(m.id.into(), None)
                .change(None, Some(audit::merchant_json(&m)));
            record(&txn, entry).await?;
            txn.commit().await?;
            println!("{}", m.id);
        }
        MerchantCmd::Invite { merchant_id, email, role } => {
            let txn = domain::db::begin_write(&db).await?;
            let now = chrono::Utc::now();
            let ttl =
                chrono::Duration::seconds(i64::try_from(config.dashboard.invitation_ttl_secs).unwrap_or(i64::MAX / 2));
            let (inv, token) =
                domain::users::invitations::create(&txn, merchant_id.into(), &email, role, actor, ttl, now).await?;
            txn.commit().await?;
            let link =
                config.public_base_url.join(&format!("dashboard/invite/{token}")).context("the invitation link")?;
            eprintln!(
                "invitation for {} as {} (expires {}); the link is shown once:",
                inv.email,
                inv.role,
                inv.expires_at.to_rfc3339()
            );
            println!("{link}");
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
            let m = merchants::get_merchant(&db, merchant_id.into()).await?;
            let limits = rate_limits.apply(merchants::MerchantRateLimits::of(&m));
            let current = MerchantSettings {
                base_currency: m.base_currency,
                invoice_lifetime_secs: m.invoice_lifetime_secs,
                underpayment_tolerance_percent: m.underpayment_tolerance_percent.value(),
            };
            let settings = settings.apply(current)?;
            let txn = domain::db::begin_write(&db).await?;
            let before = audit::merchant_json(&merchants::get_merchant(&txn, merchant_id.into()).await?);
            let mut m = merchants::update_settings(&txn, merchant_id.into(), &settings).await?;
            if rate_limits.given() {
                m = merchants::set_rate_limits(&txn, merchant_id.into(), &limits).await?;
            }
            let entry = Entry::new(actor, "merchant.settings", "merchant", m.id)
                .merchant(m.id.into(), None)
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
