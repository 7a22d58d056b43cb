//! `ops webhooks`: endpoints (set, show, rotate, remove), the `test` event, and deliveries
//! (list with filters, attempts, replay).

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::Subcommand;
use domain::audit::{Entry, record};
use domain::config::Config;
use domain::webhooks::admin::{self, DeliveryFilter};
use domain::webhooks::endpoints;
use domain::webhooks::outbound::TargetPolicy;
use domain::webhooks::secrets::SecretBox;
use entity::{DeliveryId, DeliveryStatus, Environment};
use sea_orm::DatabaseConnection;
use uuid::Uuid;
use workers::platform::Queues;
use workers::stages::DeliverWebhook;

use crate::args::{parse_span, parse_time};

#[derive(Debug, Subcommand)]
pub enum WebhooksCmd {
    /// Print a new key for `webhooks.secret_key` / `webhooks.secret_key_file` (64 hex characters).
    Keygen,
    /// Re-encrypt every endpoint secret under the current `webhooks.secret_key`: run it once
    /// every process reads the old key as one of `webhooks.previous_secret_keys` (docs/webhooks.md
    /// "Rotating the operator key"); then the old key can go.
    RotateKey,
    /// Run a local receiver that verifies and prints every delivery (development): point an
    /// endpoint at `http://127.0.0.1:<port>/` with insecure targets allowed.
    Listen {
        #[arg(long, default_value_t = 8099)]
        port: u16,
        /// The endpoint's secret(s) (`whsec_…`), to verify signatures.
        #[arg(long, required = true)]
        secret: Vec<String>,
    },
    /// Set the endpoint URL of a merchant in one environment (its only endpoint there, or the
    /// one `--endpoint` names). A new endpoint's secret (`whsec_…`) is printed once, and it
    /// receives every event; an existing endpoint keeps its secret.
    Set {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = crate::parse_env)]
        env: Environment,
        /// The endpoint's id, where the merchant has several in the environment.
        #[arg(long)]
        endpoint: Option<Uuid>,
        #[arg(long)]
        url: String,
    },
    /// Show the endpoint (never the secret).
    Show {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = crate::parse_env)]
        env: Environment,
        /// The endpoint's id, where the merchant has several in the environment.
        #[arg(long)]
        endpoint: Option<Uuid>,
    },
    /// Make a new secret, printed once. The previous one keeps signing beside it for the
    /// overlap, so receivers can switch without rejecting deliveries.
    Rotate {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = crate::parse_env)]
        env: Environment,
        /// The endpoint's id, where the merchant has several in the environment.
        #[arg(long)]
        endpoint: Option<Uuid>,
        /// How long the previous secret keeps signing; default `webhooks.rotation_overlap_secs`.
        #[arg(long, value_parser = parse_span)]
        overlap: Option<chrono::Duration>,
    },
    /// Remove the endpoint: new events are no longer delivered to it, and its deliveries still
    /// open stop (dead, never sent to another endpoint).
    Remove {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = crate::parse_env)]
        env: Environment,
        /// The endpoint's id, where the merchant has several in the environment.
        #[arg(long)]
        endpoint: Option<Uuid>,
    },
    /// Send a `test` event to the endpoint (to every endpoint of the merchant in the
    /// environment, or only to the one `--endpoint` names).
    Test {
        #[arg(long)]
        merchant: Uuid,
        #[arg(long, value_parser = crate::parse_env)]
        env: Environment,
        /// The endpoint's id, where the merchant has several in the environment.
        #[arg(long)]
        endpoint: Option<Uuid>,
        /// Wait up to this many seconds for the first attempt and print it (0: do not wait).
        #[arg(long, default_value_t = 30)]
        wait: u64,
    },
    /// Deliveries, newest first.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// Only these statuses (comma separated): pending, retrying, succeeded, dead.
        #[arg(long, value_delimiter = ',', value_parser = parse_status)]
        status: Vec<DeliveryStatus>,
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
    /// A delivery and every attempt: time, status code, latency, error, response body.
    Attempts { delivery: Uuid },
    /// Send deliveries again now, the retry schedule starting over (same delivery id); or, with
    /// `--missed`, send a merchant's past events that were never delivered (they happened
    /// before its endpoint existed) to its endpoint now.
    Replay {
        /// Delivery ids.
        #[arg(required_unless_present_any = ["failed", "missed"], conflicts_with_all = ["failed", "missed"])]
        ids: Vec<Uuid>,
        /// Every failed (dead or retrying) delivery the filters select.
        #[arg(long, conflicts_with = "missed")]
        failed: bool,
        /// The past events of `--merchant` in `--env` (created at or after `--since`, of type
        /// `--event`) that never had a delivery: one new delivery each, oldest first.
        #[arg(long, requires_all = ["merchant", "env"])]
        missed: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    #[arg(long)]
    merchant: Option<Uuid>,
    #[arg(long, value_parser = crate::parse_env)]
    env: Option<Environment>,
    /// Only the deliveries to this endpoint (with `--missed`: the endpoint to send to, where the
    /// merchant has several).
    #[arg(long)]
    endpoint: Option<Uuid>,
    /// Event type, e.g. `invoice.paid`.
    #[arg(long)]
    event: Option<String>,
    /// Created at or after: RFC 3339 time or an age such as `90m`, `6h`, `2d`.
    #[arg(long, value_parser = parse_time)]
    since: Option<DateTime<Utc>>,
    /// Created before: RFC 3339 time or an age.
    #[arg(long, value_parser = parse_time)]
    until: Option<DateTime<Utc>>,
}

