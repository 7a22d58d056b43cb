//! The `ops` binary as an operator runs it, on a scratch SQLite database.

use std::process::{Command, Output};

struct Ops {
    dir: tempfile::TempDir,
}

impl Ops {
    fn new() -> Ops {
        Ops { dir: tempfile::tempdir().unwrap() }
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let db = format!("sqlite://{}?mode=rwc", self.dir.path().join("ops.db").display());
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ops"));
        cmd.args(args).current_dir(self.dir.path()).env("PAYGATE_DATABASE_URL", db).env("RUST_LOG", "error");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run_env(args, &[]);
        assert!(out.status.success(), "ops {args:?} failed: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// [`Ops::ok`] of a command line whose arguments hold no white space.
    #[track_caller]
    fn ok_line(&self, line: &str) -> String {
        self.ok(&line.split_whitespace().collect::<Vec<_>>())
    }

    /// Runs `args`, which must fail: what it printed on stderr.
    #[track_caller]
    fn fails(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.run_env(args, env);
        assert!(!out.status.success(), "ops {args:?} should fail");
        stderr(&out)
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `ops ledger adjust` of the merchant's test `gate` balance.
fn adjust<'a>(merchant: &'a str, gate: &'a str, amount: &'a str, reason: &'a str) -> [&'a str; 12] {
    [
        "ledger",
        "adjust",
        "--merchant",
        merchant,
        "--env",
        "test",
        "--gate",
        gate,
        "--amount",
        amount,
        "--reason",
        reason,
    ]
}

#[test]
fn merchants_keys_and_settings() {
    let ops = Ops::new();
    assert!(ops.ok(&["migrate"]).contains("migrations applied"));
    let merchant = ops.ok(&["merchants", "create", "--name", "Acme", "--base-currency", "EUR"]).trim().to_owned();
    uuid::Uuid::parse_str(&merchant).expect("merchant id");
    let out = ops.ok_line(&format!(
        "merchants settings {merchant} --invoice-lifetime-secs 900 --underpayment-tolerance-percent 0.5"
    ));
    assert!(out.contains("base=EUR lifetime=900s tolerance=0.5%"), "{out}");
    let listed = ops.ok(&["merchants", "list"]);
    assert!(listed.contains("Acme") && listed.contains("lifetime=900s"), "{listed}");

    let key = ops.ok_line(&format!(
        "keys create --merchant {merchant} --env live --permissions invoices:read,balances:read --label erp"
    ));
    let key = key.trim();
    assert!(key.starts_with("sk_live_") && key.len() == 72 && key[8..].bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    let test_key = ops.ok(&["keys", "create", "--merchant", &merchant, "--env", "test", "--permissions", "all"]);
    assert!(test_key.trim().starts_with("sk_test_"));

    let list = ops.ok(&["keys", "list", "--merchant", &merchant]);
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains("invoices:read,balances:read") && list.contains("active"), "{list}");
    assert!(!list.contains(&key[8..]), "keys list must never show a key");
    let key_id = list.lines().next().unwrap().split_whitespace().next().unwrap().to_owned();
    assert!(ops.ok(&["keys", "revoke", &key_id]).contains("revoked"));
    assert!(ops.ok(&["keys", "list"]).lines().next().unwrap().contains("revoked"));

    // Operator adjustments: credit, debit, and a refused overdraft that changes nothing.
    let out = ops.ok(&adjust(&merchant, "bitcoin", "0.5", "funding"));
    assert!(out.contains("available=0.5"), "{out}");
    let out = ops.ok(&adjust(&merchant, "bitcoin", "-0.2", "correction"));
    assert!(out.contains("available=0.3"), "{out}");
    let refused = ops.fails(&adjust(&merchant, "bitcoin", "-1", "x"), &[]);
    assert!(refused.contains("insufficient"), "{refused}");
    let bad_gate = ops.run_env(&adjust(&merchant, "doge", "1", "x"), &[]);
    assert!(stderr(&bad_gate).contains("unknown gate"));
    let balances = ops.ok(&["ledger", "balances", "--merchant", &merchant, "--env", "test"]);
    assert!(balances.contains("bitcoin") && balances.contains("available=0.3"), "{balances}");

    // Payout settings and operator approval.
    let out = ops.ok_line(&format!(
        "payouts settings --merchant {merchant} --env test \
         --auto-approve false --delay-secs 60 --payout-fee-allocation merchant"
    ));
    assert!(out.contains("auto_approve=false delay_secs=60 payout_fee_allocation=Merchant"), "{out}");
    let out = ops.ok(&["payouts", "settings", "--merchant", &merchant, "--env", "test", "--merchant-approves", "true"]);
    assert!(out.contains("merchant_approves=true"), "{out}");

    // A dashboard invitation: a one-time link, once per address.
    let link = ops.ok(&["merchants", "invite", &merchant, "--email", "Ann@Shop.example", "--role", "owner"]);
    assert!(link.trim().starts_with("http://") && link.contains("/dashboard/invite/"), "{link}");
    let again =
        ops.run_env(&["merchants", "invite", &merchant, "--email", "ann@shop.example", "--role", "nobody"], &[]);
    assert!(stderr(&again).contains("owner, admin, developer, viewer"), "{}", stderr(&again));
    let bad = ops.run_env(
        &["payouts", "settings", "--merchant", &merchant, "--env", "test", "--network-fee-allocation", "nobody"],
        &[],
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("expected customer or merchant"));
    let missing = ops.run_env(&["payouts", "approve", &uuid::Uuid::new_v4().to_string()], &[]);
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("not found"));

    // Only the hash is stored.
    let raw = std::fs::read(ops.dir.path().join("ops.db")).unwrap();
    let hay = String::from_utf8_lossy(&raw);
    assert!(!hay.contains(&key[8..]), "plaintext key found in the database file");
}

#[test]
fn keys_create_requires_permissions_and_prints_them() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let m = ops.ok(&["merchants", "create", "--name", "Perms"]).trim().to_owned();
    // No silent `all`: without --permissions nothing is created.
    let out = ops.run_env(&["keys", "create", "--merchant", &m, "--env", "test"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--permissions"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ops.run_env(&["keys", "create", "--merchant", &m, "--env", "test", "--permissions", " , "], &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("names no permission"));
    assert_eq!(ops.ok(&["keys", "list", "--merchant", &m]).lines().count(), 0, "nothing created");

    // The permissions given are printed (stderr; stdout is the key alone).
    let out = ops.run_env(
        &["keys", "create", "--merchant", &m, "--env", "test", "--permissions", "payouts:read, invoices:write"],
        &[],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).trim().starts_with("sk_test_"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("with permissions invoices:write,payouts:read"), "{err}");
    // `all` stays possible, explicitly, and is printed in full.
    let out = ops.run_env(&["keys", "create", "--merchant", &m, "--env", "live", "--permissions", "all"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = api::auth::Permission::ALL.map(|p| p.as_str()).join(",");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("with permissions {all}")));
    let list = ops.ok(&["keys", "list", "--merchant", &m]);
    assert!(list.contains("[invoices:write,payouts:read]") && list.contains(&format!("[{all}]")), "{list}");
}

#[test]
fn merchant_rate_limit_overrides_are_set_and_cleared() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let m = ops.ok(&["merchants", "create", "--name", "Busy shop"]).trim().to_owned();
    let out = ops.ok(&["merchants", "settings", &m, "--rate-limit-writes", "1000", "--rate-limit-test-helpers", "50"]);
    assert!(out.contains("rate_limits: reads=default writes=1000 test_helpers=50"), "{out}");
    // Only the flags given change; `default` returns to the configured limit.
    let out =
        ops.ok(&["merchants", "settings", &m, "--rate-limit-writes", "default", "--invoice-lifetime-secs", "900"]);
    assert!(out.contains("lifetime=900s") && out.contains("reads=default writes=default test_helpers=50"), "{out}");
    for bad in ["0", "lots", "1000001"] {
        let out = ops.run_env(&["merchants", "settings", &m, "--rate-limit-reads", bad], &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("--rate-limit-reads"), "{bad}: {err}");
    }
}

#[test]
fn refuses_bad_input_and_bad_configuration() {
    let ops = Ops::new();
    let out =
        ops.run_env(&["keys", "create", "--merchant", "not-a-uuid", "--env", "test", "--permissions", "all"], &[]);
    assert!(!out.status.success());
    let out = ops.run_env(
        &["keys", "create", "--merchant", &uuid::Uuid::new_v4().to_string(), "--env", "prod", "--permissions", "all"],
        &[],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected test or live"));
    let out = ops.run_env(
        &["keys", "create", "--merchant", &uuid::Uuid::new_v4().to_string(), "--env", "test", "--permissions", "all"],
        &[],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    let m = ops.ok(&["merchants", "create", "--name", "X"]).trim().to_owned();
    let out =
        ops.run_env(&["keys", "create", "--merchant", &m, "--env", "test", "--permissions", "invoices:delete"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown permission"));
    let out = ops.run_env(&["merchants", "settings", &m, "--base-currency", "euro"], &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("base_currency"));

    // Invalid configuration fails at start-up, naming the key.
    let out = ops.run_env(&["migrate"], &[("PAYGATE_AUTH__CACHE_TTL_SECS", "lots")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).to_lowercase().contains("auth.cache_ttl_secs"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(ops.dir.path().join("paygate.toml"), "[addresses.live]\nbitcoin_xpub = \"tpubDC8msFGeGuwnKG9Upg7DM2b4DaRqg3CUZa5g8v2SRQ6K4NSkxUgd7HsL2XVWbVm39yBA4LAxysQAm397zwQSQoQgewGiYZqrA9DsP4zbQ1M\"\n").unwrap();
    let out = ops.run_env(&["migrate"], &[]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("addresses.live.bitcoin_xpub"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's run command: first start seeds a demo merchant and prints a test key once;
/// the key works; a restart prints no new key; SIGTERM stops it cleanly.
#[test]
fn serve_embedded_default_seeds_once_and_serves() {
    use std::io::{BufRead, BufReader};
    let ops = Ops::new();
    let port = testkit::fleet::free_port();
    let db = format!("sqlite://{}?mode=rwc", ops.dir.path().join("serve.db").display());
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_ops"))
            .arg("serve")
            .current_dir(ops.dir.path())
            .env("PAYGATE_DATABASE_URL", &db)
            .env("PAYGATE_LISTEN", format!("127.0.0.1:{port}"))
            .env("PAYGATE_RATES__LIVE__PROVIDER", "static")
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let wait_ready = || {
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("ops serve did not listen on {port}");
    };
    let stop = |mut child: std::process::Child| -> String {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let status = child.wait().unwrap();
        assert!(status.success(), "ops serve exited with {status}");
        let mut out = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
        out
    };

    let mut child = start();
    let mut key = None;
    let reader = BufReader::new(child.stdout.take().unwrap());
    let mut lines = reader.lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(k) = line.split_whitespace().find(|w| w.starts_with("sk_test_")) {
            key = Some(k.to_owned());
            break;
        }
    }
    let key = key.expect("first start prints a test key");
    wait_ready();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, body) = rt.block_on(async {
        let r = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/v1/invoices"))
            .header("X-API-Key", &key)
            .json(&serde_json::json!({"currency": "BTC", "amount": "0.001"}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap())
    });
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["data"]["environment"], "test");
    child.stdout = None;
    drop(lines);
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    assert!(child.wait().unwrap().success());

    let second = start();
    wait_ready();
    let out = stop(second);
    assert!(!out.contains("sk_test_"), "a restart must not print a key again: {out}");
}

#[test]
fn sandbox_mine_and_deposit_rules() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    // Blocks only when mined, so the heights are exact.
    let manual = [("PAYGATE_SANDBOX__BLOCK_INTERVAL_MS", "0")];
    let mine = |args: &[&str]| {
        let out = ops.run_env(args, &manual);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let out = mine(&["sandbox", "mine", "--gate", "bitcoin", "--blocks", "5"]);
    assert_eq!(out.trim(), "bitcoin height 6", "a new chain starts at 1: {out}");
    let out = mine(&["sandbox", "mine", "--gate", "bitcoin"]);
    assert_eq!(out.trim(), "bitcoin height 7");
    let bad = ops.run_env(&["sandbox", "mine", "--gate", "dogecoin"], &[]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown gate"));
    let id = uuid::Uuid::now_v7().to_string();
    let missing = ops.run_env(&["sandbox", "deposit", "--invoice", &id, "--amount", "1"], &[]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no invoice"), "{:?}", missing);
}

fn refs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `ops webhooks` where the merchant has several endpoints in one environment (the second made
/// as the merchant makes it through the API): each endpoint command names one with
/// `--endpoint`, and refuses without it rather than guess.
#[tokio::test]
async fn webhook_commands_name_one_of_several_endpoints() {
    use domain::webhooks::endpoints::{self, NewEndpoint};
    use domain::webhooks::outbound::TargetPolicy;
    use domain::webhooks::secrets::SecretBox;
    let ops = Ops::new();
    let m = ops.ok(&["merchants", "create", "--name", "Hooks"]).trim().to_owned();
    let dev = [("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")];
    let out =
        ops.run_env(&["webhooks", "set", "--merchant", &m, "--env", "test", "--url", "http://127.0.0.1:9/first"], &dev);
    assert!(out.status.success(), "{}", stderr(&out));
    let key = std::fs::read_to_string(ops.dir.path().join("ops-webhooks.key")).unwrap();
    let sbox = SecretBox::new(SecretBox::parse_key(key.trim()).unwrap());
    let url = format!("sqlite://{}?mode=rwc", ops.dir.path().join("ops.db").display());
    let db = sea_orm::Database::connect(url).await.unwrap();
    let new = NewEndpoint {
        url: "http://127.0.0.1:9/second".into(),
        description: Some("second".into()),
        enabled_events: vec!["invoice.paid".into()],
    };
    let merchant: uuid::Uuid = m.parse().unwrap();
    let policy = TargetPolicy { allow_insecure: true };
    let (second, _) =
        endpoints::create(&db, &sbox, policy, merchant.into(), entity::Environment::Test, &new).await.unwrap();
    let id = second.id.to_string();
    let base = ["--merchant", &m, "--env", "test"];
    let cmd = |verb: &str, more: &[&str]| -> Vec<String> {
        ["webhooks", verb].iter().chain(&base).chain(more).map(|s| (*s).to_owned()).collect()
    };

    for verb in ["show", "rotate", "remove"] {
        let err = ops.fails(&refs(&cmd(verb, &[])), &dev);
        assert!(err.contains("2 test webhook endpoints") && err.contains("--endpoint"), "{verb}: {err}");
    }
    let err = ops.fails(&refs(&cmd("set", &["--url", "http://127.0.0.1:9/x"])), &dev);
    assert!(err.contains("--endpoint"), "{err}");
    let shown = ops.ok(&refs(&cmd("show", &["--endpoint", &id])));
    assert!(shown.contains("http://127.0.0.1:9/second") && shown.contains("events: invoice.paid"), "{shown}");
    assert!(shown.contains("description: second") && shown.contains(&id), "{shown}");
    // Setting its URL keeps its secret (prints none); rotating prints a new one.
    let out = ops.run_env(&refs(&cmd("set", &["--endpoint", &id, "--url", "http://127.0.0.1:9/third"])), &dev);
    assert!(out.status.success() && out.stdout.is_empty(), "{}", stderr(&out));
    assert!(ops.ok(&refs(&cmd("rotate", &["--endpoint", &id]))).trim().starts_with("whsec_"));
    // `test` without `--endpoint` writes one event for every endpoint; with it, for that one only.
    assert!(ops.ok(&refs(&cmd("test", &["--wait", "0"]))).contains("queued"));
    assert!(ops.ok(&refs(&cmd("test", &["--endpoint", &id, "--wait", "0"]))).contains("queued"));
    let unknown = uuid::Uuid::new_v4().to_string();
    assert!(ops.fails(&refs(&cmd("show", &["--endpoint", &unknown])), &[]).contains("no test webhook endpoint"));
    // Removing the named one leaves the other, which the commands find again on their own.
    ops.ok(&refs(&cmd("remove", &["--endpoint", &id])));
    let shown = ops.ok(&refs(&cmd("show", &[])));
    assert!(shown.contains("http://127.0.0.1:9/first") && shown.contains("events: all"), "{shown}");
}

/// `ops webhooks`: endpoint rules, the secret shown once and stored encrypted under a key
/// file made beside the SQLite database, rotation, removal, keygen, and the local listener.
#[test]
fn webhook_endpoints_secrets_and_listener() {
    let ops = Ops::new();
    let m = ops.ok(&["merchants", "create", "--name", "Hooks"]).trim().to_owned();
    let err = |args: &[&str], env: &[(&str, &str)]| {
        let out = ops.run_env(args, env);
        assert!(!out.status.success(), "ops {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let set = ["webhooks", "set", "--merchant", &m, "--env"];
    assert!(err(&[&set[..], &["live", "--url", "http://shop.example/h"]].concat(), &[]).contains("https"));
    assert!(err(&[&set[..], &["live", "--url", "https://127.0.0.1/h"]].concat(), &[]).contains("blocked address"));
    assert!(err(&[&set[..], &["test", "--url", "http://10.0.0.8/h"]].concat(), &[]).contains("private"));
    let other = uuid::Uuid::new_v4().to_string();
    assert!(
        err(&["webhooks", "set", "--merchant", &other, "--env", "test", "--url", "https://shop.example/h"], &[])
            .contains("not found")
    );

    let dev = [("PAYGATE_WEBHOOKS__ALLOW_INSECURE_TARGETS", "true")];
    let out = ops.run_env(&[&set[..], &["test", "--url", "http://127.0.0.1:9/hook"]].concat(), &dev);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let secret = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(secret.starts_with("whsec_") && secret.len() == 70, "{secret}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("shown only this once"));
    let key_file = ops.dir.path().join("ops-webhooks.key");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap().len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // The database holds no secret in the clear.
    let db = std::fs::read(ops.dir.path().join("ops.db")).unwrap();
    assert!(!db.windows(64).any(|w| w == &secret.as_bytes()["whsec_".len()..]));
    // Setting the URL again keeps the secret and prints none.
    let out = ops.run_env(&[&set[..], &["test", "--url", "http://127.0.0.1:9/other"]].concat(), &dev);
    assert!(out.status.success() && out.stdout.is_empty());
    let shown = ops.ok(&["webhooks", "show", "--merchant", &m, "--env", "test"]);
    assert!(shown.contains("http://127.0.0.1:9/other") && !shown.contains("whsec_"), "{shown}");
    let rotated = ops.ok(&["webhooks", "rotate", "--merchant", &m, "--env", "test", "--overlap", "2h"]);
    assert!(rotated.trim().starts_with("whsec_") && rotated.trim() != secret);
    assert!(ops.ok(&["webhooks", "show", "--merchant", &m, "--env", "test"]).contains("previous secret also signs"));
    assert!(ops.ok(&["webhooks", "list"]).starts_with("DELIVERY"));
    ops.ok(&["webhooks", "remove", "--merchant", &m, "--env", "test"]);
    assert!(err(&["webhooks", "show", "--merchant", &m, "--env", "test"], &[]).contains("no test webhook endpoint"));
    assert!(err(&["webhooks", "test", "--merchant", &m, "--env", "test"], &[]).contains("no test webhook endpoint"));
    assert!(err(&["webhooks", "list", "--status", "lost"], &[]).contains("expected pending"));
    let key = ops.ok(&["webhooks", "keygen"]);
    assert!(key.trim().len() == 64 && key.trim().bytes().all(|b| b.is_ascii_hexdigit()));

    // The local listener verifies signatures: 200 for a signed body, 400 otherwise.
    let port = testkit::fleet::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_ops"))
        .args(["webhooks", "listen", "--port", &port.to_string(), "--secret", &secret])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let body = br#"{"event":"test","created_at":"2026-11-21T10:00:00.000Z","data":{}}"#;
    let now = chrono::Utc::now().timestamp();
    let good = domain::webhooks::signature::header(&[secret.as_bytes()], now, body);
    let bad = domain::webhooks::signature::header(&[b"whsec_other"], now, body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        match post(port, &good, body) {
            Some(s) => break s,
            None if std::time::Instant::now() < deadline => std::thread::sleep(std::time::Duration::from_millis(100)),
            None => panic!("the listener never came up"),
        }
    };
    assert_eq!(status, 200);
    assert_eq!(post(port, &bad, body), Some(400));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("signature ok") && printed.contains("SIGNATURE REJECTED"), "{printed}");
}

/// A raw HTTP/1.1 POST; the status code, or `None` when nothing listens.
fn post(port: u16, signature: &str, body: &[u8]) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Service-Signature: {signature}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    resp.split_whitespace().nth(1)?.parse().ok()
}

/// A signed EIP-1559 transaction of the hot wallet (nonce 42) and its hash.
const EVM_TX: (&str, &str) = (
    "0xd5c9c6de44a4cffa8cae5fb2be4efc6e61cbaa6854721918d413f216709f5cd0",
    "0x02f862012a03078252089470997970c51812dc3a010c7d01b50e0d17dc79c88080c080a00410eb04cc94f1178da34908602870b103405c3c80be0be284f925e24054442da0363b36c7d6eabb520b014b9c0d1ee2a6a065cb32decb5006f688e925f913597c",
);

/// A payout of `debit` (all fees zero) inserted with its reservation, in `status`: on the test
/// tron_usdt gate, or with `evm_signed` on the live ethereum gate with [`EVM_TX`] stored as its
/// signed transaction, broadcast `minutes_ago`.
fn insert_payout(
    db_path: &std::path::Path,
    merchant: &str,
    debit: &str,
    status: &str,
    evm_signed: bool,
    minutes_ago: i64,
) -> String {
    use entity::{Amount, Environment, FeeAllocation, PayoutStatus, payout};
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("sqlite://{}?mode=rwc", db_path.display());
        let db =
            domain::db::connect(&domain::config::Config { database_url: url, ..Default::default() }).await.unwrap();
        let now = chrono::Utc::now();
        let then = now - chrono::Duration::minutes(minutes_ago);
        let amount = Amount::new(debit.parse().unwrap());
        let id = uuid::Uuid::now_v7();
        let p = payout::Model {
            id,
            merchant_id: uuid::Uuid::parse_str(merchant).unwrap(),
            environment: if evm_signed { Environment::Live } else { Environment::Test },
            gate_id: if evm_signed { "ethereum" } else { "tron_usdt" }.into(),
            currency: if evm_signed { "ETH" } else { "USDT" }.into(),
            network: if evm_signed { "ethereum" } else { "tron" }.into(),
            amount,
            amount_in_base_currency: None,
            recipient_amount: amount,
            merchant_debit_amount: amount,
            fee_amount: Amount::new(Default::default()),
            payout_fee_allocation: FeeAllocation::Customer,
            network_fee: Amount::new(Default::default()),
            configured_network_fee_amount: Amount::new(Default::default()),
            network_fee_allocation: FeeAllocation::Customer,
            destination: if evm_signed {
                "0x1111111111111111111111111111111111111111"
            } else {
                "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP"
            }
            .into(),
            destination_tag: None,
            status: PayoutStatus::parse(status).unwrap(),
            tx_hash: evm_signed.then(|| EVM_TX.0.to_owned()),
            idempotency_key: None,
            description: None,
            metadata: None,
            failure_reason: None,
            executable_at: Some(then),
            approved_at: Some(then),
            completed_at: None,
            cancelled_at: None,
            created_at: then,
            updated_at: then,
            signed_tx: evm_signed.then(|| EVM_TX.1.to_owned()),
            queued_at: Some(then),
            broadcast_at: evm_signed.then_some(then),
            checked_at: None,
        };
        let txn = domain::db::begin_write(&db).await.unwrap();
        assert!(domain::payouts::service::insert_reserved(&txn, &p).await.unwrap());
        txn.commit().await.unwrap();
        id.to_string()
    })
}

#[test]
fn payouts_fail_stuck_and_replace() {
    let ops = Ops::new();
    let db = ops.dir.path().join("ops.db");
    let merchant = ops.ok(&["merchants", "create", "--name", "Payer"]).trim().to_owned();
    for (env, gate) in [("test", "tron_usdt"), ("live", "ethereum")] {
        let fund = ["ledger", "adjust", "--merchant", &merchant, "--env", env, "--gate", gate];
        ops.ok(&[&fund[..], &["--amount", "100", "--reason", "fund"]].concat());
    }
    let unsigned = insert_payout(&db, &merchant, "10", "queued", false, 30);
    let stuck = insert_payout(&db, &merchant, "20", "processing", true, 20);
    let never_signed = insert_payout(&db, &merchant, "5", "queued", false, 25);
    let balances = |env: &str| ops.ok(&["ledger", "balances", "--merchant", &merchant, "--env", env]);
    assert!(balances("test").contains("available=85 pending=0 reserved=15"), "{}", balances("test"));
    assert!(balances("live").contains("available=80 pending=0 reserved=20"), "{}", balances("live"));

    // fail: the never-signed payout fails with the reason and its funds come back.
    let out = ops.ok(&["payouts", "fail", &unsigned, "--reason", "hot wallet key lost"]);
    assert!(out.contains("failed") && out.contains("failed by operator: hot wallet key lost"), "{out}");
    assert!(balances("test").contains("available=95 pending=0 reserved=5"), "{}", balances("test"));
    // …but never one with a signed transaction (it may be mined), nor twice, nor without a reason.
    let refused = ops.run_env(&["payouts", "fail", &stuck, "--reason", "x"], &[]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("signed transaction") && err.contains("replace"), "{err}");
    assert!(!ops.run_env(&["payouts", "fail", &unsigned, "--reason", "again"], &[]).status.success());
    assert!(!ops.run_env(&["payouts", "fail", &stuck, "--reason", " "], &[]).status.success());
    assert!(balances("live").contains("available=80 pending=0 reserved=20"), "{}", balances("live"));

    // stuck: the broadcast payout the chain does not have and the queued one never signed,
    // each with why it waits, after the threshold only.
    let out = ops.ok(&["payouts", "stuck"]);
    assert!(out.contains(&stuck) && out.contains("processing") && out.contains(EVM_TX.0), "{out}");
    let line = out.lines().find(|l| l.contains(&never_signed)).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("queued") && line.contains("never signed") && line.contains("waiting=2"), "{line}");
    assert!(!out.contains(&unsigned), "{out}");
    assert!(out.contains("waiting=20m") || out.contains("waiting=19m"), "{out}");
    assert!(ops.ok(&["payouts", "stuck", "--older-than", "30m"]).contains("no stuck payouts"));
    assert!(!ops.run_env(&["payouts", "stuck", "--older-than", "soon"], &[]).status.success());

    // replace: recorded for the executor; refused for a payout that has nothing to replace.
    let out = ops.ok(&["payouts", "replace", &stuck]);
    assert!(out.contains("replacement requested"), "{out}");
    let refused = ops.run_env(&["payouts", "replace", &unsigned], &[]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("failed"));
}

/// The house account (the operator's own books): funded and drained only through
/// `ops treasury fund` (never below zero), shown by `ops treasury position`, and not a merchant
/// any command can name or list.
#[test]
fn treasury_fund_and_position_and_the_house_is_no_merchant() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let fund = |gate: &str, amount: &str| {
        ["treasury", "fund", "--env", "live", "--gate", gate, "--amount", amount, "--reason", "rebalance"]
            .map(str::to_owned)
    };
    let run = |args: [String; 10]| ops.run_env(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let out = run(fund("tron_usdt", "5000"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("house tron_usdt live available=5000"));
    assert!(run(fund("ethereum_usdt", "250.5")).status.success());
    assert!(run(fund("tron_usdt", "-1000")).status.success());
    // Never below zero, never more decimals than the gate has, never zero.
    for (gate, amount, why) in [
        ("tron_usdt", "-4000.01", "insufficient"),
        ("tron_usdt", "0.0000001", "decimal places"),
        ("tron_usdt", "0", "must not be zero"),
        ("nowhere", "1", "unknown gate"),
    ] {
        let out = run(fund(gate, amount));
        assert!(!out.status.success() && stderr(&out).contains(why), "{gate} {amount}: {}", stderr(&out));
    }
    let table = ops.ok(&["treasury", "position"]);
    assert!(table.contains("tron_usdt") && table.contains("4000"), "{table}");
    assert!(table.contains("USDT") && table.contains("4250.5") && table.contains("none (not taken)"), "{table}");
    let out = ops
        .run_env(&["treasury", "position", "--json"], &[("PAYGATE_SETTLEMENT__TREASURY__MAX_EXPOSURE__USDT", "10000")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["gates"]["tron_usdt"], "4000");
    assert_eq!(json["assets"]["USDT"]["position"], "4250.5");
    assert_eq!(json["assets"]["USDT"]["max_exposure"], "10000");
    // Test inventory is apart from live's.
    assert_eq!(ops.ok(&["treasury", "position", "--env", "test", "--json"]).matches("tron_usdt").count(), 0);

    // Each funding is in the audit log with its actor and reason.
    let audit = ops.ok(&["audit", "list"]);
    assert_eq!(audit.matches("treasury.fund").count(), 3, "{audit}");

    // The house is no merchant: not listed, no keys, no adjustments.
    let house = "00000000-0000-0000-0000-00686f757365";
    assert!(!ops.ok(&["merchants", "list"]).contains(house));
    let err = ops.fails(&["keys", "create", "--merchant", house, "--env", "live", "--permissions", "all"], &[]);
    assert!(err.contains("not found"), "{err}");
    let err = ops.fails(&adjust(house, "tron_usdt", "1", "x"), &[]);
    assert!(err.contains("not found"), "{err}");
}

/// `ops treasury check` for cron: passes while the chains hold what is owed, fails loudly (exit
/// code and the gate named) once a merchant is owed money no chain holds; `report` prints it.
#[test]
fn treasury_check_fails_when_holdings_fall_short() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    assert!(ops.ok(&["treasury", "check", "--env", "test"]).contains("treasury check passed (test): 0 gate(s)"));
    let m = ops.ok(&["merchants", "create", "--name", "Owed"]).trim().to_owned();
    ops.ok(&adjust(&m, "bitcoin", "5", "credited without a deposit"));
    let err = ops.fails(&["treasury", "check", "--env", "test"], &[]);
    assert!(err.contains("bitcoin: holdings short by 5 (tolerance 0)"), "{err}");
    let table = ops.ok(&["treasury", "report", "--env", "test"]);
    assert!(table.contains("bitcoin") && table.contains("-5") && table.contains("SHORT"), "{table}");
    let json: serde_json::Value =
        serde_json::from_str(&ops.ok(&["treasury", "report", "--env", "test", "--json"])).unwrap();
    let gate = &json["gates"][0];
    assert_eq!((gate["gate"].as_str(), gate["difference"].as_str()), (Some("bitcoin"), Some("-5")));
    assert_eq!(gate["owed"]["merchants"], "5");
    // Paid back out of the books: within tolerance again.
    ops.ok(&adjust(&m, "bitcoin", "-5", "reverted"));
    assert!(ops.ok(&["treasury", "check", "--env", "test"]).contains("passed"));
}

/// `ops sweeps` on a deployment that sweeps nothing yet: an empty list, and an unknown sweep
/// named as such (the commands against real sweeps are covered by the workers' anvil suites).
#[test]
fn sweeps_list_and_unknown_sweeps() {
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    assert_eq!(ops.ok(&["sweeps", "list", "--all"]).trim(), "");
    assert_eq!(ops.ok(&["sweeps", "list", "--json"]).trim(), "[]");
    let id = "0190c1d2-0000-7000-8000-000000000001";
    assert!(ops.fails(&["sweeps", "fail", id, "--reason", "x"], &[]).contains("no sweep"));
    assert!(ops.fails(&["sweeps", "retry", id], &[]).contains("no sweep"));
    assert!(ops.fails(&["sweeps", "fail", id, "--reason", " "], &[]).contains("--reason"));
}

/// `ops prune`: what `[retention]` says is past its age goes now, and the count is printed; a
/// second run finds nothing, and a retention of 0 days keeps everything.
#[tokio::test]
async fn prune_clears_old_webhook_answers_now() {
    use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel};
    let ops = Ops::new();
    ops.ok(&["migrate"]);
    let url = format!("sqlite://{}?mode=rwc", ops.dir.path().join("ops.db").display());
    let db = sea_orm::Database::connect(url).await.unwrap();
    let old = entity::webhook_attempt::Model {
        id: uuid::Uuid::now_v7(),
        delivery_id: uuid::Uuid::now_v7(),
        attempt_no: 1,
        url: "https://shop.example/hooks".into(),
        started_at: chrono::Utc::now() - chrono::Duration::days(120),
        latency_ms: 7,
        status_code: Some(500),
        error: None,
        response_body: Some("stack trace of the shop".into()),
        succeeded: false,
    };
    old.clone().into_active_model().insert(&db).await.unwrap();
    let keep = [("PAYGATE_RETENTION__ATTEMPT_BODIES_DAYS", "0")];
    let out = ops.run_env(&["prune"], &keep);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pruned: 0 webhook response excerpts"));
    assert_eq!(ops.ok(&["prune"]).trim(), "pruned: 1 webhook response excerpts, 0 ended sessions, 0 ended invitations");
    let row = entity::webhook_attempt::Entity::find_by_id(old.id).one(&db).await.unwrap().unwrap();
    assert_eq!((row.response_body, row.status_code), (None, Some(500)));
    assert!(ops.ok(&["prune"]).contains("pruned: 0 webhook"));
}
