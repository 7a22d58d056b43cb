//! Configuration: built-in defaults < TOML file < `PAYGATE_*` environment variables.
//!
//! The TOML file is `paygate.toml` in the working directory, or the path in `PAYGATE_CONFIG`.
//! Nested keys use `__` in environment variables: `PAYGATE_RATES__LIVE__PROVIDER=static`.
//! Unknown keys are rejected, so a typo fails at start-up naming the key.
//!
//! This file holds [`Config`] (the top-level keys), loading, and the validation that calls each
//! section's own; every TOML section (or close group) has its own file with its structs, their
//! defaults, its validation and its tests.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

mod addresses;
mod auth;
mod bitcoin;
mod dashboard;
mod db;
mod email;
mod evm;
mod gates;
mod invoices;
mod payouts;
mod pipeline;
mod queue;
mod rate_limits;
mod rates;
mod retention;
mod sandbox;
mod server;
mod settlement;
mod solana;
mod treasury;
mod tron;
mod webhooks;
mod worker;
mod xrp;

pub use addresses::AddressesConfig;
pub use auth::AuthConfig;
pub use bitcoin::BitcoinConfig;
pub use dashboard::DashboardConfig;
pub use db::{DbConfig, beside_sqlite_file};
pub use email::{EmailConfig, EmailTls};
pub use evm::{EvmConfig, EvmNetworkConfig, EvmTokenConfig};
pub use gates::{GateFees, GateOverride, GateStatus, GatesConfig};
pub use invoices::InvoicesConfig;
pub use payouts::PayoutsConfig;
pub use pipeline::PipelineConfig;
pub use queue::{DEFAULT_QUEUE_PREFIX, QueueBackend, QueueBackendKind, QueueConfig};
pub use rate_limits::{RateLimit, RateLimitsConfig};
pub use rates::{RatesConfig, RatesProviderKind, RatesSourceConfig};
pub use retention::RetentionConfig;
pub use sandbox::SandboxConfig;
pub use server::ServerConfig;
pub use settlement::{SandboxVenueConfig, SettlementConfig, TreasuryVenueConfig};
pub use solana::SolanaConfig;
pub use treasury::{TreasuryConfig, TreasuryGateConfig};
pub use tron::TronConfig;
pub use webhooks::{WebhooksConfig, parse_secret_key};
pub use worker::WorkerConfig;
pub use xrp::{MAX_LAST_LEDGER_OFFSET as XRP_MAX_LAST_LEDGER_OFFSET, XrpConfig};

