//! The 18 gates of spec 2.10: an asset on a network.

use rust_decimal::Decimal;

use crate::chain::address::AddressFamily;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub id: &'static str,
    /// Asset code (`USDT`).
    pub asset: &'static str,
    pub name: &'static str,
    pub network: &'static str,
    pub decimals: u32,
    pub confirmations: u32,
    /// Per-invoice minimum / maximum, as (mantissa, scale).
    min: (i64, u32),
    max: (i64, u32),
    pub family: AddressFamily,
    /// Token contract / mint, for tokens.
    pub is_token: bool,
}

impl Gate {
    /// The network's name as people know it (`BNB Smart Chain`, `XRP Ledger`): what a payer
    /// reads in "USDT on BNB Smart Chain (BEP-20)".
    pub fn network_name(&self) -> &'static str {
        network_name(self.network)
    }

    /// The token standard a wallet names the asset by on its network (`BEP-20`), for tokens on
    /// the networks that have one; `None` for native assets.
    pub fn token_standard(&self) -> Option<&'static str> {
        if !self.is_token {
            return None;
        }
        match self.network {
            "ethereum" | "arbitrum" | "polygon" | "base" => Some("ERC-20"),
            "bsc" => Some("BEP-20"),
            "tron" => Some("TRC-20"),
            "solana" => Some("SPL"),
            _ => None,
        }
    }

    /// "ETH on Ethereum", "USDT on BNB Smart Chain (BEP-20)": the English label (pages that
    /// speak other languages compose it from `network_name` and `token_standard`).
    pub fn label(&self) -> String {
        match self.token_standard() {
            Some(std) => format!("{} on {} ({std})", self.asset, self.network_name()),
            None => format!("{} on {}", self.asset, self.network_name()),
        }
    }

    /// How many decimals a fiat-priced quote in this asset is rounded up to, unless configured
    /// otherwise (`[gates.<env>.<gate>] quote_decimals`): a figure people type and wallets show,
    /// worth at most a few cents per step at today's prices (docs/api-decisions.md, "Quote
    /// precision"). Never more than the asset's own decimals.
    pub fn default_quote_decimals(&self) -> u32 {
        let d = match (self.asset, self.is_token) {
            // Stablecoins: cents.
            ("USDT" | "USDC", true) => 2,
            // 1 satoshi.
            ("BTC", _) => 8,
            // ETH on every network, and BNB: 0.000001 (a fraction of a cent).
            ("ETH" | "BNB", false) => 6,
            // SOL: 0.0001.
            ("SOL", false) => 4,
            // TRX, XRP, POL: 0.01, as their wallets and exchanges quote them.
            ("TRX" | "XRP" | "POL", false) => 2,
            _ => self.decimals,
        };
        d.min(self.decimals)
    }

    pub fn min_amount(&self) -> Decimal {
        Decimal::new(self.min.0, self.min.1)
    }

    pub fn max_amount(&self) -> Decimal {
        Decimal::new(self.max.0, self.max.1)
    }
}

#[allow(clippy::too_many_arguments)]
const fn gate(
    id: &'static str,
    asset: &'static str,
    name: &'static str,
    network: &'static str,
    decimals: u32,
    confirmations: u32,
    min: (i64, u32),
    max: (i64, u32),
    family: AddressFamily,
    is_token: bool,
) -> Gate {
    Gate { id, asset, name, network, decimals, confirmations, min, max, family, is_token }
}

use AddressFamily::{Bitcoin, Evm, Solana, Tron, Xrp};

