//! The EVM suites' live app on an anvil node: the ethereum network's configuration (paying out
//! from anvil's second dev account when asked) and a test app on it.

use domain::config::{EvmNetworkConfig, EvmTokenConfig};
use testkit::TestApp;
use testkit::anvil::Anvil;

/// anvil's second dev account (its well-known test key): the payout hot wallet.
pub const HOT_WALLET_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";

pub const HOT_WALLET: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// The ethereum network on `anvil`, paying out from [`HOT_WALLET`] when `hot_wallet`.
pub fn node(anvil: &Anvil, max_retries: u32, retry_backoff_ms: u64, hot_wallet: bool) -> EvmNetworkConfig {
    EvmNetworkConfig {
        rpc_url: anvil.url.clone(),
        max_retries,
        retry_backoff_ms,
        hot_wallet_key: hot_wallet.then(|| domain::config::Redacted(HOT_WALLET_KEY.into())),
        chain_id: hot_wallet.then_some(31337),
        ..Default::default()
    }
}

/// A test app on the ethereum network `net`, with `token` as the `ethereum_usdt` contract.
pub async fn app_on(net: EvmNetworkConfig, token: Option<&str>) -> TestApp {
    TestApp::spawn_with(|c| {
        c.evm.networks.insert("ethereum".into(), net);
        if let Some(token) = token {
            let token = EvmTokenConfig { contract: token.to_owned(), decimals: Some(6) };
            c.evm.tokens.insert("ethereum_usdt".into(), token);
        }
    })
    .await
}
