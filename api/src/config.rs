//! Configuration: built-in defaults < TOML file < `PAYGATE_*` environment variables.
//!
//! The TOML file is `paygate.toml` in the working directory, or the path in `PAYGATE_CONFIG`.
//! Nested keys use `__` in environment variables: `PAYGATE_RATES__LIVE__PROVIDER=static`.
//! Unknown keys are rejected, so a typo fails at start-up naming the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::chain::address::AccountKeysConfig;

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
    /// Job queues; read by `workers::platform::QueueConfig` (backend, redis_url, prefix, sqlite_path).
    pub queue: figment::value::Dict,
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
    /// Request throttling per API key, client IP and test merchant (`crate::ratelimit`).
    pub rate_limits: RateLimitsConfig,
}

/// `[rate_limits]`: GCRA limits per class. Each class allows `limit` requests per
/// `period_secs`, all of them at once as a burst, refilled evenly over the period.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    pub enabled: bool,
    /// Per API key, GET and HEAD requests.
    pub reads: RateLimit,
    /// Per API key, every other method.
    pub writes: RateLimit,
    /// Per client IP on `/v1/currencies`, `/v1/rates` and every `/checkout/...` route.
    pub public: RateLimit,
    /// Per client IP: failed API key checks (a throttled IP's keys are not looked up).
    pub auth_failures: RateLimit,
    /// Per merchant, `/v1/test/*` (the shared sandbox).
    pub test_helpers: RateLimit,
    /// Keys of the shared store (when `redis_url` is set) start with this prefix.
    pub redis_prefix: String,
    /// Each Redis call (and connection attempt) gives up after this long; the request passes.
    pub redis_timeout_ms: u64,
    /// A store failure (Redis unreachable) is logged at most once per this many seconds.
    pub failure_log_interval_secs: u64,
    /// Header holding the client address set by a reverse proxy (`x-forwarded-for`), read only
    /// on connections from `trusted_proxies`.
    pub trusted_proxy_header: Option<String>,
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// `limit` requests per `period_secs`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub limit: u32,
    pub period_secs: u64,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        let per_minute = |limit| RateLimit { limit, period_secs: 60 };
        RateLimitsConfig {
            enabled: true,
            reads: per_minute(1200),
            writes: per_minute(300),
            public: per_minute(600),
            auth_failures: per_minute(20),
            test_helpers: per_minute(120),
            redis_prefix: "paygate:rl".into(),
            redis_timeout_ms: 200,
            failure_log_interval_secs: 60,
            trusted_proxy_header: None,
            trusted_proxies: Vec::new(),
        }
    }
}

/// `[evm.networks.<network>]` per EVM network the live environment watches (ethereum, bsc,
/// base, arbitrum, polygon), and `[evm.tokens.<gate>]` to override a token gate's contract and
/// decimals (defaults: the mainnet contracts, `gates::token_contract`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmConfig {
    pub networks: BTreeMap<String, EvmNetworkConfig>,
    pub tokens: BTreeMap<String, EvmTokenConfig>,
}