/// Confirmation counts: blocks as in spec 2.10; Solana `commitment` = finalized (1 finalized
/// observation); XRP `immediate` = one validated ledger.
pub static GATES: [Gate; 18] = [
    gate("bitcoin", "BTC", "Bitcoin", "bitcoin", 8, 3, (1, 4), (10, 0), Bitcoin, false),
    gate("ethereum", "ETH", "Ether", "ethereum", 18, 12, (1, 3), (100, 0), Evm, false),
    gate("solana", "SOL", "Solana", "solana", 9, 1, (1, 2), (10_000, 0), Solana, false),
    gate("ethereum_usdt", "USDT", "Tether USD (ERC-20)", "ethereum", 6, 12, (1, 0), (100_000, 0), Evm, true),
    gate("ethereum_usdc", "USDC", "USD Coin (ERC-20)", "ethereum", 6, 12, (1, 0), (100_000, 0), Evm, true),
    gate("bsc", "BNB", "BNB", "bsc", 18, 15, (1, 3), (100, 0), Evm, false),
    gate("bsc_usdt", "USDT", "Tether USD (BEP-20)", "bsc", 18, 15, (1, 0), (100_000, 0), Evm, true),
    gate("tron", "TRX", "TRON", "tron", 6, 19, (1, 0), (100_000, 0), Tron, false),
    gate("tron_usdt", "USDT", "Tether USD (TRC-20)", "tron", 6, 19, (1, 0), (100_000, 0), Tron, true),
    gate("base", "ETH", "Ether on Base", "base", 18, 20, (1, 3), (100, 0), Evm, false),
    gate("arbitrum", "ETH", "Ether on Arbitrum", "arbitrum", 18, 20, (1, 3), (100, 0), Evm, false),
    gate("arbitrum_usdt", "USDT", "Tether USD (Arbitrum)", "arbitrum", 6, 20, (1, 0), (100_000, 0), Evm, true),
    gate("arbitrum_usdc", "USDC", "USD Coin (Arbitrum)", "arbitrum", 6, 20, (1, 0), (100_000, 0), Evm, true),
    gate("polygon", "POL", "Polygon Ecosystem Token", "polygon", 18, 128, (1, 1), (100_000, 0), Evm, false),
    gate("polygon_usdt", "USDT", "Tether USD (Polygon)", "polygon", 6, 128, (1, 0), (100_000, 0), Evm, true),
    gate("polygon_usdc", "USDC", "USD Coin (Polygon)", "polygon", 6, 128, (1, 0), (100_000, 0), Evm, true),
    gate("solana_usdc", "USDC", "USD Coin (SPL)", "solana", 6, 1, (1, 0), (100_000, 0), Solana, true),
    gate("xrp", "XRP", "XRP", "xrp", 6, 1, (1, 1), (100_000, 0), Xrp, false),
];

/// A public block explorer's page of a live transaction on `network` (the dashboard links each
/// payment's hash to it); `None` for a network without one here. Test transactions live on the
/// sandbox chain only and are never linked.
pub fn explorer_tx_url(network: &str, tx_hash: &str) -> Option<String> {
    let base = match network {
        "bitcoin" => "https://mempool.space/tx/",
        "ethereum" => "https://etherscan.io/tx/",
        "bsc" => "https://bscscan.com/tx/",
        "base" => "https://basescan.org/tx/",
        "arbitrum" => "https://arbiscan.io/tx/",
        "polygon" => "https://polygonscan.com/tx/",
        "tron" => "https://tronscan.org/#/transaction/",
        "solana" => "https://solscan.io/tx/",
        "xrp" => "https://xrpscan.com/tx/",
        _ => return None,
    };
    tx_hash.chars().all(|c| c.is_ascii_alphanumeric()).then(|| format!("{base}{tx_hash}"))
}

/// A network's name as people know it; the id itself for a network this table does not know.
pub fn network_name(network: &str) -> &str {
    match network {
        "bitcoin" => "Bitcoin",
        "ethereum" => "Ethereum",
        "solana" => "Solana",
        "bsc" => "BNB Smart Chain",
        "tron" => "TRON",
        "base" => "Base",
        "arbitrum" => "Arbitrum One",
        "polygon" => "Polygon",
        "xrp" => "XRP Ledger",
        other => other,
    }
}

/// The native gate of `gate`'s network (its own gate for a native one): the asset its
/// transactions pay their fees in.
pub fn native_of(gate: &Gate) -> Option<&'static Gate> {
    GATES.iter().find(|g| g.network == gate.network && !g.is_token)
}

