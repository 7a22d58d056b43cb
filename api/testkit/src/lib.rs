//! Test support shared by the integration suites of `api`, `workers` and `ops` (a dev-dependency
//! only, never published): the real router on 127.0.0.1:0 with merchants, keys and HTTP helpers
//! ([`TestApp`]) over a fresh database per test ([`Db`]), balances and credits set up and checked
//! in the database (`ledger`), the events outbox (`events`) and the scanner's state (`scan`) as
//! a test reads them, requests raced together ([`race`]), an anvil node ([`anvil`]) and worker
//! processes ([`fleet`]).
//!
//! Default: a temporary SQLite file (the embedded default). With the `pg` feature (each suite's
//! `--features pg-tests` turns it on): a new
//! PostgreSQL database per test on `PAYGATE_TEST_PG` (default postgres://postgres@127.0.0.1:5432),
//! dropped afterwards. An unreachable PostgreSQL fails the test loudly; nothing is skipped.

pub mod anvil;
mod app;
mod db;
mod events;
pub mod fleet;
mod ledger;
pub mod race;
mod scan;
pub mod serve;

pub use app::{Resp, TestApp};
pub use db::Db;
#[cfg(feature = "pg")]
pub use db::pg_server;
pub use events::*;
pub use ledger::*;
pub use race::BalanceWriteBlock;
pub use scan::*;

use domain::chain::address::AccountKeysConfig;
use domain::config::Config;

/// A valid TRON address (mainnet and test alike) to pay out to.
pub const TRON_DEST: &str = "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP";

/// A decimal from its text.
pub fn d(s: &str) -> rust_decimal::Decimal {
    s.parse().unwrap_or_else(|e| panic!("{s:?} is not a decimal: {e}"))
}

/// Public BIP32 test-vector keys (the "abandon … about" mnemonic): live-format addresses for tests.
pub fn live_keys() -> AccountKeysConfig {
    AccountKeysConfig {
        bitcoin_xpub: Some("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs".into()),
        evm_xpub: Some("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt".into()),
        tron_xpub: Some("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd".into()),
        xrp_address: Some("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh".into()),
        solana_pool: vec![
            "So11111111111111111111111111111111111111112".into(),
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v".into(),
        ],
    }
}

/// The configuration every test starts from: static rates in both environments, live keys set,
/// and a node address for every live EVM network, so live EVM gates are online (the API never
/// calls it; nothing listens on the discard port). Live bitcoin, tron, solana and xrp have no
/// chain adapter, so they stay offline whatever keys are set.
pub fn test_config() -> Config {
    let mut c = Config::default();
    c.rates.live.provider = domain::config::RatesProviderKind::Static;
    c.addresses.live = live_keys();
    for network in ["ethereum", "bsc", "base", "arbitrum", "polygon"] {
        let node = domain::config::EvmNetworkConfig { rpc_url: "http://127.0.0.1:9".into(), ..Default::default() };
        c.evm.networks.insert(network.into(), node);
    }
    c.auth.cache_ttl_secs = 1;
    c.embedded.seed_demo = false;
    // The operator's secrets key: dashboard users' TOTP secrets are sealed with it.
    c.webhooks.secret_key = Some(domain::config::Redacted(domain::webhooks::secrets::SecretBox::new_key_hex()));
    c.db.max_connections = 8;
    // Suites not about throttling fire bursts no merchant would (hundreds of racing writes):
    // the rate limiting layer stays on for every request, its limits out of their reach.
    // tests/it/rate_limits.rs sets its own.
    let high = domain::config::RateLimit { limit: 1_000_000, period_secs: 60 };
    let rl = &mut c.rate_limits;
    (rl.reads, rl.writes, rl.public, rl.auth_failures, rl.test_helpers) = (high, high, high, high, high);
    c
}

/// Takes the test environment's `gate` (a network: "bitcoin", "tron", …) offline in `config`.
pub fn take_test_gate_offline(config: &mut Config, gate: &str) {
    let offline =
        domain::config::GateOverride { status: Some(domain::config::GateStatus::Offline), ..Default::default() };
    config.gates.test.insert(gate.into(), offline);
}