impl FilterArgs {
    fn filter(&self, statuses: Vec<DeliveryStatus>, limit: u64) -> DeliveryFilter {
        DeliveryFilter {
            merchant_id: self.merchant,
            environment: self.env,
            endpoint_id: self.endpoint,
            statuses,
            event_type: self.event.clone(),
            since: self.since,
            until: self.until,
            limit,
        }
    }
}

fn parse_status(s: &str) -> Result<DeliveryStatus, String> {
    DeliveryStatus::parse(s).ok_or_else(|| format!("expected pending, retrying, succeeded or dead, got {s:?}"))
}

/// Runs one `ops webhooks` subcommand: `keygen` and `listen` without a database, every other one
/// on the configured database.
pub async fn run(config: &Config, cmd: WebhooksCmd, actor: &str) -> anyhow::Result<()> {
    let out = &mut std::io::stdout();
    // These two need no database.
    match cmd {
        WebhooksCmd::Keygen => return keygen(out),
        WebhooksCmd::Listen { port, secret } => return listen(port, &secret, out).await,
        _ => {}
    }
    let db = &crate::connect(config).await?;
    match cmd {
        WebhooksCmd::Keygen | WebhooksCmd::Listen { .. } => unreachable!("handled above"),
        WebhooksCmd::RotateKey => rotate_key(config, db, actor, out).await,
        WebhooksCmd::Set { merchant, env, endpoint, url } => {
            set(config, db, actor, (merchant, env, endpoint), &url, out).await
        }
        WebhooksCmd::Show { merchant, env, endpoint } => show(db, (merchant, env, endpoint), out).await,
        WebhooksCmd::Rotate { merchant, env, endpoint, overlap } => {
            rotate(config, db, actor, (merchant, env, endpoint), overlap, out).await
        }
        WebhooksCmd::Remove { merchant, env, endpoint } => remove(db, actor, (merchant, env, endpoint), out).await,
        WebhooksCmd::Test { merchant, env, endpoint, wait } => {
            send_test(config, db, (merchant, env, endpoint), wait, out).await
        }
        WebhooksCmd::List { filter, status, limit } => list(db, &filter, status, limit, out).await,
        WebhooksCmd::Attempts { delivery } => attempts(db, delivery, out).await,
        WebhooksCmd::Replay { missed: true, filter, .. } => replay_missed(config, db, actor, &filter, out).await,
        WebhooksCmd::Replay { ids, failed, filter, .. } => replay(config, db, actor, ids, failed, &filter, out).await,
    }
}