pub fn find(id: &str) -> Option<&'static Gate> {
    GATES.iter().find(|g| g.id == id)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// Neither a gate id nor an asset code we support.
    UnknownCurrency(String),
    /// The asset exists, but not on that network.
    UnknownNetwork { currency: String, network: String },
    /// The asset exists on several networks and none was given.
    Ambiguous { currency: String, networks: Vec<&'static str> },
}

impl ResolveError {
    /// The request field the problem is about.
    pub fn field(&self) -> &'static str {
        match self {
            ResolveError::UnknownCurrency(_) => "currency",
            ResolveError::UnknownNetwork { .. } | ResolveError::Ambiguous { .. } => "network",
        }
    }
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolveError::UnknownCurrency(c) => write!(f, "unsupported currency {c:?}"),
            ResolveError::UnknownNetwork { currency, network } => {
                write!(f, "currency {currency:?} is not supported on network {network:?}")
            }
            ResolveError::Ambiguous { currency, networks } => {
                write!(f, "currency {currency:?} exists on several networks ({}); give `network`", networks.join(", "))
            }
        }
    }
}

/// Resolve `currency` (asset code like `USDT`, or a gate id like `tron_usdt`) and an optional
/// `network` to one gate. Asset codes are case-insensitive.
pub fn resolve(currency: &str, network: Option<&str>) -> Result<&'static Gate, ResolveError> {
    if let Some(g) = find(currency) {
        return match network {
            Some(n) if n != g.network => {
                Err(ResolveError::UnknownNetwork { currency: currency.into(), network: n.into() })
            }
            _ => Ok(g),
        };
    }
    let asset = currency.to_ascii_uppercase();
    let candidates: Vec<&'static Gate> = GATES.iter().filter(|g| g.asset == asset).collect();
    if candidates.is_empty() {
        return Err(ResolveError::UnknownCurrency(currency.into()));
    }
    match network {
        Some(n) => candidates
            .into_iter()
            .find(|g| g.network == n)
            .ok_or_else(|| ResolveError::UnknownNetwork { currency: currency.into(), network: n.into() }),
        None if candidates.len() == 1 => Ok(candidates[0]),
        None => Err(ResolveError::Ambiguous {
            currency: currency.into(),
            networks: candidates.iter().map(|g| g.network).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_transactions_link_to_an_explorer_of_their_network() {
        assert_eq!(explorer_tx_url("bitcoin", "ab12").as_deref(), Some("https://mempool.space/tx/ab12"));
        assert_eq!(explorer_tx_url("tron", "ab12").as_deref(), Some("https://tronscan.org/#/transaction/ab12"));
        assert_eq!(explorer_tx_url("ethereum", "0xab12").as_deref(), Some("https://etherscan.io/tx/0xab12"));
        assert_eq!(explorer_tx_url("bitcoin", "ab/../x"), None, "only a hash is put into the link");
        assert_eq!(explorer_tx_url("sandbox", "ab12"), None);
    }

    #[test]
    fn payers_read_the_asset_on_the_network_by_its_common_name() {
        let label = |id: &str| find(id).unwrap().label();
        assert_eq!(label("ethereum"), "ETH on Ethereum");
        assert_eq!(label("base"), "ETH on Base");
        assert_eq!(label("bsc_usdt"), "USDT on BNB Smart Chain (BEP-20)");
        assert_eq!(label("tron_usdt"), "USDT on TRON (TRC-20)");
        assert_eq!(label("solana_usdc"), "USDC on Solana (SPL)");
        assert_eq!(label("xrp"), "XRP on XRP Ledger");
        assert_eq!(label("bitcoin"), "BTC on Bitcoin");
        for g in GATES.iter() {
            assert_ne!(g.network_name(), g.network, "{}: no common name", g.id);
            assert_eq!(g.token_standard().is_some(), g.is_token, "{}", g.id);
        }
    }

    #[test]
    fn quote_precision_per_gate() {
        let q = |id: &str| find(id).unwrap().default_quote_decimals();
        assert_eq!((q("bitcoin"), q("ethereum"), q("base"), q("bsc"), q("solana")), (8, 6, 6, 6, 4));
        assert_eq!((q("tron"), q("xrp"), q("polygon")), (2, 2, 2));
        for g in GATES.iter().filter(|g| g.asset == "USDT" || g.asset == "USDC") {
            assert_eq!(g.default_quote_decimals(), 2, "{}", g.id);
        }
        for g in GATES.iter() {
            assert!(g.default_quote_decimals() <= g.decimals, "{}", g.id);
        }
    }

    #[test]
    fn eighteen_unique_gates_with_spec_bounds() {
        let mut ids: Vec<_> = GATES.iter().map(|g| g.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 18);
        let btc = find("bitcoin").unwrap();
        assert_eq!((btc.min_amount().to_string(), btc.max_amount().to_string()), ("0.0001".into(), "10".into()));
        assert_eq!(find("polygon").unwrap().min_amount().to_string(), "0.1");
        assert_eq!(find("xrp").unwrap().min_amount().to_string(), "0.1");
        assert_eq!(find("polygon_usdc").unwrap().confirmations, 128);
        for g in &GATES {
            assert!(g.min_amount() < g.max_amount(), "{}", g.id);
            assert!(g.min_amount().scale() <= g.decimals, "{}", g.id);
        }
    }

    #[test]
    fn resolution_rules() {
        assert_eq!(resolve("BTC", None).unwrap().id, "bitcoin");
        assert_eq!(resolve("btc", Some("bitcoin")).unwrap().id, "bitcoin");
        assert_eq!(resolve("SOL", None).unwrap().id, "solana");
        assert_eq!(resolve("tron_usdt", None).unwrap().id, "tron_usdt");
        assert_eq!(resolve("USDT", Some("tron")).unwrap().id, "tron_usdt");
        assert!(matches!(resolve("USDT", None), Err(ResolveError::Ambiguous { .. })));
        assert!(matches!(resolve("ETH", None), Err(ResolveError::Ambiguous { .. })));
        assert!(matches!(resolve("USDT", Some("solana")), Err(ResolveError::UnknownNetwork { .. })));
        assert!(matches!(resolve("DOGE", None), Err(ResolveError::UnknownCurrency(_))));
        assert!(matches!(resolve("tron_usdt", Some("ethereum")), Err(ResolveError::UnknownNetwork { .. })));
    }
}

/// The EIP-155 chain id of an EVM gate's network (mainnet ids; the sandbox mirrors them).
pub fn evm_chain_id(gate: &Gate) -> Option<u64> {
    match gate.network {
        "ethereum" => Some(1),
        "bsc" => Some(56),
        "base" => Some(8453),
        "arbitrum" => Some(42161),
        "polygon" => Some(137),
        _ => None,
    }
}

/// The token contract (EVM, TRON) or mint (Solana) of a token gate.
pub fn token_contract(gate: &Gate) -> Option<&'static str> {
    match gate.id {
        "ethereum_usdt" => Some("0xdAC17F958D2ee523a2206206994597C13D831ec7"),
        "ethereum_usdc" => Some("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"),
        "bsc_usdt" => Some("0x55d398326f99059fF775485246999027B3197955"),
        "arbitrum_usdt" => Some("0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9"),
        "arbitrum_usdc" => Some("0xaf88d065e77c8cC2239327C5EDb3A432268e5831"),
        "polygon_usdt" => Some("0xc2132D05D31c914a87C6611C10748AEb04B58e8F"),
        "polygon_usdc" => Some("0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359"),
        "tron_usdt" => Some("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"),
        "solana_usdc" => Some("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"),
        _ => None,
    }
}

#[cfg(test)]
mod contract_tests {
    use super::*;

    #[test]
    fn every_token_gate_has_a_contract_and_every_evm_gate_a_chain_id() {
        for g in &GATES {
            assert_eq!(token_contract(g).is_some(), g.is_token, "{}", g.id);
            assert_eq!(evm_chain_id(g).is_some(), g.family == AddressFamily::Evm, "{}", g.id);
        }
    }
}
