//! The shared domain: the rules over the data model (`entity`) that the HTTP face (`api`), the
//! worker stages (`workers`) and the operator CLI (`ops`) all call. Configuration, the database
//! connection, API keys and permissions, gates and their availability, exchange rates, deposit
//! address derivation and validation, the ledger, the events outbox, each resource's service
//! and types (invoices, static addresses, payouts, refunds), the webhook endpoints, secrets and
//! signatures. Nothing here knows HTTP: services return `domain_error::DomainError` (a kind and
//! the stable `error.code`), which `api::error` maps to a status and the envelope.

pub mod addresses;
pub mod api_keys;
pub mod audit;
pub mod availability;
pub mod bulk;
pub mod cache;
pub mod chain;
pub mod config;
pub mod db;
pub mod domain_error;
pub mod events;
pub mod exports;
pub mod gates;
pub mod invoices;
pub mod keys;
pub mod ledger;
pub mod list_counts;
pub mod merchants;
pub mod messages;
pub mod owned;
pub mod payments;
pub mod payouts;
pub mod rates;
pub mod refunds;
pub mod retention;
pub mod sandbox_payments;
pub mod settings;
pub mod settlement;
pub mod shutdown;
pub mod state;
pub mod static_addresses;
pub mod telemetry;
pub mod treasury;
pub mod unclaimed;
pub mod users;
pub mod webhooks;

pub use entity::ids::{
    ApiKeyId, DeliveryId, EventId, InvoiceId, MerchantId, PaymentId, PayoutId, RefundId, SandboxTransferId,
    StaticAddressId, UnclaimedDepositId,
};

use config::Config;
use state::AppState;

/// Connects, migrates, builds the state and starts the rates refresher: everything a process
/// that serves merchants needs before it listens.
pub async fn bootstrap(config: Config) -> anyhow::Result<AppState> {
    let db = db::connect(&config).await?;
    db::migrate(&db).await?;
    let state = AppState::new(db, config)?;
    availability::log_live_gates(&state.config, &state.addresses);
    state.rates.start(&state.db).await;
    Ok(state)
}

/// Who may write what, checked over the workspace's production sources (tests set up states
/// by hand and are not read): a payment row is updated only by `payments` (its status moves in
/// `payments::lifecycle`), and an invoice's status only by `invoices::lifecycle`. A new writer
/// elsewhere fails this test; move the write into the owning module instead.
#[cfg(test)]
mod owners {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The workspace's production sources, read once: `(path relative to the workspace, text)`.
    fn workspace() -> Vec<(String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["api/src", "workers/src", "ops/src", "entity/src", "entity/domain/src", "migration/src"] {
            sources(&root.join(dir), &mut files);
        }
        assert!(files.len() > 100, "the workspace's sources were not found under {}", root.display());
        files
            .into_iter()
            .map(|f| {
                (
                    f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"),
                    std::fs::read_to_string(&f).unwrap(),
                )
            })
            // This test names the needles itself.
            .filter(|(rel, _)| !rel.ends_with("domain/src/lib.rs"))
            .collect()
    }

    /// `file:line` of each line containing `needle` in a file outside `owner` (a path prefix;
    /// `None`: no file may contain it).
    fn outside(files: &[(String, String)], needle: &str, owner: Option<&str>) -> Vec<String> {
        let mut found = Vec::new();
        for (rel, text) in files.iter().filter(|(rel, _)| !owner.is_some_and(|o| rel.starts_with(o))) {
            for (i, line) in text.lines().enumerate() {
                if line.contains(needle) {
                    found.push(format!("{rel}:{}", i + 1));
                }
            }
        }
        found
    }

    #[test]
    fn payment_rows_are_updated_only_by_the_payments_module() {
        let files = workspace();
        let rows = outside(&files, "payment::Entity::update", Some("entity/domain/src/payments/"));
        assert!(rows.is_empty(), "payment rows updated outside domain::payments: {rows:?}");
        let status =
            outside(&files, "col_expr(payment::Column::Status", Some("entity/domain/src/payments/lifecycle.rs"));
        assert!(status.is_empty(), "payment status written outside payments::lifecycle: {status:?}");
    }

    #[test]
    fn invoice_status_is_written_only_by_the_invoice_lifecycle() {
        let files = workspace();
        let status =
            outside(&files, "col_expr(invoice::Column::Status", Some("entity/domain/src/invoices/lifecycle.rs"));
        assert!(status.is_empty(), "invoice status written outside invoices::lifecycle: {status:?}");
        let set = outside(&files, "status = Set(", None);
        assert!(set.is_empty(), "a status set through an active model, not a guarded update: {set:?}");
    }

    /// Keys that move money are loaded only in the payout executor's process: the hot wallets'
    /// (`Signers::from_config`) and the deposit account's (`DepositKeys::load`, through
    /// `Sweeper::from_config`), both by `ExecutorCtx::new`, which only the payout executor's
    /// stage builds. The API, scanner, tracker, converter and deliverer never reach them.
    #[test]
    fn money_moving_keys_are_loaded_only_by_the_payout_executor() {
        let files = workspace();
        for (needle, owner) in [
            ("Signers::from_config(", "workers/src/executor/job.rs"),
            ("Sweeper::from_config(", "workers/src/executor/job.rs"),
            ("DepositKeys::load(", "workers/src/sweeper/"),
            ("ExecutorCtx::new(", "workers/src/stages.rs"),
        ] {
            let found = outside(&files, needle, Some(owner));
            assert!(found.is_empty(), "{needle} outside {owner}: {found:?}");
        }
        // Each family's deposit keys: loaded by the sweeper (and their own module's unit tests).
        for (needle, module) in [
            ("DepositWallet::load(", "workers/src/chain/bitcoin/deposits.rs"),
            ("SolanaDeposits::load(", "workers/src/chain/solana/deposits.rs"),
            ("TronDeposits::load(", "workers/src/chain/tron/deposits.rs"),
        ] {
            let found: Vec<String> = outside(&files, needle, Some("workers/src/sweeper/"))
                .into_iter()
                .filter(|at| !at.starts_with(&format!("{module}:")))
                .collect();
            assert!(found.is_empty(), "{needle} outside the sweeper: {found:?}");
        }
        let stage = files.iter().find(|(rel, _)| rel == "workers/src/stages.rs").expect("stages.rs");
        let built = stage.1.lines().position(|l| l.contains("ExecutorCtx::new(")).expect("built once");
        let arm = stage.1.lines().take(built + 1).filter(|l| l.contains("Stage::")).last().unwrap_or_default();
        assert!(arm.contains("Stage::PayoutExecutor"), "ExecutorCtx is built outside the payout executor's arm: {arm}");
    }
}
