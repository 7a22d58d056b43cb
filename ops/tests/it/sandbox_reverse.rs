//! `ops sandbox reverse` as an operator runs it against the embedded default (`ops serve`): it
//! goes through the same domain function as `POST /v1/test/deposits/{id}/reverse`, so it also
//! wakes the confirmation tracker, and a reversal reaches a paid invoice whose payment sank
//! deeper than the tracker's watch (twice its confirmations): the invoice becomes `invalid`, the
//! payment `reversed`, the balance gives the credit back.

use std::process::Command;
use std::time::{Duration, Instant};

use entity::payment;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::serve::{ops_serve, start_with_demo_key};
use uuid::Uuid;

/// Sandbox blocks every 100 ms, for `ops serve` and the CLI alike.
const BLOCK_INTERVAL_MS: &str = "100";

struct Cli {
    dir: std::path::PathBuf,
}

impl Cli {
    /// `ops <args>` on the served database: its stdout; fails the test if the command failed.
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_ops"))
            .args(args)
            .current_dir(&self.dir)
            .env("PAYGATE_SANDBOX__BLOCK_INTERVAL_MS", BLOCK_INTERVAL_MS)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "ops {args:?} failed: {stderr}");
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Polls `GET path` with `key` until `done` holds for its `data` (60 s at most).
async fn wait_for(http: &reqwest::Client, url: &str, key: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body: Value = match http.get(url).header("X-API-Key", key).send().await {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        };
        if done(&body["data"]) {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "never {what}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_sandbox_reverse_reaches_a_paid_invoice_whatever_the_depth_of_its_payment() {
    let dir = tempfile::tempdir().unwrap();
    let port = testkit::fleet::free_port();
    let cmd = ops_serve(env!("CARGO_BIN_EXE_ops"), dir.path(), port, BLOCK_INTERVAL_MS);
    let (_serve, key) = start_with_demo_key(cmd).await;
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let cli = Cli { dir: dir.path().to_owned() };

    let deadline = Instant::now() + Duration::from_secs(30);
    let inv: Value = loop {
        let sent = http
            .post(format!("{base}/v1/invoices"))
            .header("X-API-Key", &key)
            .json(&json!({"currency": "BTC", "amount": "0.001"}))
            .send()
            .await;
        if let Ok(r) = sent {
            assert_eq!(r.status(), 201);
            break r.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "ops serve never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let id = inv["data"]["id"].as_str().unwrap().to_owned();
    let invoice_url = format!("{base}/v1/invoices/{id}");

    // Paid through the CLI: `<deposit id> bitcoin tx <hash>:<output> block <height>`.
    let out = cli.ok(&["sandbox", "deposit", "--invoice", &id, "--amount", "0.001"]);
    let deposit = out.split_whitespace().next().unwrap().to_owned();
    Uuid::parse_str(&deposit).unwrap_or_else(|_| panic!("no deposit id in {out:?}"));
    wait_for(&http, &invoice_url, &key, "paid", |i| i["status"] == "paid").await;

    // Wait until the tracker stopped watching the payment (past twice its 3 confirmations, no
    // check scheduled): from here only a wake-up brings it back to the tracker.
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("paygate.db").display());
    let db = domain::db::connect(&domain::config::Config { database_url: url, ..Default::default() }).await.unwrap();
    let invoice_id = Uuid::parse_str(&id).unwrap();
    let payment = || payment::Entity::find().filter(payment::Column::InvoiceId.eq(invoice_id)).one(&db);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = payment().await.unwrap().expect("the payment");
        if p.confirmations >= 2 * p.required_confirmations && p.next_check_at.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "the tracker kept watching: {p:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(cli.ok(&["sandbox", "reverse", &deposit]).trim(), format!("{deposit} reversed"));
    let inv = wait_for(&http, &invoice_url, &key, "invalid after the reversal", |i| i["status"] == "invalid").await;
    assert_eq!(inv["payments"][0]["status"], "reversed", "{inv}");
    let balances = wait_for(&http, &format!("{base}/v1/balances"), &key, "balances", Value::is_array).await;
    let btc = balances.as_array().unwrap().iter().find(|b| b["gate_id"] == "bitcoin").unwrap().clone();
    assert_eq!((btc["available"].as_str(), btc["pending"].as_str()), (Some("0"), Some("0")), "{btc}");

    // Reversing again changes nothing and still succeeds.
    assert_eq!(cli.ok(&["sandbox", "reverse", &deposit]).trim(), format!("{deposit} reversed"));
    assert_eq!(payment().await.unwrap().map(|p| p.status), Some(entity::PaymentStatus::Reversed));
    let inv = wait_for(&http, &invoice_url, &key, "read", |i| i.is_object()).await;
    assert_eq!(inv["status"], "invalid");
}
