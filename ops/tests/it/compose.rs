//! `docker-compose.yml` checked against the workspace, without Docker: every service built from
//! the image runs a real binary (for `ops`, a real subcommand), every `PAYGATE_*` variable it sets
//! is a configuration key with a valid value, and every service binary has exactly one service,
//! the workers wired for a fleet (listen address, dependencies, health check, graceful stop).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use domain::config::Config;
use figment::Figment;
use figment::providers::Serialized;
use serde::Deserialize;
use workers::platform::{QueueBackend, RuntimeSettings};

#[derive(Deserialize)]
struct ComposeFile {
    services: BTreeMap<String, Service>,
}

/// The keys the check reads; compose's other keys are ignored.
#[derive(Deserialize)]
struct Service {
    build: Option<serde_norway::Value>,
    entrypoint: Option<serde_norway::Value>,
    env_file: Option<serde_norway::Value>,
    /// Exec form only (`["ops", "migrate"]`).
    command: Option<Vec<String>>,
    /// Mapping form only; values are strings, numbers or booleans.
    #[serde(default)]
    environment: BTreeMap<String, serde_norway::Value>,
    /// Long form only (`migrate: { condition: … }`).
    #[serde(default)]
    depends_on: BTreeMap<String, Dependency>,
    healthcheck: Option<Healthcheck>,
    restart: Option<String>,
    stop_grace_period: Option<String>,
}

#[derive(Deserialize)]
struct Dependency {
    condition: Option<String>,
}

#[derive(Deserialize)]
struct Healthcheck {
    test: Vec<String>,
}

/// Binary name -> package name, from `cargo metadata`.
fn workspace_binaries() -> BTreeMap<String, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let manifest = repo_root().join("Cargo.toml");
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--offline", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata JSON");
    let mut bins = BTreeMap::new();
    for package in meta["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            if target["kind"].as_array().expect("kind").iter().any(|k| k == "bin") {
                let name = target["name"].as_str().expect("target name");
                bins.insert(name.to_owned(), package["name"].as_str().expect("package name").to_owned());
            }
        }
    }
    bins
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every inconsistency between `yaml` and the workspace, one line each (none: consistent).
fn check_compose(yaml: &str, binaries: &BTreeMap<String, String>) -> Vec<String> {
    let mut value: serde_norway::Value = match serde_norway::from_str(yaml) {
        Ok(v) => v,
        Err(e) => return vec![format!("unreadable YAML: {e}")],
    };
    if let Err(e) = value.apply_merge() {
        return vec![format!("merge keys: {e}")];
    }
    let file: ComposeFile = match serde_norway::from_value(value) {
        Ok(f) => f,
        Err(e) => return vec![format!("unexpected compose shape: {e}")],
    };
    let names: BTreeSet<&str> = file.services.keys().map(String::as_str).collect();
    let mut problems = Vec::new();
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, service) in file.services.iter().filter(|(_, s)| s.build.is_some()) {
        if let Some(program) = service.command.as_ref().and_then(|c| c.first()) {
            *runs.entry(program.as_str()).or_default() += 1;
        }
        problems.extend(check_service(service, binaries, &names).into_iter().map(|p| format!("{name}: {p}")));
    }
    for (binary, package) in binaries.iter().filter(|(_, package)| *package != "ops") {
        let n = runs.get(binary.as_str()).copied().unwrap_or(0);
        if n != 1 {
            problems.push(format!("binary `{binary}` ({package}) runs in {n} services, expected exactly 1"));
        }
    }
    problems
}

