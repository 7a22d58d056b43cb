//! Every `ops` command that changes money or access, run through the real binary on a
//! scratch SQLite database, leaves exactly one `audit_log` row (action, actor, target, reason);
//! a refused command leaves none. `ops audit list` filters.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use uuid::Uuid;

struct Ops {
    dir: tempfile::TempDir,
    /// Extra environment of the following runs.
    env: std::cell::RefCell<Vec<(String, String)>>,
}

impl Ops {
    fn new() -> Ops {
        Ops { dir: tempfile::tempdir().unwrap(), env: Default::default() }
    }

    fn set_env(&self, vars: &[(&str, &str)]) {
        *self.env.borrow_mut() = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    }

    fn database_url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.dir.path().join("ops.db").display())
    }

    fn jobs_file(&self) -> PathBuf {
        self.dir.path().join("jobs.sqlite")
    }

    /// Runs `ops` as the OS user `USER` (the actor unless `--actor` is given).
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_ops"))
            .args(args)
            .current_dir(self.dir.path())
            .env("PAYGATE_DATABASE_URL", self.database_url())
            .env("PAYGATE_QUEUE__SQLITE_PATH", self.jobs_file())
            .env("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")
            .env("USER", "oscar")
            .env("RUST_LOG", "error")
            .envs(self.env.borrow().iter().cloned())
            .output()
            .unwrap()
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "ops {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Every audit row, newest first (`ops audit list --json`).
    fn rows(&self, filters: &[&str]) -> Vec<Value> {
        let args = [&["audit", "list", "--json", "--limit", "1000"][..], filters].concat();
        self.ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// Runs a changing command; exactly one new row, the newest, with these fields. Returns it
    /// and the command's stdout.
    #[track_caller]
    fn audited(&self, args: &[&str], actor: &str, action: &str, target: &str, reason: Option<&str>) -> (Value, String) {
        let before = self.rows(&[]).len();
        let out = self.ok(args);
        let rows = self.rows(&[]);
        assert_eq!(rows.len(), before + 1, "ops {args:?} must leave exactly one audit row: {rows:#?}");
        let row = rows[0].clone();
        assert_eq!(row["action"], action, "{row}");
        assert_eq!(row["actor"], actor, "{row}");
        assert_eq!(row["target_id"], target, "{row}");
        assert_eq!(row["reason"], reason.map_or(Value::Null, Value::from), "{row}");
        (row, out)
    }

    /// A refused (or no-op) command: no new row.
    #[track_caller]
    fn unaudited(&self, args: &[&str], should_succeed: bool) {
        let before = self.rows(&[]).len();
        let out = self.run(args);
        assert_eq!(out.status.success(), should_succeed, "ops {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(self.rows(&[]).len(), before, "ops {args:?} must leave no audit row");
    }
}

/// Two payouts in `pending_approval` through the API's own service (the CLI cannot create one).
async fn pending_payouts(ops: &Ops, merchant: Uuid) -> [Uuid; 2] {
    use domain::payouts::service::{Created, create};
    let config = domain::config::Config { database_url: ops.database_url(), ..Default::default() };
    let state = api::bootstrap(config).await.unwrap();
    let who = api::auth::Principal {
        key_id: Uuid::new_v4().into(),
        merchant_id: merchant.into(),
        environment: entity::Environment::Test,
        permissions: api::auth::Permissions::all(),
        user_id: None,
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        let req = domain::payouts::types::CreatePayoutRequest {
            currency: Some("tron_usdt".into()),
            amount: Some("10".into()),
            destination: Some("TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP".into()),
            ..Default::default()
        };
        match create(&state, &who, &req).await.unwrap_or_else(|e| panic!("{}", e.message)) {
            Created::New(p) | Created::Replayed(p) => ids.push(p.id),
        }
    }
    [ids[0], ids[1]]
}

/// A dead webhook delivery of the merchant (the deliverer is not running in this test).
async fn dead_delivery(ops: &Ops, merchant: Uuid) -> Uuid {
    use sea_orm::{ActiveModelTrait, IntoActiveModel};
    let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
    let now = chrono::Utc::now();
    let d = entity::webhook_delivery::Model {
        id: Uuid::now_v7(),
        event_id: Uuid::now_v7(),
        endpoint_id: None,
        merchant_id: merchant,
        environment: entity::Environment::Test,
        event_type: "test".into(),
        body: "{}".into(),
        status: entity::DeliveryStatus::Dead,
        attempt_count: 8,
        retry_step: 8,
        next_attempt_at: now,
        lease_until: None,
        enqueued_at: None,
        last_status_code: Some(500),
        last_error: Some("HTTP 500".into()),
        event_created_at: now,
        created_at: now,
        updated_at: now,
        delivered_at: None,
        dead_at: Some(now),
        order_key: None,
        wait_for_earlier: false,
    };
    d.into_active_model().insert(&db).await.unwrap().id
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Doomed {
    n: u32,
}

impl workers::platform::Job for Doomed {
    const QUEUE: &'static str = "doomed";
}

/// Two dead jobs on the queue file the `ops` runs use; returns their ids.
async fn dead_jobs(ops: &Ops) -> Vec<String> {
    use workers::platform::{JobCtx, JobError, QueueBackend, Queues, Runtime, RuntimeSettings, StageSettings};
    let backend = QueueBackend::Sqlite { path: ops.jobs_file(), prefix: "paygate".into() };
    let queues = Queues::connect(&backend).await.unwrap();
    for n in 0..2 {
        queues.push(Doomed { n }).await.unwrap();
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let runtime = Runtime::new(queues.clone())
        .with_settings(RuntimeSettings { poll_interval: Duration::from_millis(50), ..Default::default() })
        .stage(StageSettings::default(), |job: Doomed, _ctx: JobCtx| async move {
            Err(JobError::permanent(anyhow::anyhow!("job {} cannot succeed", job.n)))
        });
    let running = tokio::spawn(runtime.run(stop.clone().cancelled_owned()));
    let start = Instant::now();
    let dead = loop {
        let dead = queues.dead("doomed", 10).await.unwrap();
        if dead.len() == 2 {
            break dead;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "jobs did not die");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    stop.cancel();
    running.await.unwrap().unwrap();
    dead.into_iter().map(|j| j.id).collect()
}

#[tokio::test]
async fn every_money_or_access_command_leaves_exactly_one_audit_row_and_refusals_none() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    assert!(ops.rows(&[]).is_empty());

    // Merchants (the actor is the OS user unless --actor is given).
    let m = ops.ok(&["merchants", "create", "--name", "Acme"]).trim().to_owned();
    let rows = ops.rows(&[]);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!((&rows[0]["action"], &rows[0]["actor"]), (&"merchant.create".into(), &"oscar".into()));
    assert_eq!((&rows[0]["target_id"], &rows[0]["after"]["name"]), (&m.as_str().into(), &"Acme".into()));
    let (row, _) = ops.audited(
        &["--actor", "alice", "merchants", "settings", &m, "--invoice-lifetime-secs", "900"],
        "alice",
        "merchant.settings",
        &m,
        None,
    );
    assert_eq!(row["before"]["invoice_lifetime_secs"], 3600, "{row}");
    assert_eq!(row["after"]["invoice_lifetime_secs"], 900, "{row}");
    assert_eq!(row["merchant_id"], m.as_str());
    ops.unaudited(&["merchants", "settings", &m, "--base-currency", "euro"], false);

    // Keys: create, revoke; a second revoke changes nothing and records nothing.
    let before = ops.rows(&[]).len();
    let key = ops.ok(&["keys", "create", "--merchant", &m, "--env", "live", "--permissions", "invoices:read"]);
    let rows = ops.rows(&[]);
    assert_eq!(rows.len(), before + 1);
    let key_id = rows[0]["target_id"].as_str().unwrap().to_owned();
    assert_eq!((&rows[0]["action"], &rows[0]["environment"]), (&"api_key.create".into(), &"live".into()));
    assert!(!rows[0].to_string().contains(&key.trim()[8..]), "the key itself must not be recorded");
    ops.unaudited(&["keys", "create", "--merchant", &m, "--env", "test", "--permissions", "invoices:delete"], false);
    let (row, _) = ops.audited(&["keys", "revoke", &key_id], "oscar", "api_key.revoke", &key_id, None);
    assert!(row["before"]["revoked_at"].is_null() && row["after"]["revoked_at"].is_string(), "{row}");
    ops.unaudited(&["keys", "revoke", &key_id], true);

    // Ledger adjustments; an overdraft is refused inside the transaction and leaves no row.
    let adjust = |amount: &str, reason: &str| {
        [
            "ledger",
            "adjust",
            "--merchant",
            &m,
            "--env",
            "test",
            "--gate",
            "tron_usdt",
            "--amount",
            amount,
            "--reason",
            reason,
        ]
        .map(str::to_owned)
    };
    let args = adjust("100", "opening funds");
    let (row, _) = ops.audited(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        "oscar",
        "ledger.adjust",
        "tron_usdt",
        Some("opening funds"),
    );
    assert_eq!((&row["before"]["available"], &row["after"]["available"]), (&"0".into(), &"100".into()), "{row}");
    let args = adjust("-1000", "too much");
    ops.unaudited(&args.iter().map(String::as_str).collect::<Vec<_>>(), false);

    // Payout settings, approval and rejection.
    let settings = ["payouts", "settings", "--merchant", &m, "--env", "test"];
    ops.audited(
        &[&settings[..], &["--auto-approve", "false", "--delay-secs", "60"]].concat(),
        "oscar",
        "payout.settings",
        &m,
        None,
    );
    ops.unaudited(&[&settings[..], &["--delay-secs", "-5"]].concat(), false);
    let [p1, p2] = pending_payouts(&ops, m.parse().unwrap()).await;
    let (p1, p2) = (p1.to_string(), p2.to_string());
    let (row, _) = ops.audited(&["payouts", "approve", &p1], "oscar", "payout.approve", &p1, None);
    assert_eq!((&row["before"]["status"], &row["after"]["status"]), (&"pending_approval".into(), &"approved".into()));
    ops.unaudited(&["payouts", "approve", &p1], false);
    // The approved payout was never signed: an operator may fail it (funds released); a
    // replacement needs a signed transaction, so it is refused and leaves no row.
    ops.unaudited(&["payouts", "replace", &p1], false);
    // `ops payouts <verb> <payout> --reason <reason>`, audited as `payout.<verb>` with the reason.
    let with_reason = |verb: &str, payout: &str, reason: &str| {
        let args = ["payouts", verb, payout, "--reason", reason];
        ops.audited(&args, "oscar", &format!("payout.{verb}"), payout, Some(reason)).0
    };
    let row = with_reason("fail", &p1, "recipient closed the account");
    assert_eq!((&row["before"]["status"], &row["after"]["status"]), (&"approved".into(), &"failed".into()), "{row}");
    ops.unaudited(&["payouts", "fail", &p1, "--reason", "again"], false);
    ops.unaudited(&["payouts", "reject", &p2, "--reason", "  "], false);
    let row = with_reason("reject", &p2, "destination on a sanctions list");
    assert_eq!(row["after"]["status"], "failed", "{row}");

    // Webhook endpoint: set, rotate, remove (the secrets are never recorded).
    let endpoint = format!("{m}/test");
    let stranger = Uuid::new_v4().to_string();
    ops.unaudited(
        &["webhooks", "set", "--merchant", &stranger, "--env", "test", "--url", "http://127.0.0.1:9/h"],
        false,
    );
    let (_, secret) = ops.audited(
        &["webhooks", "set", "--merchant", &m, "--env", "test", "--url", "http://127.0.0.1:9/hook"],
        "oscar",
        "webhook_endpoint.set",
        &endpoint,
        None,
    );
    let (row, rotated) = ops.audited(
        &["webhooks", "rotate", "--merchant", &m, "--env", "test"],
        "oscar",
        "webhook_endpoint.rotate_secret",
        &endpoint,
        None,
    );
    assert_eq!(row["before"]["url"], "http://127.0.0.1:9/hook", "{row}");
    ops.audited(
        &["webhooks", "remove", "--merchant", &m, "--env", "test"],
        "oscar",
        "webhook_endpoint.remove",
        &endpoint,
        None,
    );
    ops.unaudited(&["webhooks", "remove", "--merchant", &m, "--env", "test"], false);
    let all = ops.rows(&[]);
    for s in [secret.trim(), rotated.trim()] {
        assert!(s.starts_with("whsec_"), "{s}");
        assert!(!all.iter().any(|r| r.to_string().contains(&s["whsec_".len()..])), "a secret was recorded");
    }

    // Replays: a webhook delivery, dead jobs.
    let delivery = dead_delivery(&ops, m.parse().unwrap()).await.to_string();
    ops.unaudited(&["webhooks", "replay", &Uuid::new_v4().to_string()], false);
    let (row, _) = ops.audited(&["webhooks", "replay", &delivery], "oscar", "webhook_delivery.replay", &delivery, None);
    assert_eq!((&row["before"]["status"], &row["after"]["status"]), (&"dead".into(), &"pending".into()), "{row}");
    let jobs = dead_jobs(&ops).await;
    ops.unaudited(&["jobs", "replay", "doomed", "01UNKNOWN"], false);
    // The audit row is written before any job moves: with the database unreachable the
    // replay is refused and the job stays dead.
    ops.set_env(&[("PAYGATE_DATABASE_URL", "sqlite:///nonexistent-dir/ops.db?mode=ro")]);
    let out = ops.run(&["jobs", "replay", "doomed", &jobs[0]]);
    assert!(!out.status.success(), "replayed without an audit row: {}", String::from_utf8_lossy(&out.stdout));
    ops.set_env(&[]);
    assert!(ops.ok(&["jobs", "dead", "doomed"]).contains(&jobs[0]), "the job moved without its audit row");
    let (row, _) = ops.audited(&["jobs", "replay", "doomed", &jobs[0]], "oscar", "jobs.replay", "paygate:doomed", None);
    assert_eq!(row["after"]["ids"], serde_json::json!([jobs[0]]), "{row}");
    ops.audited(&["--actor", "bob", "jobs", "replay", "doomed", "--all"], "bob", "jobs.replay", "paygate:doomed", None);

    // Filters.
    let by_action = ops.rows(&["--action", "ledger.adjust"]);
    assert_eq!(by_action.len(), 1);
    assert_eq!(ops.rows(&["--actor", "alice"]).len(), 1);
    assert_eq!(ops.rows(&["--actor", "bob"]).len(), 1);
    assert_eq!(ops.rows(&["--target", &p2]).len(), 1);
    let merchant_rows = ops.rows(&["--merchant", &m]);
    assert!(merchant_rows.len() >= 12 && merchant_rows.iter().all(|r| r["merchant_id"] == m.as_str()));
    assert!(ops.rows(&["--since", "1h"]).len() == ops.rows(&[]).len());
    assert!(ops.rows(&["--until", "1h"]).is_empty());
    assert_eq!(ops.ok(&["audit", "list", "--json", "--limit", "3"]).lines().count(), 3);
    let newest_first: Vec<String> = ops.rows(&[]).iter().map(|r| r["at"].as_str().unwrap().to_owned()).collect();
    assert!(newest_first.windows(2).all(|w| w[0] >= w[1]), "{newest_first:?}");
    let table = ops.ok(&["audit", "list", "--action", "payout.reject"]);
    assert!(table.starts_with("AT") && table.contains("sanctions list") && table.contains(&p2), "{table}");
}

/// `ops webhooks replay --missed`: a merchant's events from before its endpoint existed are
/// delivered once the endpoint is set, with their exact bodies, in one audited action; a second
/// run finds nothing missed and records nothing.
#[tokio::test]
async fn past_events_reach_an_endpoint_added_later() {
    use domain::events::{EventKind, emit};
    use sea_orm::{EntityTrait, QueryOrder};
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let m = ops.ok(&["merchants", "create", "--name", "Acme"]).trim().to_owned();
    let merchant: Uuid = m.parse().unwrap();
    let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
    // Two events while the merchant has no endpoint: dispatched to nobody.
    for (i, t) in [EventKind::InvoicePaid, EventKind::PayoutCompleted].into_iter().enumerate() {
        let data = serde_json::json!({"invoice_id": Uuid::now_v7(), "n": i});
        emit(&db, merchant.into(), entity::Environment::Test, t, format!("past:{i}"), data).await.unwrap();
    }
    let live = serde_json::json!({"n": "live"});
    emit(&db, merchant.into(), entity::Environment::Live, EventKind::InvoicePaid, "past:live".into(), live)
        .await
        .unwrap();
    let round = domain::webhooks::dispatch::dispatch_batch(&db, 100).await.unwrap();
    assert_eq!((round.events, round.deliveries.len()), (3, 0));

    ops.unaudited(&["webhooks", "replay", "--missed", "--merchant", &m, "--env", "test"], false);
    ops.ok(&["webhooks", "set", "--merchant", &m, "--env", "test", "--url", "http://127.0.0.1:9/hook"]);
    ops.unaudited(&["webhooks", "replay", "--missed", "--env", "test"], false);
    let endpoint = format!("{m}/test");
    let (row, out) = ops.audited(
        &["webhooks", "replay", "--missed", "--merchant", &m, "--env", "test", "--since", "1h"],
        "oscar",
        "webhook_events.deliver_missed",
        &endpoint,
        None,
    );
    assert!(out.contains("sent 2 past events"), "{out}");
    assert_eq!(row["after"]["deliveries"], 2, "{row}");
    let events = entity::event::Entity::find().order_by_asc(entity::event::Column::Id).all(&db).await.unwrap();
    let deliveries = entity::webhook_delivery::Entity::find().all(&db).await.unwrap();
    assert_eq!(deliveries.len(), 2, "the live event has no live endpoint");
    for d in &deliveries {
        let e = events.iter().find(|e| e.id == d.event_id).unwrap();
        assert_eq!(e.environment, entity::Environment::Test);
        assert_eq!((d.body.clone(), d.status), (domain::webhooks::dispatch::body(e), entity::DeliveryStatus::Pending));
    }
    // Nothing is missed any more: nothing sent, nothing recorded.
    ops.unaudited(&["webhooks", "replay", "--missed", "--merchant", &m, "--env", "test"], true);
    assert_eq!(entity::webhook_delivery::Entity::find().all(&db).await.unwrap().len(), 2);
}

/// `ops webhooks rotate-key`: with the new key current and the old one among the previous keys,
/// every endpoint secret is re-encrypted under the new key (one audit row), after which the new
/// key alone signs; a second run changes nothing and records nothing.
#[tokio::test]
async fn rotate_key_reencrypts_every_endpoint_secret_under_the_new_key() {
    use domain::webhooks::secrets::SecretBox;
    use sea_orm::EntityTrait;
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let m = ops.ok(&["merchants", "create", "--name", "Acme"]).trim().to_owned();
    let old = ops.ok(&["webhooks", "keygen"]).trim().to_owned();
    let new = ops.ok(&["webhooks", "keygen"]).trim().to_owned();
    ops.set_env(&[("PAYGATE_WEBHOOKS__SECRET_KEY", &old)]);
    let secret = ops.ok(&["webhooks", "set", "--merchant", &m, "--env", "test", "--url", "http://127.0.0.1:9/h"]);
    let secret = secret.trim();
    // Overlapping secrets of a second endpoint: both are re-encrypted.
    ops.ok(&["webhooks", "set", "--merchant", &m, "--env", "live", "--url", "http://127.0.0.1:9/l"]);
    ops.ok(&["webhooks", "rotate", "--merchant", &m, "--env", "live", "--overlap", "1h"]);

    // A dashboard user's TOTP key, sealed with the old key too.
    let totp_key = domain::users::totp::new_secret();
    let user = {
        let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
        let now = chrono::Utc::now();
        let (_, token) = domain::users::invitations::create(
            &db,
            m.parse::<uuid::Uuid>().unwrap().into(),
            "ann@acme.example",
            entity::Role::Owner,
            "operator:test",
            chrono::Duration::hours(1),
            now,
        )
        .await
        .unwrap();
        let code = domain::users::totp::code_at(&totp_key, now).unwrap();
        let old_box = SecretBox::new(SecretBox::parse_key(&old).unwrap());
        domain::users::invitations::accept(&db, &old_box, &token, "a long enough password", &totp_key, &code, now)
            .await
            .unwrap()
    };

    let previous = format!("[\"{old}\"]");
    ops.set_env(&[("PAYGATE_WEBHOOKS__SECRET_KEY", &new), ("PAYGATE_WEBHOOKS__PREVIOUS_SECRET_KEYS", &previous)]);
    let (row, out) = ops.audited(&["webhooks", "rotate-key"], "oscar", "webhook_secrets.rotate_key", "*", None);
    assert!(out.contains("re-encrypted 3 endpoint secrets"), "{out}");
    assert!(out.contains("re-encrypted 1 dashboard TOTP keys"), "{out}");
    assert_eq!((&row["after"]["resealed"], &row["after"]["unchanged"]), (&3.into(), &0.into()), "{row}");
    ops.unaudited(&["webhooks", "rotate-key"], true);

    let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
    let now = chrono::Utc::now();
    let (old_box, new_box) =
        (SecretBox::new(SecretBox::parse_key(&old).unwrap()), SecretBox::new(SecretBox::parse_key(&new).unwrap()));
    for e in entity::webhook_endpoint::Entity::find().all(&db).await.unwrap() {
        let signing = domain::webhooks::endpoints::signing_secrets(&new_box, &e, now).unwrap();
        assert_eq!(signing.len(), if e.environment == entity::Environment::Live { 2 } else { 1 });
        if e.environment == entity::Environment::Test {
            assert_eq!(signing, [secret]);
        }
        assert!(domain::webhooks::endpoints::signing_secrets(&old_box, &e, now).is_err(), "the old key is done");
        let u = entity::dashboard_user::Entity::find_by_id(user.id).one(&db).await.unwrap().unwrap();
        assert_eq!(domain::users::totp_secret(&new_box, &u).unwrap(), totp_key, "the new key alone opens the TOTP key");
        assert!(domain::users::totp_secret(&old_box, &u).is_err());
    }
}

/// Unclaimed deposits (money that reached us but credits no invoice): listed until resolved;
/// resolving leaves one audit row, resolving again is refused and leaves none.
#[tokio::test]
async fn an_unclaimed_deposit_is_listed_until_resolved_once_with_its_audit_row() {
    use sea_orm::{ActiveModelTrait, IntoActiveModel};
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
    let id = entity::unclaimed_deposit::Model {
        id: Uuid::now_v7(),
        environment: entity::Environment::Live,
        gate_id: "xrp".into(),
        tx_hash: "C0FFEE".into(),
        output_index: 0,
        address_key: "xrp:rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh:".into(),
        amount: entity::Amount(testkit::d("12.5")),
        block_height: 90,
        reason: entity::UnclaimedReason::NoInvoice,
        seen_at: chrono::Utc::now(),
        // Validated: final, refundable.
        status: entity::UnclaimedStatus::Final,
        confirmations: 1,
        checked_at: Some(chrono::Utc::now()),
        missing_since_height: None,
        missing_last_height: None,
        missing_checks: 0,
        resolved_at: None,
        resolution: None,
    }
    .into_active_model()
    .insert(&db)
    .await
    .unwrap()
    .id
    .to_string();
    let listed = |args: &[&str]| -> Vec<Value> {
        let args = [&["deposits", "unclaimed", "--json"][..], args].concat();
        ops.ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let open = listed(&["--env", "live"]);
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(
        (&open[0]["id"], &open[0]["amount"], &open[0]["reason"]),
        (&id.as_str().into(), &"12.5".into(), &"no_invoice".into())
    );
    assert!(listed(&["--env", "test"]).is_empty());

    ops.unaudited(&["deposits", "resolve", &id, "--reason", " "], false);
    let (row, _) = ops.audited(
        &["deposits", "resolve", &id, "--reason", "returned in tx 9F3A"],
        "oscar",
        "deposit.resolve",
        &id,
        Some("returned in tx 9F3A"),
    );
    assert_eq!(
        (&row["before"]["resolved_at"], &row["after"]["resolution"]),
        (&Value::Null, &"returned in tx 9F3A".into())
    );
    assert!(listed(&[]).is_empty(), "resolved: no longer listed");
    let all = listed(&["--all"]);
    assert_eq!((all.len(), &all[0]["resolution"]), (1, &"returned in tx 9F3A".into()));
    ops.unaudited(&["deposits", "resolve", &id, "--reason", "again"], false);
}