pub const ENV_PREFIX: &str = "PAYGATE_";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `sqlite://paygate.db?mode=rwc` (embedded default) or `postgres://…`.
    pub database_url: String,
    /// Redis for job queues and shared limits. Empty: the embedded queue (single process).
    pub redis_url: Option<String>,
    pub listen: SocketAddr,
    /// The API listener's timeouts and connection cap (`[server]`).
    pub server: ServerConfig,
    /// Base of `checkout_url` links handed to payers.
    pub public_base_url: url::Url,
    pub log_format: LogFormat,
    pub db: DbConfig,
    pub auth: AuthConfig,
    /// The merchant dashboard: sessions, invitations, sign-in throttling.
    pub dashboard: DashboardConfig,
    pub invoices: InvoicesConfig,
    pub rates: RatesConfig,
    /// Per environment, per gate overrides: `[gates.live.bitcoin] status = "offline"`.
    pub gates: GatesConfig,
    pub addresses: AddressesConfig,
    pub embedded: EmbeddedConfig,
    /// Per gate id: payout fee, network fee estimate and refund fee, in the gate's asset.
    pub fees: BTreeMap<String, GateFees>,
    /// The test environment's sandbox chains.
    pub sandbox: SandboxConfig,
    /// Deposit scanning and confirmation tracking.
    pub pipeline: PipelineConfig,
    /// Job queues: backend, redis_url, prefix, sqlite_path ([`Config::queue_backend`]).
    pub queue: QueueConfig,
    /// Worker processes: where each serves `/health`, `/ready` and `/metrics`.
    pub worker: WorkerConfig,
    /// Webhook delivery: timeout, retry schedule, outbound safety, the secrets' encryption key.
    pub webhooks: WebhooksConfig,
    /// The payout executor.
    pub payouts: PayoutsConfig,
    /// The settlement converter and its venues.
    pub settlement: SettlementConfig,
    /// Live EVM networks: JSON-RPC endpoints, token contracts.
    pub evm: EvmConfig,
    /// The live Bitcoin network's node (`bitcoin`).
    pub bitcoin: BitcoinConfig,
    /// The live TRON network's node (`tron`, `tron_usdt`).
    pub tron: TronConfig,
    /// The live Solana cluster's node (`solana`, `solana_usdc`).
    pub solana: SolanaConfig,
    /// The live XRP Ledger's node (`xrp`).
    pub xrp: XrpConfig,
    /// SMTP for payer e-mail (`payer_email` invoices).
    pub email: EmailConfig,
    /// Request throttling per API key, client IP and test merchant (`crate::ratelimit`).
    pub rate_limits: RateLimitsConfig,
    /// The operator's wallets per gate (watch-only) and the reconciliation (`[treasury]`).
    pub treasury: TreasuryConfig,
    /// What is pruned after how long (`[retention]`).
    pub retention: RetentionConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database_url: "sqlite://paygate.db?mode=rwc".into(),
            redis_url: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            server: ServerConfig::default(),
            public_base_url: url::Url::parse("http://127.0.0.1:8080").expect("static url"),
            log_format: LogFormat::Text,
            db: DbConfig::default(),
            auth: AuthConfig::default(),
            dashboard: DashboardConfig::default(),
            invoices: InvoicesConfig::default(),
            rates: RatesConfig::default(),
            gates: GatesConfig::default(),
            addresses: AddressesConfig::default(),
            embedded: EmbeddedConfig::default(),
            fees: gates::default_fees(),
            sandbox: SandboxConfig::default(),
            pipeline: PipelineConfig::default(),
            queue: QueueConfig::default(),
            worker: WorkerConfig::default(),
            webhooks: WebhooksConfig::default(),
            payouts: PayoutsConfig::default(),
            settlement: SettlementConfig::default(),
            evm: EvmConfig::default(),
            bitcoin: BitcoinConfig::default(),
            tron: TronConfig::default(),
            solana: SolanaConfig::default(),
            xrp: XrpConfig::default(),
            email: EmailConfig::default(),
            rate_limits: RateLimitsConfig::default(),
            treasury: TreasuryConfig::default(),
            retention: RetentionConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddedConfig {
    /// On first start (no merchant yet) create a demo merchant and print a test key once.
    pub seed_demo: bool,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig { seed_demo: true }
    }
}

/// A configuration string that never appears in `Debug` output or logs.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Redacted(pub String);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"***\"")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Figment(#[from] Box<figment::Error>),
    #[error("invalid configuration: `{key}`: {message}")]
    Invalid { key: String, message: String },
}

/// The validation failure naming `key` (its full path, `rates.live.url`).
fn invalid(key: &str, message: &str) -> Result<(), ConfigError> {
    Err(ConfigError::Invalid { key: key.to_owned(), message: message.to_owned() })
}

/// The chain node sections share two rules: the node URL key switches the chain's live gates on
/// (empty: offline, and nothing else in the section is checked), and the payout hot wallet is a
/// key given inline (`hot_wallet_key`) or in a file (`hot_wallet_key_file`).
macro_rules! node_sections {
    ($($section:ident: $ty:ty, $url:ident;)+) => {$(
        impl $ty {
            /// Whether a node is configured (the chain's gates can be watched in live).
            pub fn configured(&self) -> bool {
                !self.$url.is_empty()
            }

            /// Whether a payout hot wallet key is configured.
            pub fn has_hot_wallet(&self) -> bool {
                self.hot_wallet_key.is_some() || self.hot_wallet_key_file.is_some()
            }

            fn validate_node(&self) -> Result<(), ConfigError> {
                if !self.configured() {
                    return Ok(());
                }
                check_node(stringify!($section), stringify!($url), &self.$url, self.request_timeout_ms)?;
                self.validate()
            }
        }
    )+};
}

node_sections! {
    bitcoin: BitcoinConfig, rpc_url;
    solana: SolanaConfig, rpc_url;
    tron: TronConfig, api_url;
    xrp: XrpConfig, rpc_url;
}

/// A chain node's endpoint in section `section` (`bitcoin`, `evm.networks.base`): an http(s)
/// URL in `url_key`, and a request timeout of at least 1 ms.
fn check_node(section: &str, url_key: &str, url: &str, request_timeout_ms: u64) -> Result<(), ConfigError> {
    if url::Url::parse(url).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
        return invalid(&format!("{section}.{url_key}"), "must be an http(s) URL");
    }
    if request_timeout_ms == 0 {
        return invalid(&format!("{section}.request_timeout_ms"), "must be at least 1");
    }
    Ok(())
}

