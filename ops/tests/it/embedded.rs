//! The embedded default as a newcomer runs it: `ops serve` on a fresh machine (SQLite file,
//! embedded queue, sandbox chain, every stage in one process). The demo key it prints pays an
//! invoice in the sandbox through the test helpers, and the invoice reaches `paid`; the
//! merchant's webhook endpoint, set with `ops webhooks`, receives the signed events.

use std::process::Command;
use std::time::{Duration, Instant};

use api::webhooks::receiver::{Behaviour, Receiver};
use serde_json::{Value, json};
use testkit::serve::{ops_serve, start_with_demo_key};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_serve_pays_an_invoice_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let port = testkit::fleet::free_port();
    let mut cmd = ops_serve(env!("CARGO_BIN_EXE_ops"), dir.path(), port, "200");
    // Rotation takes effect at once (by default within `webhooks.endpoint_cache_ms`).
    cmd.env("PAYGATE_WEBHOOKS__ENDPOINT_CACHE_MS", "0").env("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true");
    // The first start prints the demo merchant's test key once.
    let (mut child, key) = start_with_demo_key(cmd).await;

    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let post =
        |path: &str, body: Value| http.post(format!("{base}{path}")).header("X-API-Key", &key).json(&body).send();
    let deadline = Instant::now() + Duration::from_secs(30);
    let inv: Value = loop {
        if let Ok(r) = post("/v1/invoices", json!({"currency": "BTC", "amount": "0.001"})).await {
            assert_eq!(r.status(), 201);
            break r.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "ops serve never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let id = inv["data"]["id"].as_str().unwrap().to_owned();
    let merchant = inv["data"]["merchant_id"].as_str().unwrap().to_owned();
    let ops = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ops"))
            .args(args)
            .current_dir(dir.path())
            .env("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The merchant's webhook endpoint: a receiver that verifies every signature.
    let rx = Receiver::start("127.0.0.1:0".parse().unwrap(), &[], Behaviour::Ok(Duration::ZERO)).await.unwrap();
    let (ok, secret, err) = ops(&["webhooks", "set", "--merchant", &merchant, "--env", "test", "--url", &rx.url()]);
    assert!(ok && err.contains("shown only this once"), "{err}");
    let secret = secret.trim().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    rx.set_secrets(&[&secret]);
    let (ok, out, err) = ops(&["webhooks", "test", "--merchant", &merchant, "--env", "test", "--wait", "30"]);
    assert!(ok && out.contains("HTTP 200"), "{out}{err}");

    let r = post("/v1/test/deposits", json!({"invoice_id": id, "amount": "0.001"})).await.unwrap();
    assert_eq!(r.status(), 201);

    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let paid = loop {
        let r = http.get(format!("{base}/v1/invoices/{id}")).header("X-API-Key", &key).send().await.unwrap();
        let inv: Value = r.json().await.unwrap();
        let status = inv["data"]["status"].as_str().unwrap().to_owned();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == "paid" {
            break inv["data"].clone();
        }
        assert!(Instant::now() < deadline, "stuck: {seen:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(seen.contains(&"confirming".to_owned()), "{seen:?}");
    assert_eq!(paid["payments"][0]["status"], "confirmed");
    let balances: Value =
        http.get(format!("{base}/v1/balances")).header("X-API-Key", &key).send().await.unwrap().json().await.unwrap();
    let btc = balances["data"].as_array().unwrap().iter().find(|b| b["gate_id"] == "bitcoin").unwrap().clone();
    assert_eq!(btc["available"], "0.001");

    // The webhooks of the payment, signed: confirming, paid, and the balance credit.
    let deadline = Instant::now() + Duration::from_secs(30);
    let wanted = ["test", "invoice.confirming", "invoice.paid", "balance.credited"];
    loop {
        let got: Vec<String> = rx.received().iter().filter(|r| r.verified).map(|r| r.event.clone()).collect();
        if wanted.iter().all(|w| got.iter().any(|g| g == w)) {
            break;
        }
        assert!(Instant::now() < deadline, "webhooks received: {got:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let received = rx.received();
    assert!(received.iter().all(|r| r.verified));
    let paid_hook = received.iter().find(|r| r.event == "invoice.paid").unwrap();
    assert_eq!(paid_hook.body["data"]["invoice_id"], id.as_str());
    assert_eq!(paid_hook.body["data"]["status"], "paid");
    let credited = received.iter().find(|r| r.event == "balance.credited").unwrap();
    assert_eq!(credited.body["data"]["credited_amount"], "0.001");
    assert!(credited.body["event_id"].is_string());
    let (ok, out, err) = ops(&["webhooks", "list", "--event", "invoice.paid", "--status", "succeeded"]);
    assert!(ok && out.contains(&paid_hook.delivery_id), "{out}{err}");
    let (ok, out, err) = ops(&["webhooks", "attempts", &paid_hook.delivery_id]);
    assert!(ok && out.contains("status succeeded") && out.contains(" 200 "), "{out}{err}");
    // Rotation: the old and the new secret both sign; a receiver on the new one verifies.
    let (ok, new_secret, err) = ops(&["webhooks", "rotate", "--merchant", &merchant, "--env", "test"]);
    assert!(ok && err.contains("previous one also signs"), "{err}");
    rx.set_secrets(&[new_secret.trim()]);
    let (ok, out, err) = ops(&["webhooks", "replay", &paid_hook.delivery_id]);
    assert!(ok && out.contains("replayed 1"), "{out}{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while rx.received().iter().filter(|r| r.delivery_id == paid_hook.delivery_id).count() < 2 {
        assert!(Instant::now() < deadline, "the replay never arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rx.received().iter().all(|r| r.verified));

    // The settlement converter runs in the same process: a BTC invoice settled into USDT on
    // tron credits the net USDT (0.001 BTC at 59 700 less 0.25 %) and says so.
    let conv: Value =
        post("/v1/invoices", json!({"currency": "BTC", "amount": "0.001", "target_settlement_asset": "tron_usdt"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let conv_id = conv["data"]["id"].as_str().unwrap().to_owned();
    let r = post("/v1/test/deposits", json!({"invoice_id": conv_id, "amount": "0.001"})).await.unwrap();
    assert_eq!(r.status(), 201);
    let deadline = Instant::now() + Duration::from_secs(60);
    let credited = loop {
        let got = rx.received();
        if let Some(c) =
            got.iter().find(|r| r.event == "balance.credited" && r.body["data"]["invoice_id"] == conv_id.as_str())
        {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "the conversion was never credited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(credited.verified);
    assert_eq!(credited.body["data"]["outcome"], "target_credited");
    assert_eq!(credited.body["data"]["credited_amount"], "59.55075");
    let balances: Value =
        http.get(format!("{base}/v1/balances")).header("X-API-Key", &key).send().await.unwrap().json().await.unwrap();
    let usdt = balances["data"].as_array().unwrap().iter().find(|b| b["gate_id"] == "tron_usdt").unwrap().clone();
    assert_eq!(usdt["available"], "59.55075");

    // A job its stage cannot do (a scan of a gate with no chain adapter: live bitcoin) is
    // dead-lettered with its error; `ops jobs` lists and replays it from the same embedded
    // queue.
    let backend = workers::platform::QueueBackend::Sqlite {
        path: dir.path().join("paygate-jobs.sqlite"),
        prefix: "paygate".into(),
    };
    let queues = workers::platform::Queues::connect(&backend).await.unwrap();
    let job = workers::stages::ScanGate { environment: entity::Environment::Live, gate_id: "bitcoin".into() };
    queues.push(job).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = ops(&["jobs", "dead", "deposit-scan"]);
        assert!(ok, "{err}");
        if out.contains("no chain for live bitcoin") {
            break;
        }
        assert!(Instant::now() < deadline, "the job never went dead: {out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (ok, out, err) = ops(&["jobs", "queues"]);
    assert!(ok && out.contains("paygate:settlement-convert") && out.contains("paygate:track-payment"), "{out}{err}");
    let (ok, out, err) = ops(&["jobs", "replay", "deposit-scan", "--all"]);
    assert!(ok && out.contains("replayed 1"), "{out}{err}");
    let (ok, _, err) = ops(&["jobs", "replay", "deposit-scan", "01JUNKJUNKJUNKJUNKJUNKJUNK"]);
    assert!(!ok && err.contains("01JUNKJUNKJUNKJUNKJUNKJUNK"), "{err}");

    // SIGTERM: the API and every stage stop cleanly.
    assert!(Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "ops serve ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(dir.path().join("paygate.db").exists() && dir.path().join("paygate-jobs.sqlite").exists());
}