/// `keygen`: a new operator key for the endpoint secrets.
fn keygen(out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(out, "{}", SecretBox::new_key_hex())?;
    Ok(())
}

/// `rotate-key`: every endpoint secret and every dashboard user's TOTP key re-encrypted under
/// the current key, audited when any changed, in one transaction.
async fn rotate_key(config: &Config, db: &DatabaseConnection, actor: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let sbox = secret_box(config)?;
    if config.webhooks.previous_secret_keys.is_empty() {
        eprintln!("no webhooks.previous_secret_keys configured: only secrets under the current key can be read");
    }
    let txn = domain::db::begin_write(db).await?;
    let done = endpoints::reseal_all(&txn, &sbox).await?;
    // Dashboard users' TOTP keys are sealed with the same key.
    let (totp_resealed, totp_unchanged) = domain::users::reseal_totp(&txn, &sbox).await?;
    if done.resealed > 0 || totp_resealed > 0 {
        let after = serde_json::json!({"resealed": done.resealed, "unchanged": done.unchanged,
            "totp_resealed": totp_resealed, "totp_unchanged": totp_unchanged});
        record(
            &txn,
            Entry::new(actor, "webhook_secrets.rotate_key", "webhook_endpoint", "*").change(None, Some(after)),
        )
        .await?;
    }
    txn.commit().await?;
    writeln!(
        out,
        "re-encrypted {} endpoint secrets under the current key; {} already were",
        done.resealed, done.unchanged
    )?;
    writeln!(
        out,
        "re-encrypted {totp_resealed} dashboard TOTP keys under the current key; {totp_unchanged} already were"
    )?;
    Ok(())
}

/// `set`: the endpoint URL set and audited in one transaction; a new endpoint's secret printed
/// once.
async fn set(
    config: &Config,
    db: &DatabaseConnection,
    actor: &str,
    (merchant, env, endpoint): Which,
    url: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let sbox = secret_box(config)?;
    let policy = TargetPolicy::from_config(&config.webhooks);
    let txn = domain::db::begin_write(db).await?;
    let before = endpoints::get_on(&txn, merchant.into(), env, endpoint).await?;
    let (info, secret) = endpoints::set_on(&txn, &sbox, policy, merchant.into(), env, endpoint, url).await?;
    let entry = endpoint_entry(actor, "webhook_endpoint.set", merchant, env)
        .change(crate::audit::endpoint_json(before.as_ref()), crate::audit::endpoint_json(Some(&info)));
    record(&txn, entry).await?;
    txn.commit().await?;
    match secret {
        Some(secret) => {
            eprintln!(
                "{} endpoint {} set to {}; its signing secret, shown only this once:",
                info.environment, info.id, info.url
            );
            writeln!(out, "{secret}")?;
        }
        None => eprintln!("{} endpoint set to {} (secret unchanged)", info.environment, info.url),
    }
    Ok(())
}

/// The merchant, the environment and the endpoint an endpoint command names (`--endpoint`,
/// needed only where the merchant has several there).
type Which = (Uuid, Environment, Option<Uuid>);

/// `show`: the endpoint, never its secret; an error when there is none.
async fn show(db: &DatabaseConnection, (merchant, env, endpoint): Which, out: &mut impl Write) -> anyhow::Result<()> {
    let Some(i) = endpoints::get_on(db, merchant.into(), env, endpoint).await? else {
        bail!("merchant {merchant} has no {env} webhook endpoint{}", named(endpoint));
    };
    writeln!(out, "merchant {} {}: {}", i.merchant_id, i.environment, i.url)?;
    writeln!(out, "endpoint {}{}", i.id, if i.disabled { " (disabled)" } else { "" })?;
    if let Some(d) = &i.description {
        writeln!(out, "description: {d}")?;
    }
    if i.enabled_events.is_empty() {
        writeln!(out, "events: all")?;
    } else {
        writeln!(out, "events: {}", i.enabled_events.join(", "))?;
    }
    writeln!(out, "created {}  updated {}", i.created_at.to_rfc3339(), i.updated_at.to_rfc3339())?;
    if let Some(t) = i.previous_secret_until {
        writeln!(out, "rotating: the previous secret also signs until {}", t.to_rfc3339())?;
    }
    Ok(())
}