impl Config {
    /// Defaults, then the TOML file, then `PAYGATE_*` variables.
    pub fn load() -> Result<Config, ConfigError> {
        let path =
            std::env::var_os("PAYGATE_CONFIG").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("paygate.toml"));
        Self::from_figment(Self::figment(&path))
    }

    pub fn figment(toml_path: &std::path::Path) -> Figment {
        Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::file(toml_path))
            .merge(Env::prefixed(ENV_PREFIX).ignore(&["config"]).split("__"))
    }

    pub fn from_figment(figment: Figment) -> Result<Config, ConfigError> {
        let cfg: Config = figment.extract().map_err(Box::new)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The first problem, section by section; each section checks its own keys.
    fn validate(&self) -> Result<(), ConfigError> {
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return invalid("database_url", "must start with sqlite:, postgres:// or postgresql://");
        }
        self.server.validate()?;
        self.db.validate()?;
        self.auth.validate()?;
        self.dashboard.validate()?;
        self.retention.validate()?;
        self.invoices.validate()?;
        self.rates.validate()?;
        self.addresses.validate()?;
        gates::validate_fees(&self.fees)?;
        self.webhooks.validate()?;
        self.payouts.validate()?;
        self.evm.validate()?;
        self.tron.validate_node()?;
        self.solana.validate_node()?;
        self.bitcoin.validate_node()?;
        self.xrp.validate_node()?;
        self.email.validate()?;
        self.settlement.validate()?;
        self.rate_limits.validate()?;
        self.treasury.validate()?;
        self.queue_backend()?;
        self.gates.validate()
    }

    /// The job queues' backend: `[queue]` with its unset keys filled from `redis_url` and
    /// `database_url`.
    pub fn queue_backend(&self) -> Result<QueueBackend, ConfigError> {
        self.queue.resolve(self.redis_url.as_deref(), &self.database_url)
    }
}

/// In a test's `figment::Jail`: with `var` set to `bad` the configuration is refused naming
/// `key`; then `var` is set to `good`.
#[cfg(test)]
pub(crate) fn assert_refused(jail: &mut figment::Jail, var: &str, (bad, good): (&str, &str), key: &str) {
    jail.set_env(var, bad);
    let err = Config::load().unwrap_err().to_string();
    assert!(err.contains(key), "{var}={bad}: {err}");
    jail.set_env(var, good);
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::*;

    #[test]
    fn env_overrides_file_and_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "listen = \"127.0.0.1:9000\"\n[auth]\ncache_ttl_secs = 2\n")?;
            jail.set_env("PAYGATE_AUTH__CACHE_TTL_SECS", "3");
            let cfg = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(cfg.listen.port(), 9000);
            assert_eq!(cfg.auth.cache_ttl_secs, 3);
            assert_eq!(cfg.invoices.address_block_size, 100);
            Ok(())
        });
    }

    #[test]
    fn errors_name_the_key() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("PAYGATE_DB__MAX_CONNECTIONS", "many");
            let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
            assert!(err.to_string().to_lowercase().contains("db.max_connections"), "{err}");
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[rates]\nlive = { provider = \"carrier-pigeon\" }\n")?;
            let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
            assert!(err.to_string().contains("rates.live.provider"), "{err}");
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            jail.set_env("PAYGATE_LISTEN_ADDR", "x");
            let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
            assert!(err.to_string().to_lowercase().contains("listen_addr"), "{err}");
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            // A quote cannot be finer than the asset itself; a coarser one is the operator's call.
            jail.create_file("c.toml", "[gates.live.tron_usdt]\nquote_decimals = 7\n")?;
            let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
            assert!(err.to_string().contains("gates.live.tron_usdt.quote_decimals"), "{err}");
            jail.create_file("c.toml", "[gates.live.tron_usdt]\nquote_decimals = 0\n")?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.gates.live["tron_usdt"].quote_decimals, Some(0));
            Ok(())
        });
        figment::Jail::expect_with(|jail| {
            jail.set_env("PAYGATE_AUTH__CACHE_TTL_SECS", "600");
            let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
            assert!(err.to_string().contains("auth.cache_ttl_secs"), "{err}");
            Ok(())
        });
    }
}