/// One service built from the image.
fn check_service(s: &Service, binaries: &BTreeMap<String, String>, services: &BTreeSet<&str>) -> Vec<String> {
    let mut problems = Vec::new();
    if s.entrypoint.is_some() || s.env_file.is_some() {
        problems.push("entrypoint and env_file are not checked here: use command and environment".to_owned());
    }
    let command = s.command.clone().unwrap_or_default();
    let Some((program, args)) = command.split_first() else {
        return vec!["no command (name the binary explicitly)".to_owned()];
    };
    match binaries.get(program).map(String::as_str) {
        None => problems.push(format!("`{program}` is not a binary of the workspace")),
        Some("ops") => {
            let help = Command::new(env!("CARGO_BIN_EXE_ops")).args(args).arg("--help").output().expect("run ops");
            if !help.status.success() {
                problems.push(format!("`ops {}` is not an ops command: {}", args.join(" "), stderr(&help)));
            }
        }
        Some(_) if !args.is_empty() => problems.push(format!("`{program}` takes no arguments, got {args:?}")),
        Some(_) => {}
    }

    let mut env = BTreeMap::new();
    for (var, value) in &s.environment {
        match env_value(value).and_then(|v| interpolate(&v)) {
            Ok(v) => {
                env.insert(var.clone(), v);
            }
            Err(e) => problems.push(format!("{var}: {e}")),
        }
    }
    let (config, queue) = match load_config(&env) {
        Ok(loaded) => loaded,
        Err(e) => {
            problems.push(e);
            return problems;
        }
    };
    // Every container has its own filesystem: embedded defaults (SQLite database or job file)
    // would split the fleet's state, and hosts must be services of this file.
    let database_host = url::Url::parse(&config.database_url).ok().and_then(|u| u.host_str().map(str::to_owned));
    if !config.database_url.starts_with("postgres") || !services.contains(database_host.as_deref().unwrap_or("")) {
        problems.push(format!("database_url `{}` is not the PostgreSQL service", config.database_url));
    }
    if program != "ops" {
        match &queue {
            QueueBackend::Redis { url, .. } => {
                let host = url::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned));
                if !services.contains(host.as_deref().unwrap_or("")) {
                    problems.push(format!("queue Redis `{url}` is not a service of this file"));
                }
            }
            other => problems.push(format!("jobs must go through Redis, got {other:?}")),
        }
    }

    // Served to other containers (the API's clients, Prometheus): not on loopback, whose default
    // is 127.0.0.1 and so must be set.
    let served = match binaries.get(program).map(String::as_str) {
        Some("workers") => Some(("PAYGATE_WORKER__LISTEN", config.worker.listen)),
        Some("api") => Some(("PAYGATE_LISTEN", config.listen)),
        _ => None,
    };
    if let Some((var, addr)) = served
        && !addr.ip().is_unspecified()
    {
        problems.push(format!("{var} must be 0.0.0.0:<port>, reachable from other containers (is {addr})"));
    }
    if binaries.get(program).is_some_and(|p| p == "workers") {
        problems.extend(check_worker(s, &config));
    }
    problems
}

/// A worker stage's service: reachable ops endpoints, start order, health check, graceful stop.
fn check_worker(s: &Service, config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    for (dependency, condition) in [("migrate", "service_completed_successfully"), ("redis", "service_healthy")] {
        if s.depends_on.get(dependency).and_then(|d| d.condition.as_deref()) != Some(condition) {
            problems.push(format!("must depend on {dependency} with condition {condition}"));
        }
    }
    let test = s.healthcheck.as_ref().map(|h| h.test.join(" ")).unwrap_or_default();
    let port = config.worker.listen.port();
    let on_port = test.contains(&format!("127.0.0.1/{port}")) || test.contains(&format!("127.0.0.1:{port}"));
    if !test.contains("/health") || !on_port {
        problems.push(format!("healthcheck must request /health on port {port}: {test:?}"));
    }
    if s.restart.as_deref() != Some("unless-stopped") {
        problems.push(format!("restart must be unless-stopped, got {:?}", s.restart));
    }
    let drain = RuntimeSettings::default().shutdown_timeout;
    match s.stop_grace_period.as_deref().map(|g| (g, parse_duration(g))) {
        Some((_, Some(grace))) if grace > drain => {}
        other => problems.push(format!("stop_grace_period must exceed the {drain:?} job drain, got {other:?}")),
    }
    problems
}

/// Defaults plus exactly these variables, read as `Config::load` reads `PAYGATE_*` (figment's
/// `Env::prefixed("PAYGATE_").split("__")`: prefix stripped, lowercased, `__` nests), then the
/// whole configuration and the `[queue]` section extracted (unknown keys fail).
fn load_config(env: &BTreeMap<String, String>) -> Result<(Config, QueueBackend), String> {
    let mut figment = Figment::from(Serialized::defaults(Config::default()));
    for (var, value) in env {
        let prefix = domain::config::ENV_PREFIX;
        if !var.get(..prefix.len()).is_some_and(|p| p.eq_ignore_ascii_case(prefix)) {
            continue; // not configuration (RUST_LOG)
        }
        let key = var[prefix.len()..].to_ascii_lowercase().replace("__", ".");
        if key == "config" || key.split('.').any(str::is_empty) {
            return Err(format!("{var}: not a configuration key the checker can follow"));
        }
        let value: figment::value::Value = value.parse().expect("infallible");
        figment = figment.merge(Serialized::default(&key, value));
    }
    let config = Config::from_figment(figment).map_err(|e| e.to_string())?;
    let queue = config.queue_backend().map_err(|e| e.to_string())?;
    Ok((config, queue))
}

fn env_value(v: &serde_norway::Value) -> Result<String, String> {
    match v {
        serde_norway::Value::String(s) => Ok(s.clone()),
        serde_norway::Value::Number(n) => Ok(n.to_string()),
        serde_norway::Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!("value {other:?} is not a string, number or boolean (taken from the host?)")),
    }
}

/// Compose interpolation with defaults: `${NAME:-default}` and `${NAME-default}` become the
/// default (the check must not depend on the shell running it), `$$` is `$`. Other forms have no
/// value to check and are errors.
fn interpolate(s: &str) -> Result<String, String> {
    let (mut out, mut rest) = (String::new(), s);
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
            continue;
        }
        let (expr, after) = rest
            .strip_prefix('{')
            .and_then(|r| r.split_once('}'))
            .ok_or_else(|| format!("{s:?}: write ${{NAME:-default}}"))?;
        let op = expr.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(expr.len());
        let default = expr[op..].strip_prefix(":-").or_else(|| expr[op..].strip_prefix('-'));
        out.push_str(default.ok_or_else(|| format!("{s:?}: `${{{expr}}}` has no default to check"))?);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// Compose durations such as `40s`, `1m30s`, `2h`.