/// `rotate`: a new secret, the previous one signing beside it for `overlap` (default
/// `webhooks.rotation_overlap_secs`), audited in one transaction; the new secret printed once.
async fn rotate(
    config: &Config,
    db: &DatabaseConnection,
    actor: &str,
    (merchant, env, endpoint): Which,
    overlap: Option<chrono::Duration>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let sbox = secret_box(config)?;
    let overlap = overlap.unwrap_or_else(|| {
        chrono::Duration::seconds(i64::try_from(config.webhooks.rotation_overlap_secs).unwrap_or(i64::MAX))
    });
    let txn = domain::db::begin_write(db).await?;
    let before = endpoints::get_on(&txn, merchant.into(), env, endpoint).await?;
    let (info, secret) = endpoints::rotate_on(&txn, &sbox, merchant.into(), env, endpoint, overlap).await?;
    // The secrets themselves are never recorded.
    let entry = endpoint_entry(actor, "webhook_endpoint.rotate_secret", merchant, env)
        .change(crate::audit::endpoint_json(before.as_ref()), crate::audit::endpoint_json(Some(&info)));
    record(&txn, entry).await?;
    txn.commit().await?;
    match info.previous_secret_until {
        Some(t) => eprintln!("new secret; the previous one also signs until {}. Shown only this once:", t.to_rfc3339()),
        None => eprintln!("new secret, signing alone from now. Shown only this once:"),
    }
    writeln!(out, "{secret}")?;
    Ok(())
}

/// `remove`: the endpoint removed and audited in one transaction; an error when there is none.
async fn remove(
    db: &DatabaseConnection,
    actor: &str,
    (merchant, env, endpoint): Which,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let txn = domain::db::begin_write(db).await?;
    let Some((before, stopped)) = endpoints::remove_on(&txn, merchant.into(), env, endpoint).await? else {
        bail!("merchant {merchant} has no {env} webhook endpoint{}", named(endpoint));
    };
    let entry = endpoint_entry(actor, "webhook_endpoint.remove", merchant, env)
        .change(crate::audit::endpoint_json(Some(&before)), Some(serde_json::json!({"deliveries_stopped": stopped})));
    record(&txn, entry).await?;
    txn.commit().await?;
    writeln!(
        out,
        "removed the {env} endpoint {} of merchant {merchant}; {stopped} open deliveries stopped",
        before.id
    )?;
    Ok(())
}

fn named(endpoint: Option<Uuid>) -> String {
    endpoint.map(|e| format!(" {e}")).unwrap_or_default()
}

/// `test`: a `test` event queued; with `wait` > 0 seconds, its first attempt printed.
async fn send_test(
    config: &Config,
    db: &DatabaseConnection,
    (merchant, env, endpoint): Which,
    wait: u64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let event_id = match endpoint {
        None => admin::send_test(db, merchant.into(), env).await?,
        Some(id) => {
            let (event_id, delivery) = admin::send_test_to(db, merchant.into(), env, id, true).await?;
            let queues = crate::jobs::connect(config).await;
            enqueue(&queues, &[delivery]).await?;
            event_id
        }
    };
    writeln!(out, "test event {event_id} queued")?;
    if wait > 0 {
        wait_for_attempt(db, event_id.into(), Duration::from_secs(wait), out).await?;
    }
    Ok(())
}

