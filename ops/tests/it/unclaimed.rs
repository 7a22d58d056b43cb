//! `ops deposits` over unclaimed deposits, through the real binary on a scratch SQLite database:
//! a deposit is listed with its depth and is refundable only at its gate's confirmations
//! (resolving one short of them, or gone from its chain, is refused with the reason); a gone one
//! is listed only with `--all`. The tracker that follows them on their chains is tested in the
//! workers' pipeline suites.

use std::process::{Command, Output};

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use serde_json::Value;
use uuid::Uuid;

struct Ops {
    dir: tempfile::TempDir,
}

impl Ops {
    fn database_url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.dir.path().join("ops.db").display())
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_ops"))
            .args(args)
            .current_dir(self.dir.path())
            .env("PAYGATE_DATABASE_URL", self.database_url())
            .env("PAYGATE_QUEUE__SQLITE_PATH", self.dir.path().join("jobs.sqlite"))
            .env("USER", "oscar")
            .env("RUST_LOG", "error")
            .output()
            .unwrap()
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "ops {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The command fails; its error output.
    #[track_caller]
    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "ops {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8(out.stderr).unwrap()
    }

    fn listed(&self, args: &[&str]) -> Vec<Value> {
        let args = [&["deposits", "unclaimed", "--json"][..], args].concat();
        self.ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

/// An unclaimed bitcoin deposit as the scanner records it (the columns it has always written;
/// the tracker's fill in their defaults).
async fn recorded(db: &sea_orm::DatabaseConnection, tx_hash: &str) -> Uuid {
    let id = Uuid::now_v7();
    let sql = "INSERT INTO unclaimed_deposits (id, environment, gate_id, tx_hash, output_index, address_key, \
               amount, block_height, reason, seen_at) VALUES (?, 'live', 'bitcoin', ?, 0, ?, '0.3', 812345, \
               'other_gate', ?)";
    let values: [sea_orm::Value; 4] = [
        id.into(),
        tx_hash.into(),
        "bitcoin:bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4:".into(),
        chrono::Utc::now().into(),
    ];
    db.execute_raw(Statement::from_sql_and_values(DbBackend::Sqlite, sql, values)).await.unwrap();
    id
}

async fn set(db: &sea_orm::DatabaseConnection, id: Uuid, assignments: &str) {
    let sql = format!("UPDATE unclaimed_deposits SET {assignments} WHERE id = ?");
    db.execute_raw(Statement::from_sql_and_values(DbBackend::Sqlite, sql, [id.into()])).await.unwrap();
}

#[tokio::test]
async fn an_unclaimed_deposit_is_refundable_only_once_confirmed_and_never_once_gone() {
    let ops = Ops { dir: tempfile::tempdir().unwrap() };
    ops.ok(&["migrate"]);
    let db = sea_orm::Database::connect(ops.database_url()).await.unwrap();
    let id = recorded(&db, "a1").await;

    // Just seen: 0 of bitcoin's 3 confirmations, not refundable.
    let open = ops.listed(&[]);
    assert_eq!(open.len(), 1, "{open:?}");
    let row = &open[0];
    assert_eq!(row["id"], id.to_string());
    assert_eq!((&row["status"], &row["confirmations"]), (&"confirming".into(), &0.into()), "{row}");
    assert_eq!((&row["required_confirmations"], &row["refundable"]), (&3.into(), &false.into()), "{row}");
    let table = ops.ok(&["deposits", "unclaimed"]);
    assert!(table.contains("0/3 confirmations confirming: not refundable"), "{table}");
    let why = ops.fails(&["deposits", "resolve", &id.to_string(), "--reason", "returned in tx 9F3A"]);
    assert!(why.contains("has 0 of the 3 confirmations bitcoin requires"), "{why}");
    assert_eq!(ops.listed(&[])[0]["resolved_at"], Value::Null, "nothing resolved");

    // Missing from its chain at its depth: still not refundable.
    set(&db, id, "status = 'confirmed', confirmations = 3, missing_since_height = 812350").await;
    let why = ops.fails(&["deposits", "resolve", &id.to_string(), "--reason", "returned"]);
    assert!(why.contains("is missing from the bitcoin chain since block 812350"), "{why}");
    // On the chain at its depth: refundable, and resolved once.
    set(&db, id, "missing_since_height = NULL").await;
    assert_eq!(ops.listed(&[])[0]["refundable"], true);
    assert!(ops.ok(&["deposits", "unclaimed"]).contains("3/3 confirmations refundable"));
    ops.ok(&["deposits", "resolve", &id.to_string(), "--reason", "returned in tx 9F3A"]);
    assert!(ops.listed(&[]).is_empty(), "resolved");

    // Gone from its chain: nothing to return, listed only with --all.
    let gone = recorded(&db, "g1").await;
    set(&db, gone, "status = 'gone', missing_since_height = 812346").await;
    assert!(ops.listed(&[]).is_empty(), "gone: not listed");
    let all = ops.listed(&["--all"]);
    assert_eq!(all.iter().filter(|r| r["status"] == "gone" && r["refundable"] == false).count(), 1, "{all:?}");
    let why = ops.fails(&["deposits", "resolve", &gone.to_string(), "--reason", "returned"]);
    assert!(why.contains("is gone from the bitcoin chain"), "{why}");
}