impl EvmConfig {
    /// A token gate's contract and decimals: `[evm.tokens.<gate>]`, else the mainnet contract
    /// (`gates::token_contract`) and the gate's decimals. `None` for a native gate, or when the
    /// contract is not a valid address.
    pub fn token(&self, gate: &crate::gates::Gate) -> Option<(alloy_primitives::Address, u32)> {
        if !gate.is_token {
            return None;
        }
        let over = self.tokens.get(gate.id);
        let contract = over.map(|t| t.contract.as_str()).or_else(|| crate::gates::token_contract(gate))?;
        let contract = contract.parse::<alloy_primitives::Address>().ok()?;
        Some((contract, over.and_then(|t| t.decimals).unwrap_or(gate.decimals)))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmNetworkConfig {
    /// The node's JSON-RPC URL (http or https).
    pub rpc_url: String,
    pub request_timeout_ms: u64,
    /// A failed call is retried this many times, the delay doubling from `retry_backoff_ms`.
    pub max_retries: u32,
    pub retry_backoff_ms: u64,
    /// Blocks before the cursor re-read by every scan (reorganisation look-back). Default: the
    /// gate's confirmation count.
    pub rescan_blocks: Option<u64>,
    /// The payout hot wallet's private key (64 hex characters), or a file holding it. Only the
    /// payout executor reads it; without one, live payouts on this network wait in `queued`.
    pub hot_wallet_key: Option<Redacted>,
    pub hot_wallet_key_file: Option<PathBuf>,
    /// EIP-155 chain id; default the network's mainnet id.
    pub chain_id: Option<u64>,
    /// Fee cap per gas unit, in gwei (EIP-1559 `maxFeePerGas`); a native payout is further
    /// capped by its configured network fee.
    pub max_fee_per_gas_gwei: u64,
    /// Tip per gas unit, in gwei (`maxPriorityFeePerGas`).
    pub priority_fee_gwei: u64,
    /// Gas limit of an ERC-20 transfer (a native transfer uses 21,000).
    pub token_gas_limit: u64,
}

impl Default for EvmNetworkConfig {
    fn default() -> Self {
        EvmNetworkConfig {
            rpc_url: String::new(),
            request_timeout_ms: 10_000,
            max_retries: 5,
            retry_backoff_ms: 200,
            rescan_blocks: None,
            hot_wallet_key: None,
            hot_wallet_key_file: None,
            chain_id: None,
            max_fee_per_gas_gwei: 200,
            priority_fee_gwei: 2,
            token_gas_limit: 100_000,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EvmTokenConfig {
    /// The ERC-20 contract address.
    pub contract: String,
    /// Decimals of the contract, when they differ from the gate's.
    pub decimals: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SettlementConfig {
    /// How often the converter looks for payments to quote or to settle.
    pub poll_interval_ms: u64,
    /// A quote holds this long after it is taken (`locked_until`); a payment confirmed later
    /// is credited in the paid asset (`quote_expired`).
    pub quote_lock_secs: u64,
    /// The test environment's sandbox venue.
    pub sandbox: SandboxVenueConfig,
    /// The live environment's venue: `none` (no live venue is built in yet). Invoices asking
    /// for a conversion in live are refused at creation while it is `none`.
    pub live_venue: String,
}

impl Default for SettlementConfig {
    fn default() -> Self {
        SettlementConfig {
            poll_interval_ms: 500,
            quote_lock_secs: 900,
            sandbox: SandboxVenueConfig::default(),
            live_venue: "none".into(),
        }
    }
}

/// Sandbox venue pricing: the rates provider's prices of both assets in `pricing_fiat`, less
/// the spread; then the fee on the gross target amount.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxVenueConfig {
    /// Percent taken off the mid rate (0..100).
    pub spread_percent: Decimal,
    /// Percent of the gross target amount charged as the conversion fee (0..100).
    pub fee_percent: Decimal,
    /// The fiat both prices are read in.
    pub pricing_fiat: String,
}

impl Default for SandboxVenueConfig {
    fn default() -> Self {
        SandboxVenueConfig {
            spread_percent: Decimal::new(5, 1),
            fee_percent: Decimal::new(25, 2),
            pricing_fiat: "USD".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PayoutsConfig {
    /// How often the executor looks for approved payouts that are due (and lost jobs).
    pub poll_interval_ms: u64,
    /// Delay between looks at a payout waiting for confirmations.
    pub recheck_ms: u64,
    /// A queued or processing payout nobody looked at for this long is enqueued again.
    pub stale_after_secs: u64,
}

impl Default for PayoutsConfig {
    fn default() -> Self {
        PayoutsConfig { poll_interval_ms: 1000, recheck_ms: 1000, stale_after_secs: 30 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WebhooksConfig {
    /// An attempt succeeds on a 2xx answer within this time (connect, send, headers).
    pub timeout_ms: u64,
    /// Delays before each retry after a failed attempt; after the last the delivery is dead.
    pub retry_schedule_secs: Vec<u64>,
    /// Each delay is spread by up to this share (0..=50 percent) either way.
    pub jitter_percent: u8,
    /// A `Retry-After` answer (429, 503) postpones the retry up to this many seconds.
    pub retry_after_max_secs: u64,
    /// Allow plain http in the live environment and targets on loopback, private, link-local
    /// and metadata addresses. For development and tests only.
    pub allow_insecure_targets: bool,
    /// Key that encrypts endpoint secrets at rest: 64 hex characters (32 bytes). Needed by
    /// `ops webhooks` and the deliverer; the API never reads it.
    pub secret_key: Option<Redacted>,
    /// File holding that key (64 hex characters), when `secret_key` is not set. Default on the
    /// embedded SQLite database: `<db stem>-webhooks.key` beside it, created on first use.
    pub secret_key_file: Option<PathBuf>,
    /// How often the deliverer moves new outbox events into deliveries.
    pub dispatch_interval_ms: u64,
    /// Events moved per round.
    pub dispatch_batch: u64,
    /// How often lost deliveries (job gone with a flushed queue, deliverer killed mid-attempt)
    /// are re-enqueued.
    pub sweep_interval_ms: u64,
    /// A delivery due this long without an attempt is considered lost by its job.
    pub stale_after_secs: u64,
    /// How long both the old and the new secret sign after `ops webhooks rotate`.
    pub rotation_overlap_secs: u64,
    /// Bytes of each response body kept with the attempt.
    pub response_body_limit: usize,
    /// Endpoint (URL and secret) cache of a deliverer process; rotation and removal take
    /// effect within this time.
    pub endpoint_cache_ms: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            timeout_ms: 10_000,
            retry_schedule_secs: vec![5, 300, 1800, 7200, 18_000, 36_000, 36_000],
            jitter_percent: 10,
            retry_after_max_secs: 36_000,
            allow_insecure_targets: false,
            secret_key: None,
            secret_key_file: None,
            dispatch_interval_ms: 100,
            dispatch_batch: 500,
            sweep_interval_ms: 5_000,
            stale_after_secs: 60,
            rotation_overlap_secs: 24 * 3600,
            response_body_limit: 1024,
            endpoint_cache_ms: 1_000,
        }
    }
}

/// A file beside the embedded SQLite database, named after it:
/// `sqlite://data/paygate.db?mode=rwc` with `jobs.sqlite` -> `data/paygate-jobs.sqlite`.
/// `None` for PostgreSQL and in-memory SQLite, which have no file to stand beside.
pub fn beside_sqlite_file(database_url: &str, suffix: &str) -> Option<std::path::PathBuf> {
    let file = database_url
        .strip_prefix("sqlite:")
        .map(|rest| rest.trim_start_matches("//"))
        .map(|rest| rest.split('?').next().unwrap_or_default())
        .filter(|f| !f.is_empty() && !f.starts_with(":memory:"))?;
    let file = std::path::Path::new(file);
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("paygate");
    Some(file.with_file_name(format!("{stem}-{suffix}")))
}

/// `webhooks.secret_key`'s format: 64 hex characters -> the 32-byte key.
pub fn parse_secret_key(hex_key: &str) -> Result<[u8; 32], &'static str> {
    let bytes = hex::decode(hex_key.trim()).map_err(|_| "not hex")?;
    bytes.as_slice().try_into().map_err(|_| "must be 32 bytes (64 hex characters)")
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

/// `[server]`: how long the API waits on a client and how many connections it holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// A client must send a request's complete header block within this time (counted from
    /// when the connection starts waiting for it), else the connection is closed (slowloris).
    pub header_read_timeout_ms: u64,
    /// A request whose response is not ready within this time gets 503 `request_timeout`.
    pub request_timeout_ms: u64,
    /// A keep-alive connection with no request in flight is closed after this long idle.
    pub idle_timeout_ms: u64,
    /// Connections held at once; further clients wait in the listen backlog until one closes.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            header_read_timeout_ms: 10_000,
            request_timeout_ms: 30_000,
            idle_timeout_ms: 5_000,
            max_connections: 1024,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    pub listen: SocketAddr,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 9090)) }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// One sandbox block per this many milliseconds on every gate; 0 = blocks only when mined
    /// explicitly (`POST /v1/test/blocks`, `ops sandbox mine`).
    pub block_interval_ms: u64,
    /// Per gate id overrides of `block_interval_ms`.
    pub gate_block_interval_ms: BTreeMap<String, u64>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig { block_interval_ms: 1000, gate_block_interval_ms: BTreeMap::new() }
    }
}

impl SandboxConfig {
    pub fn interval_ms(&self, gate_id: &str) -> u64 {
        self.gate_block_interval_ms.get(gate_id).copied().unwrap_or(self.block_interval_ms)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// How often the scanner polls each gate's tip.
    pub scan_interval_ms: u64,
    /// Most blocks one scan reads (catch-up happens in batches of this size).
    pub scan_batch_blocks: u64,
    /// Delay before the tracker looks at an unconfirmed payment again.
    pub track_interval_ms: u64,
    /// How often the sweeper re-derives work from the database (expiries, stale payments).
    pub sweep_interval_ms: u64,
    /// A seen deposit not confirmed within this window makes its invoice `invalid`.
    pub monitor_window_secs: u64,
    /// Jobs run at once per process, per stage (`deposit-scan`, `track-payment`, …); default 4.
    pub stage_concurrency: BTreeMap<String, usize>,
    /// Attempts of a failing job before it is dead-lettered.
    pub max_attempts: u32,
    /// Blocks a live transaction must stay missing (no receipt, not in the node's mempool) before
    /// its payment is reversed; default: the gate's confirmation depth.
    pub gone_after_blocks: Option<u64>,
    /// Checks, at distinct tip heights, that must find it missing before the reversal (at least 1).
    pub gone_min_checks: u32,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            scan_interval_ms: 1000,
            scan_batch_blocks: 500,
            track_interval_ms: 1000,
            sweep_interval_ms: 5000,
            monitor_window_secs: 24 * 3600,
            stage_concurrency: BTreeMap::new(),
            max_attempts: 10,
            gone_after_blocks: None,
            gone_min_checks: 3,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GateFees {
    /// Charged per payout.
    pub payout_fee: Decimal,
    /// Network fee estimate reserved at creation (the actual fee is settled on completion).
    pub network_fee: Decimal,
    /// Charged per refund.
    pub refund_fee: Decimal,
}

/// Network fee estimates per gate (payout and refund fees default to zero).
fn default_fees() -> BTreeMap<String, GateFees> {
    [
        ("bitcoin", Decimal::new(5, 5)),
        ("ethereum", Decimal::new(5, 4)),
        ("solana", Decimal::new(5, 6)),
        ("ethereum_usdt", Decimal::new(2, 0)),
        ("ethereum_usdc", Decimal::new(2, 0)),
        ("bsc", Decimal::new(2, 4)),
        ("bsc_usdt", Decimal::new(2, 1)),
        ("tron", Decimal::new(1, 0)),
        ("tron_usdt", Decimal::new(2, 0)),
        ("base", Decimal::new(2, 5)),
        ("arbitrum", Decimal::new(5, 5)),
        ("arbitrum_usdt", Decimal::new(2, 1)),
        ("arbitrum_usdc", Decimal::new(2, 1)),
        ("polygon", Decimal::new(5, 2)),
        ("polygon_usdt", Decimal::new(5, 2)),
        ("polygon_usdc", Decimal::new(5, 2)),
        ("solana_usdc", Decimal::new(1, 2)),
        ("xrp", Decimal::new(1, 5)),
    ]
    .into_iter()
    .map(|(g, n)| (g.to_owned(), GateFees { network_fee: n, ..GateFees::default() }))
    .collect()
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DbConfig {
    pub max_connections: u32,
    pub min_connections: u32,
    pub acquire_timeout_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// How long a verified key is trusted without asking the database again. This bounds how
    /// long a revoked key keeps working on an API process.
    pub cache_ttl_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InvoicesConfig {
    /// Lifetime of a draft whose request gives no `draft_expires_at`.
    pub default_draft_lifetime_secs: i64,
    /// Derivation indices an API process reserves at a time. A restart leaves at most two
    /// blocks unused; unpaid invoices leave gaps anyway, so the service (not a wallet's gap
    /// limit) is what watches derived addresses. Live Solana pools always reserve one at a time.
    pub address_block_size: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RatesConfig {
    pub test: RatesSourceConfig,
    pub live: RatesSourceConfig,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RatesProviderKind {
    /// Fixed rates from `static_rates` (the test environment's default).
    Static,
    /// A CoinGecko-compatible `simple/price` endpoint.
    Http,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RatesSourceConfig {
    pub provider: RatesProviderKind,
    /// For `http`: base URL; the provider calls `{url}/simple/price?ids=…&vs_currencies=…`.
    pub url: String,
    pub refresh_secs: u64,
    /// Rates older than this are stale: fiat-priced invoices are refused (503 rates_unavailable).
    pub max_age_secs: u64,
    pub request_timeout_secs: u64,
    /// Fiat currencies to fetch.
    pub fiats: Vec<String>,
    /// For `http`: asset code -> the provider's coin id.
    pub coin_ids: BTreeMap<String, String>,
    /// For `static`: asset code -> fiat code -> price of one unit.
    pub static_rates: BTreeMap<String, BTreeMap<String, Decimal>>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatesConfig {
    pub test: BTreeMap<String, GateOverride>,
    pub live: BTreeMap<String, GateOverride>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateOverride {
    pub status: Option<GateStatus>,
    /// Narrow the spec's per-invoice minimum/maximum for this deployment.
    pub min_amount: Option<Decimal>,
    pub max_amount: Option<Decimal>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    Online,
    Offline,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AddressesConfig {
    /// Operator account public keys for the live environment. A family without a key makes its
    /// live gates `offline`.
    pub live: AccountKeysConfig,
    /// Test environment keys; empty = the built-in test keys.
    pub test: Option<AccountKeysConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddedConfig {
    /// On first start (no merchant yet) create a demo merchant and print a test key once.
    pub seed_demo: bool,
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
            invoices: InvoicesConfig::default(),
            rates: RatesConfig::default(),
            gates: GatesConfig::default(),
            addresses: AddressesConfig::default(),
            embedded: EmbeddedConfig::default(),
            fees: default_fees(),
            sandbox: SandboxConfig::default(),
            pipeline: PipelineConfig::default(),
            queue: figment::value::Dict::new(),
            worker: WorkerConfig::default(),
            webhooks: WebhooksConfig::default(),
            payouts: PayoutsConfig::default(),
            settlement: SettlementConfig::default(),
            evm: EvmConfig::default(),
            rate_limits: RateLimitsConfig::default(),
        }
    }
}

impl Default for DbConfig {
    fn default() -> Self {
        DbConfig { max_connections: 32, min_connections: 1, acquire_timeout_secs: 10 }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig { cache_ttl_secs: 5 }
    }
}

impl Default for InvoicesConfig {
    fn default() -> Self {
        InvoicesConfig { default_draft_lifetime_secs: 7 * 24 * 3600, address_block_size: 100 }
    }
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig { seed_demo: true }
    }
}

fn default_coin_ids() -> BTreeMap<String, String> {
    [
        ("BTC", "bitcoin"),
        ("ETH", "ethereum"),
        ("SOL", "solana"),
        ("BNB", "binancecoin"),
        ("TRX", "tron"),
        ("POL", "polygon-ecosystem-token"),
        ("XRP", "ripple"),
        ("USDT", "tether"),
        ("USDC", "usd-coin"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect()
}

/// Sandbox prices: round numbers so tests and demos are easy to follow.
fn default_static_rates() -> BTreeMap<String, BTreeMap<String, Decimal>> {
    let usd_eur = |usd: i64| {
        let usd = Decimal::from(usd);
        BTreeMap::from([
            ("USD".to_owned(), usd),
            ("EUR".to_owned(), usd * Decimal::new(9, 1)),
            ("GBP".to_owned(), usd * Decimal::new(8, 1)),
        ])
    };
    BTreeMap::from([
        ("BTC".to_owned(), usd_eur(60_000)),
        ("ETH".to_owned(), usd_eur(3_000)),
        ("SOL".to_owned(), usd_eur(150)),
        ("BNB".to_owned(), usd_eur(600)),
        (
            "TRX".to_owned(),
            BTreeMap::from([
                ("USD".to_owned(), Decimal::new(25, 2)),
                ("EUR".to_owned(), Decimal::new(225, 3)),
                ("GBP".to_owned(), Decimal::new(2, 1)),
            ]),
        ),
        (
            "POL".to_owned(),
            BTreeMap::from([
                ("USD".to_owned(), Decimal::new(5, 1)),
                ("EUR".to_owned(), Decimal::new(45, 2)),
                ("GBP".to_owned(), Decimal::new(4, 1)),
            ]),
        ),
        (
            "XRP".to_owned(),
            BTreeMap::from([
                ("USD".to_owned(), Decimal::new(2, 0)),
                ("EUR".to_owned(), Decimal::new(18, 1)),
                ("GBP".to_owned(), Decimal::new(16, 1)),
            ]),
        ),
        (
            "USDT".to_owned(),
            BTreeMap::from([
                ("USD".to_owned(), Decimal::ONE),
                ("EUR".to_owned(), Decimal::new(9, 1)),
                ("GBP".to_owned(), Decimal::new(8, 1)),
            ]),
        ),
        (
            "USDC".to_owned(),
            BTreeMap::from([
                ("USD".to_owned(), Decimal::ONE),
                ("EUR".to_owned(), Decimal::new(9, 1)),
                ("GBP".to_owned(), Decimal::new(8, 1)),
            ]),
        ),
    ])
}

impl RatesSourceConfig {
    fn with_provider(provider: RatesProviderKind) -> Self {
        RatesSourceConfig {
            provider,
            url: "https://api.coingecko.com/api/v3".into(),
            refresh_secs: 60,
            max_age_secs: 600,
            request_timeout_secs: 10,
            fiats: vec!["USD".into(), "EUR".into(), "GBP".into()],
            coin_ids: default_coin_ids(),
            static_rates: default_static_rates(),
        }
    }
}

impl Default for RatesSourceConfig {
    fn default() -> Self {
        Self::with_provider(RatesProviderKind::Static)
    }
}

impl Default for RatesConfig {
    fn default() -> Self {
        RatesConfig {
            test: RatesSourceConfig::with_provider(RatesProviderKind::Static),
            live: RatesSourceConfig::with_provider(RatesProviderKind::Http),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Figment(#[from] Box<figment::Error>),
    #[error("invalid configuration: `{key}`: {message}")]
    Invalid { key: String, message: String },
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

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid =
            |key: &str, message: &str| Err(ConfigError::Invalid { key: key.to_owned(), message: message.to_owned() });
        if !(self.database_url.starts_with("sqlite:")
            || self.database_url.starts_with("postgres://")
            || self.database_url.starts_with("postgresql://"))
        {
            return invalid("database_url", "must start with sqlite:, postgres:// or postgresql://");
        }
        for (key, ms) in [
            ("server.header_read_timeout_ms", self.server.header_read_timeout_ms),
            ("server.request_timeout_ms", self.server.request_timeout_ms),
            ("server.idle_timeout_ms", self.server.idle_timeout_ms),
        ] {
            if ms == 0 {
                return invalid(key, "must be at least 1");
            }
        }
        if self.server.max_connections == 0 {
            return invalid("server.max_connections", "must be at least 1");
        }
        if self.db.max_connections == 0 {
            return invalid("db.max_connections", "must be at least 1");
        }
        if self.auth.cache_ttl_secs > 60 {
            return invalid(
                "auth.cache_ttl_secs",
                "must be at most 60 (revoked keys must stop working within seconds)",
            );
        }
        if self.invoices.address_block_size == 0 {
            return invalid("invoices.address_block_size", "must be at least 1");
        }
        if self.invoices.default_draft_lifetime_secs <= 0 {
            return invalid("invoices.default_draft_lifetime_secs", "must be positive");
        }
        for (env, src) in [("test", &self.rates.test), ("live", &self.rates.live)] {
            if src.refresh_secs == 0 {
                return invalid(&format!("rates.{env}.refresh_secs"), "must be at least 1");
            }
            if src.provider == RatesProviderKind::Http && url::Url::parse(&src.url).is_err() {
                return invalid(&format!("rates.{env}.url"), "must be an absolute URL");
            }
            for (asset, fiats) in &src.static_rates {
                for (fiat, rate) in fiats {
                    if *rate <= Decimal::ZERO {
                        return invalid(&format!("rates.{env}.static_rates.{asset}.{fiat}"), "must be positive");
                    }
                }
            }
        }
        use crate::chain::address::{AddressDeriver, ChainNet};
        let bad_keys = |e: crate::chain::address::AddressConfigError| ConfigError::Invalid {
            key: e.key().to_owned(),
            message: e.to_string(),
        };
        AddressDeriver::from_config(&self.addresses.live, ChainNet::Mainnet, "addresses.live").map_err(bad_keys)?;
        if let Some(test) = &self.addresses.test {
            AddressDeriver::from_config(test, ChainNet::Testnet, "addresses.test").map_err(bad_keys)?;
        }
        for (gate, f) in &self.fees {
            let Some(g) = crate::gates::find(gate) else {
                return invalid(&format!("fees.{gate}"), "unknown gate id");
            };
            for (name, v) in
                [("payout_fee", f.payout_fee), ("network_fee", f.network_fee), ("refund_fee", f.refund_fee)]
            {
                if v < Decimal::ZERO || v.scale() > g.decimals {
                    return invalid(
                        &format!("fees.{gate}.{name}"),
                        &format!("must be >= 0 with at most {} decimals", g.decimals),
                    );
                }
            }
        }
        let w = &self.webhooks;
        if w.timeout_ms == 0 || w.timeout_ms > 60_000 {
            return invalid("webhooks.timeout_ms", "must be between 1 and 60000");
        }
        if w.retry_schedule_secs.len() > 20 {
            return invalid("webhooks.retry_schedule_secs", "at most 20 retries");
        }
        if w.jitter_percent > 50 {
            return invalid("webhooks.jitter_percent", "must be at most 50");
        }
        if w.dispatch_batch == 0 || w.dispatch_interval_ms == 0 || w.sweep_interval_ms == 0 {
            return invalid(
                "webhooks",
                "dispatch_batch, dispatch_interval_ms and sweep_interval_ms must be at least 1",
            );
        }
        if self.payouts.poll_interval_ms == 0 || self.payouts.recheck_ms == 0 || self.payouts.stale_after_secs == 0 {
            return invalid("payouts", "poll_interval_ms, recheck_ms and stale_after_secs must be at least 1");
        }
        for (network, net) in &self.evm.networks {
            let known = crate::gates::GATES
                .iter()
                .any(|g| g.network == network && g.family == crate::chain::address::AddressFamily::Evm);
            if !known {
                return invalid(
                    &format!("evm.networks.{network}"),
                    "not an EVM network (ethereum, bsc, base, arbitrum, polygon)",
                );
            }
            if url::Url::parse(&net.rpc_url).map_or(true, |u| !matches!(u.scheme(), "http" | "https")) {
                return invalid(&format!("evm.networks.{network}.rpc_url"), "must be an http(s) URL");
            }
            if net.request_timeout_ms == 0 {
                return invalid(&format!("evm.networks.{network}.request_timeout_ms"), "must be at least 1");
            }
        }
        for (gate, t) in &self.evm.tokens {
            let ok = crate::gates::find(gate)
                .is_some_and(|g| g.is_token && g.family == crate::chain::address::AddressFamily::Evm);
            if !ok {
                return invalid(&format!("evm.tokens.{gate}"), "not an EVM token gate");
            }
            if t.contract.parse::<alloy_primitives::Address>().is_err() {
                return invalid(&format!("evm.tokens.{gate}.contract"), "must be a 0x-prefixed 20-byte address");
            }
            if t.decimals.is_some_and(|d| d > 28) {
                return invalid(&format!("evm.tokens.{gate}.decimals"), "at most 28");
            }
        }
        let st = &self.settlement;
        if st.poll_interval_ms == 0 {
            return invalid("settlement.poll_interval_ms", "must be at least 1");
        }
        for (key, pct) in [("spread_percent", st.sandbox.spread_percent), ("fee_percent", st.sandbox.fee_percent)] {
            if pct < Decimal::ZERO || pct >= Decimal::ONE_HUNDRED {
                return invalid(&format!("settlement.sandbox.{key}"), "must be at least 0 and below 100");
            }
        }
        if st.live_venue != "none" {
            return invalid("settlement.live_venue", "only \"none\" is supported (no live venue is built in yet)");
        }
        if w.stale_after_secs == 0 {
            return invalid("webhooks.stale_after_secs", "must be at least 1");
        }
        if let Some(k) = &w.secret_key
            && parse_secret_key(&k.0).is_err()
        {
            return invalid("webhooks.secret_key", "must be 64 hex characters (32 bytes)");
        }
        let rl = &self.rate_limits;
        for (class, l) in [
            ("reads", rl.reads),
            ("writes", rl.writes),
            ("public", rl.public),
            ("auth_failures", rl.auth_failures),
            ("test_helpers", rl.test_helpers),
        ] {
            if l.limit == 0 || l.period_secs == 0 || l.period_secs > 86_400 {
                return invalid(
                    &format!("rate_limits.{class}"),
                    "limit must be at least 1 and period_secs between 1 and 86400",
                );
            }
        }
        if rl.redis_timeout_ms == 0 {
            return invalid("rate_limits.redis_timeout_ms", "must be at least 1");
        }
        if let Some(h) = &rl.trusted_proxy_header
            && axum::http::HeaderName::from_bytes(h.as_bytes()).is_err()
        {
            return invalid("rate_limits.trusted_proxy_header", "not a valid header name");
        }
        if rl.trusted_proxy_header.is_some() == rl.trusted_proxies.is_empty() {
            return invalid(
                "rate_limits.trusted_proxies",
                "trusted_proxy_header and trusted_proxies are set together (the header is read only from those proxies)",
            );
        }
        for (env, gates) in [("test", &self.gates.test), ("live", &self.gates.live)] {
            for id in gates.keys() {
                if crate::gates::find(id).is_none() {
                    return invalid(&format!("gates.{env}.{id}"), "unknown gate id");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::*;

    #[test]
    fn server_section_sets_timeouts_and_refuses_zero() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("c.toml", "[server]\nheader_read_timeout_ms = 2000\nmax_connections = 7\n")?;
            jail.set_env("PAYGATE_SERVER__IDLE_TIMEOUT_MS", "1500");
            let cfg = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(cfg.server.header_read_timeout_ms, 2000);
            assert_eq!(cfg.server.idle_timeout_ms, 1500);
            assert_eq!(cfg.server.max_connections, 7);
            assert_eq!(cfg.server.request_timeout_ms, ServerConfig::default().request_timeout_ms);
            Ok(())
        });
        for (var, key) in [
            ("PAYGATE_SERVER__REQUEST_TIMEOUT_MS", "server.request_timeout_ms"),
            ("PAYGATE_SERVER__MAX_CONNECTIONS", "server.max_connections"),
        ] {
            figment::Jail::expect_with(|jail| {
                jail.set_env(var, "0");
                let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{err}");
                Ok(())
            });
        }
    }

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
            jail.set_env("PAYGATE_AUTH__CACHE_TTL_SECS", "600");
            let err = Config::from_figment(Config::figment(std::path::Path::new("none.toml"))).unwrap_err();
            assert!(err.to_string().contains("auth.cache_ttl_secs"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn settlement_settings_parse_and_are_checked() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "c.toml",
                "[settlement]\nquote_lock_secs = 60\n[settlement.sandbox]\nspread_percent = \"1.5\"\nfee_percent = \"0\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.settlement.quote_lock_secs, 60);
            assert_eq!(c.settlement.sandbox.spread_percent, Decimal::new(15, 1));
            assert_eq!(c.settlement.sandbox.fee_percent, Decimal::ZERO);
            assert_eq!(c.settlement.live_venue, "none");
            for (toml, key) in [
                ("[settlement.sandbox]\nfee_percent = \"100\"\n", "settlement.sandbox.fee_percent"),
                ("[settlement.sandbox]\nspread_percent = \"-1\"\n", "settlement.sandbox.spread_percent"),
                ("[settlement]\nlive_venue = \"binance\"\n", "settlement.live_venue"),
                ("[settlement]\npoll_interval_ms = 0\n", "settlement.poll_interval_ms"),
            ] {
                jail.create_file("c.toml", toml)?;
                let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{toml}: {err}");
            }
            Ok(())
        });
    }

    #[test]
    fn evm_networks_and_tokens_are_checked() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "c.toml",
                "[evm.networks.ethereum]\nrpc_url = \"http://127.0.0.1:8545\"\n[evm.tokens.ethereum_usdt]\ncontract = \"0xdAC17F958D2ee523a2206206994597C13D831ec7\"\n",
            )?;
            let c = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap();
            assert_eq!(c.evm.networks["ethereum"].max_retries, 5);
            assert_eq!(c.evm.tokens["ethereum_usdt"].decimals, None);
            for (toml, key) in [
                ("[evm.networks.bitcoin]\nrpc_url = \"http://x\"\n", "evm.networks.bitcoin"),
                ("[evm.networks.base]\nrpc_url = \"ws://x\"\n", "evm.networks.base.rpc_url"),
                (
                    "[evm.tokens.tron_usdt]\ncontract = \"0xdAC17F958D2ee523a2206206994597C13D831ec7\"\n",
                    "evm.tokens.tron_usdt",
                ),
                ("[evm.tokens.bsc_usdt]\ncontract = \"0x12\"\n", "evm.tokens.bsc_usdt.contract"),
            ] {
                jail.create_file("c.toml", toml)?;
                let err = Config::from_figment(Config::figment(std::path::Path::new("c.toml"))).unwrap_err();
                assert!(err.to_string().contains(key), "{toml}: {err}");
            }
            Ok(())
        });
    }
}