fn parse_duration(s: &str) -> Option<Duration> {
    let (mut total, mut rest) = (Duration::ZERO, s);
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).filter(|&d| d > 0)?;
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let secs = match &rest[..unit] {
            "h" => 3600,
            "m" => 60,
            "s" => 1,
            _ => return None,
        };
        total += Duration::from_secs(n * secs);
        rest = &rest[unit..];
    }
    (!total.is_zero()).then_some(total)
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or_default().to_owned()
}

fn compose_yaml() -> String {
    std::fs::read_to_string(repo_root().join("docker-compose.yml")).expect("read docker-compose.yml")
}

#[test]
fn compose_file_matches_the_workspace() {
    let binaries = workspace_binaries();
    let workers: Vec<&str> = binaries.iter().filter(|(_, p)| *p == "workers").map(|(b, _)| b.as_str()).collect();
    assert!(workers.len() >= 5 && binaries.contains_key("api"), "binaries found: {binaries:?}");
    let problems = check_compose(&compose_yaml(), &binaries);
    assert!(problems.is_empty(), "docker-compose.yml:\n{}", problems.join("\n"));
}

#[test]
fn checker_catches_mistakes_in_the_compose_file() {
    let binaries = workspace_binaries();
    let yaml = compose_yaml();
    // (text of the real file, its replacement, what the report must say)
    let cases: [(&str, &str, &[&str]); 15] = [
        ("PAYGATE_DATABASE_URL:", "PAYGATE_DATABSE_URL:", &["unknown field: found `databse_url`"]),
        ("PAYGATE_WORKER__LISTEN:", "PAYGATE_WORKER_LISTEN:", &["unknown field: found `worker_listen`"]),
        ("LISTEN: 0.0.0.0:9090", "LISTEN: 0.0.0.0:99999", &["invalid socket address syntax for key \"default.worker"]),
        ("LISTEN: 0.0.0.0:9090", "LISTEN: 127.0.0.1:9090", &["PAYGATE_WORKER__LISTEN must be 0.0.0.0:<port>"]),
        ("PAYGATE_LISTEN: 0.0.0.0:8080", "PAYGATE_LISTEN: 127.0.0.1:8080", &["PAYGATE_LISTEN must be 0.0.0.0:<port>"]),
        ("@postgres:5432", "@localhost:5432", &["is not the PostgreSQL service"]),
        ("PAYGATE_LOG_FORMAT: json", "PAYGATE_LOG_FORMAT: jsno", &["found `jsno`"]),
        ("PAYGATE_REDIS_URL: redis://redis:6379", "PAYGATE_QUEUE__BACKEND: sqlite", &["jobs must go through Redis"]),
        (
            r#"command: ["deposit-scanner"]"#,
            r#"command: ["deposit-scaner"]"#,
            &["`deposit-scaner` is not a binary", "`deposit-scanner` (workers) runs in 0 services"],
        ),
        (r#"["payout-executor"]"#, r#"["confirmation-tracker"]"#, &["`confirmation-tracker` (workers) runs in 2"]),
        (r#"["ops", "migrate"]"#, r#"["ops", "migrat"]"#, &["`ops migrat` is not an ops command"]),
        ("stop_grace_period: 40s", "stop_grace_period: 10s", &["stop_grace_period must exceed the 30s"]),
        ("/dev/tcp/127.0.0.1/9090", "/dev/tcp/127.0.0.1/9091", &["healthcheck must request /health on port 9090"]),
        ("service_healthy }\n  healthcheck", "service_started }\n  healthcheck", &["must depend on redis"]),
        ("${PAYGATE_PUBLIC_BASE_URL:-http://localhost:8080}", "${PAYGATE_PUBLIC_BASE_URL}", &["no default to check"]),
    ];
    for (from, to, expected) in cases {
        let bad = yaml.replacen(from, to, 1);
        assert_ne!(bad, yaml, "`{from}` is no longer in docker-compose.yml: update this case");
        let problems = check_compose(&bad, &binaries);
        for expected in expected {
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{from} -> {to}: expected a problem containing {expected:?}, got:\n{}",
                problems.join("\n")
            );
        }
    }
}

#[test]
fn interpolation_and_durations() {
    assert_eq!(interpolate("${A:-http://x:1}/p$$").unwrap(), "http://x:1/p$");
    assert_eq!(interpolate("${A-b}").unwrap(), "b");
    assert!(interpolate("$A").is_err() && interpolate("${A:?required}").is_err());
    assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_duration("40s"), Some(Duration::from_secs(40)));
    assert_eq!(parse_duration("40"), None);
    assert_eq!(parse_duration("500ms"), None);
}