/// `list`: the deliveries the filters select, newest first, one line each.
async fn list(
    db: &DatabaseConnection,
    filter: &FilterArgs,
    status: Vec<DeliveryStatus>,
    limit: u64,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let rows = admin::list(db, &filter.filter(status, limit)).await?;
    writeln!(
        out,
        "{:<36}  {:<24}  {:<9}  {:>8}  {:>4}  {:<24}  MERCHANT/ENV",
        "DELIVERY", "EVENT", "STATUS", "ATTEMPTS", "LAST", "CREATED"
    )?;
    for d in rows {
        writeln!(
            out,
            "{:<36}  {:<24}  {:<9}  {:>8}  {:>4}  {:<24}  {}/{}",
            d.id,
            d.event_type,
            d.status.as_str(),
            d.attempt_count,
            d.last_status_code.map_or_else(|| "-".into(), |c| c.to_string()),
            d.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            d.merchant_id,
            d.environment
        )?;
    }
    Ok(())
}

/// `attempts`: a delivery and each of its attempts, one line each.
async fn attempts(db: &DatabaseConnection, delivery: Uuid, out: &mut impl Write) -> anyhow::Result<()> {
    let (d, attempts) = admin::attempts(db, delivery.into()).await?;
    writeln!(
        out,
        "delivery {} ({}), event {} of merchant {} {}",
        d.id, d.event_type, d.event_id, d.merchant_id, d.environment
    )?;
    write!(out, "status {}", d.status.as_str())?;
    if d.status.is_open() {
        write!(out, ", next attempt at {}", d.next_attempt_at.to_rfc3339())?;
    }
    writeln!(out)?;
    for a in attempts {
        writeln!(
            out,
            "#{:<3} {}  {:>6} ms  {:<4}  {}{}",
            a.attempt_no,
            a.started_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            a.latency_ms,
            a.status_code.map_or_else(|| "-".into(), |c| c.to_string()),
            if a.succeeded { "ok" } else { a.error.as_deref().unwrap_or("failed") },
            a.response_body
                .filter(|b| !b.is_empty())
                .map(|b| format!("  body: {}", b.replace('\n', " ")))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// `replay --missed`: one new delivery for each past event of the merchant that never had one,
/// created and audited (when any) in one transaction, then enqueued.
async fn replay_missed(
    config: &Config,
    db: &DatabaseConnection,
    actor: &str,
    filter: &FilterArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (Some(merchant), Some(env)) = (filter.merchant, filter.env) else {
        bail!("--missed needs --merchant and --env");
    };
    let txn = domain::db::begin_write(db).await?;
    let created =
        admin::deliver_missed(&txn, merchant.into(), env, filter.endpoint, filter.since, filter.event.as_deref())
            .await?;
    let after = serde_json::json!({"deliveries": created.len(), "since": filter.since, "event": filter.event});
    if !created.is_empty() {
        let entry = endpoint_entry(actor, "webhook_events.deliver_missed", merchant, env).change(None, Some(after));
        record(&txn, entry).await?;
    }
    txn.commit().await?;
    let queues = crate::jobs::connect(config).await;
    enqueue(&queues, &created).await?;
    writeln!(out, "sent {} past events to the endpoint", created.len())?;
    Ok(())
}

/// `replay <ids>` / `replay --failed`: each delivery replayed in its own transaction (one already
/// pending is left as it is), then the replayed ones enqueued.
async fn replay(
    config: &Config,
    db: &DatabaseConnection,
    actor: &str,
    ids: Vec<Uuid>,
    failed: bool,
    filter: &FilterArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let ids = if failed {
        admin::failed(db, &filter.filter(Vec::new(), u64::MAX)).await?
    } else {
        ids.into_iter().map(DeliveryId::from).collect()
    };
    let mut replayed = Vec::new();
    for id in ids {
        if replay_delivery(db, id, actor).await? {
            replayed.push(id);
        } else {
            eprintln!("{id}: already pending; left as it is");
        }
    }
    let queues = crate::jobs::connect(config).await;
    enqueue(&queues, &replayed).await?;
    writeln!(out, "replayed {} deliveries", replayed.len())?;
    Ok(())
}

fn endpoint_entry(actor: &str, action: &'static str, merchant: Uuid, env: Environment) -> Entry {
    Entry::new(actor, action, "webhook_endpoint", format!("{merchant}/{env}")).merchant(merchant.into(), Some(env))
}

/// Replays one delivery and records it, in one transaction; `false` when it was already pending.
async fn replay_delivery(db: &DatabaseConnection, id: DeliveryId, actor: &str) -> anyhow::Result<bool> {
    use sea_orm::EntityTrait;
    let txn = domain::db::begin_write(db).await?;
    let before = entity::webhook_delivery::Entity::find_by_id(id).one(&txn).await?;
    if !admin::replay(&txn, id).await? {
        return Ok(false);
    }
    let after = entity::webhook_delivery::Entity::find_by_id(id).one(&txn).await?;
    if let (Some(before), Some(after)) = (before, after) {
        let entry = Entry::new(actor, "webhook_delivery.replay", "webhook_delivery", id)
            .merchant(after.merchant_id.into(), Some(after.environment))
            .change(Some(crate::audit::delivery_json(&before)), Some(crate::audit::delivery_json(&after)));
        record(&txn, entry).await?;
    }
    txn.commit().await?;
    Ok(true)
}

fn secret_box(config: &Config) -> anyhow::Result<SecretBox> {
    SecretBox::from_config(config).context("the webhook secrets' key")
}

/// Enqueues the deliveries; if the queue is unreachable they are still due, and the deliverer's
/// sweeper picks them up after `webhooks.stale_after_secs`.
async fn enqueue(queues: &anyhow::Result<Queues>, ids: &[DeliveryId]) -> anyhow::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    match queues {
        Ok(q) => {
            q.push_many(ids.iter().map(|&id| DeliverWebhook { delivery_id: id.into() })).await?;
        }
        Err(e) => eprintln!("queue unreachable ({e}); the deliverer's sweeper will pick them up"),
    }
    Ok(())
}

async fn wait_for_attempt(
    db: &DatabaseConnection,
    event_id: Uuid,
    wait: Duration,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        let d = entity::webhook_delivery::Entity::find()
            .filter(entity::webhook_delivery::Column::EventId.eq(event_id))
            .one(db)
            .await?;
        if let Some(d) = d
            && d.attempt_count > 0
            && d.lease_until.is_none()
        {
            let (_, attempts) = admin::attempts(db, d.id.into()).await?;
            if let Some(a) = attempts.last() {
                let code = a.status_code.map_or_else(|| "no answer".into(), |c| format!("HTTP {c}"));
                let what = if a.succeeded { "delivered".to_owned() } else { a.error.clone().unwrap_or_default() };
                writeln!(out, "delivery {}: {code} in {} ms, {what}", d.id, a.latency_ms)?;
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!(
        "no attempt within {}s; is the webhook-deliverer running? See `ops webhooks list --event test`",
        wait.as_secs()
    )
}

async fn listen(port: u16, secrets: &[String], out: &mut impl Write) -> anyhow::Result<()> {
    use api::webhooks::receiver::{Behaviour, Receiver};
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let rx = Receiver::start(([127, 0, 0, 1], port).into(), &refs, Behaviour::Ok(Duration::ZERO)).await?;
    eprintln!("listening on http://{}/ (Ctrl-C to stop); answering 200 to verified deliveries, 400 otherwise", rx.addr);
    let mut shown = 0;
    loop {
        let stop = tokio::select! {
            _ = tokio::signal::ctrl_c() => true,
            () = tokio::time::sleep(Duration::from_millis(200)) => false,
        };
        for r in rx.received().into_iter().skip(shown) {
            shown += 1;
            let check = if r.verified { "signature ok" } else { "SIGNATURE REJECTED" };
            writeln!(out, "{} {} delivery {} ({check})\n{}", r.at.to_rfc3339(), r.event, r.delivery_id, r.body)?;
            out.flush()?;
        }
        if stop {
            return Ok(());
        }
    }
}
