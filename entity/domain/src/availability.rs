//! Whether a gate can take deposits and make payouts in an environment, and why not.
//!
//! A live gate is `online` only when this deployment can see deposits on it: its deposit
//! addresses can be derived AND a chain adapter for its network is configured (the deposit
//! scanner builds its chains from the same configuration). A gate that can derive addresses but
//! has no adapter would hand payers an address whose funds nobody sees, so it is `offline`.
//! Payouts and refunds additionally need a signer (a hot wallet key configured for the payout
//! executor). The test environment runs on the sandbox chains and the sandbox signer, so there
//! only the operator's own `gates.test.<gate>.status` and missing test keys take a gate offline.
//!
//! Where it is enforced: the API refuses an offline gate with 503 `gate_offline` before writing
//! anything (`AppState`'s gate checks), the payout executor queues a payout only when its process
//! has a signer and a chain adapter for the gate (otherwise the payout stays `approved`), and
//! every API process logs the live gates' state at start-up ([`log_live_gates`]). A gate whose
//! deposits nobody could see is never offered to a payer.

use entity::Environment;

use crate::addresses::AddressBook;
use crate::chain::address::AddressFamily;
use crate::config::{Config, GateStatus};
use crate::gates::{GATES, Gate};

/// Why a gate is offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offline {
    /// `gates.<env>.<gate>.status = "offline"`.
    ConfiguredOffline,
    /// The address family has no operator key (`addresses.<env>`).
    NoDepositKeys(AddressFamily),
    /// The EVM network has no `[evm.networks.<network>]` (no node to read).
    NetworkNotConfigured(&'static str),
    /// A token gate whose contract is neither configured nor a usable default.
    NoTokenContract,
    /// Payouts only: no hot wallet key for the network.
    NoSigner(&'static str),
    /// The network's node is not configured (no node to read): `[section] key`, e.g.
    /// `[tron] api_url`.
    NodeNotConfigured { section: &'static str, key: &'static str },
    /// Payouts only: no hot wallet key in the chain's section (`[bitcoin] hot_wallet_key_file`).
    NoHotWallet(&'static str),
}

impl Offline {
    pub const BITCOIN: Offline = Offline::NodeNotConfigured { section: "bitcoin", key: "rpc_url" };
    pub const TRON: Offline = Offline::NodeNotConfigured { section: "tron", key: "api_url" };
    pub const SOLANA: Offline = Offline::NodeNotConfigured { section: "solana", key: "rpc_url" };
    pub const XRP: Offline = Offline::NodeNotConfigured { section: "xrp", key: "rpc_url" };
}

/// Online when the network's node is configured.
fn node(configured: bool, otherwise: Offline) -> Result<(), Offline> {
    if configured { Ok(()) } else { Err(otherwise) }
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Offline::ConfiguredOffline => write!(f, "configured offline (gates.<env>.<gate>.status)"),
            Offline::NoDepositKeys(family) => write!(f, "no deposit key configured for the {family:?} address family"),
            Offline::NetworkNotConfigured(n) => {
                write!(f, "no node configured: set [evm.networks.{n}] rpc_url so its deposits are scanned")
            }
            Offline::NoTokenContract => write!(f, "no usable token contract ([evm.tokens.<gate>] contract)"),
            Offline::NoSigner(n) => write!(f, "no payout signer: set [evm.networks.{n}] hot_wallet_key_file"),
            Offline::NodeNotConfigured { section, key } => {
                write!(f, "no node configured: set [{section}] {key} so its deposits are scanned")
            }
            Offline::NoHotWallet(section) => write!(f, "no payout signer: set [{section}] hot_wallet_key_file"),
        }
    }
}

/// Deposits: online when configured so, its addresses derive, and (live) a chain adapter
/// watches its network.
pub fn deposits(cfg: &Config, addresses: &AddressBook, env: Environment, gate: &Gate) -> Result<(), Offline> {
    if configured_offline(cfg, env, gate) {
        return Err(Offline::ConfiguredOffline);
    }
    if !addresses.supports(env, gate.family) {
        return Err(Offline::NoDepositKeys(gate.family));
    }
    match env {
        Environment::Test => Ok(()),
        Environment::Live => live_adapter(cfg, gate),
    }
}

/// Payouts and refunds: the gate is online for deposits-independent reasons (configured, its
/// network watched, so the executor can follow the transaction) and a signer is configured.
pub fn payouts(cfg: &Config, env: Environment, gate: &Gate) -> Result<(), Offline> {
    if configured_offline(cfg, env, gate) {
        return Err(Offline::ConfiguredOffline);
    }
    match env {
        Environment::Test => Ok(()),
        Environment::Live => {
            live_adapter(cfg, gate)?;
            match gate.family {
                AddressFamily::Evm => {
                    let net = cfg.evm.networks.get(gate.network).ok_or(Offline::NetworkNotConfigured(gate.network))?;
                    if net.hot_wallet_key.is_none() && net.hot_wallet_key_file.is_none() {
                        return Err(Offline::NoSigner(gate.network));
                    }
                    Ok(())
                }
                AddressFamily::Bitcoin => hot_wallet(cfg.bitcoin.has_hot_wallet(), "bitcoin"),
                AddressFamily::Xrp => hot_wallet(cfg.xrp.has_hot_wallet(), "xrp"),
                AddressFamily::Tron => hot_wallet(cfg.tron.has_hot_wallet(), "tron"),
                AddressFamily::Solana => hot_wallet(cfg.solana.has_hot_wallet(), "solana"),
            }
        }
    }
}

/// Payouts need the hot wallet key of `[section]`.
fn hot_wallet(configured: bool, section: &'static str) -> Result<(), Offline> {
    if configured { Ok(()) } else { Err(Offline::NoHotWallet(section)) }
}

/// `online`/`offline` as published (`/v1/currencies`).
pub fn status(cfg: &Config, addresses: &AddressBook, env: Environment, gate: &Gate) -> GateStatus {
    match deposits(cfg, addresses, env, gate) {
        Ok(()) => GateStatus::Online,
        Err(_) => GateStatus::Offline,
    }
}

fn configured_offline(cfg: &Config, env: Environment, gate: &Gate) -> bool {
    let map = match env {
        Environment::Test => &cfg.gates.test,
        Environment::Live => &cfg.gates.live,
    };
    map.get(gate.id).and_then(|o| o.status) == Some(GateStatus::Offline)
}

/// A live adapter for the gate's network: an EVM network's, or the Bitcoin, TRON, Solana or XRP
/// node's, configured.
fn live_adapter(cfg: &Config, gate: &Gate) -> Result<(), Offline> {
    match gate.family {
        AddressFamily::Evm => {
            if !cfg.evm.networks.contains_key(gate.network) {
                return Err(Offline::NetworkNotConfigured(gate.network));
            }
            if gate.is_token && cfg.evm.token(gate).is_none() {
                return Err(Offline::NoTokenContract);
            }
            Ok(())
        }
        AddressFamily::Bitcoin => node(cfg.bitcoin.configured(), Offline::BITCOIN),
        AddressFamily::Tron => node(cfg.tron.configured(), Offline::TRON),
        AddressFamily::Solana => node(cfg.solana.configured(), Offline::SOLANA),
        AddressFamily::Xrp => node(cfg.xrp.configured(), Offline::XRP),
    }
}

/// Logs, once at start-up, which live gates take deposits and payouts and why the others do not.
pub fn log_live_gates(cfg: &Config, addresses: &AddressBook) {
    let mut online = Vec::new();
    for gate in GATES.iter() {
        match deposits(cfg, addresses, Environment::Live, gate) {
            Ok(()) => {
                let payouts = match payouts(cfg, Environment::Live, gate) {
                    Ok(()) => "enabled".to_owned(),
                    Err(why) => format!("disabled: {why}"),
                };
                tracing::info!(gate = gate.id, %payouts, "live gate online");
                online.push(gate.id);
            }
            Err(why) => tracing::info!(gate = gate.id, reason = %why, "live gate offline"),
        }
    }
    tracing::info!(online = ?online, "live gates online: {}", online.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::address::AccountKeysConfig;
    use crate::config::{EvmNetworkConfig, Redacted};

    /// Public BIP32 test-vector keys ("abandon … about"), as `api/tests/common` uses.
    fn with_all_keys() -> (Config, AddressBook) {
        let keys = AccountKeysConfig {
            bitcoin_xpub: Some("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs".into()),
            evm_xpub: Some("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt".into()),
            tron_xpub: Some("xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd".into()),
            xrp_address: Some("rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh".into()),
            solana_pool: vec!["So11111111111111111111111111111111111111112".into()],
        };
        let cfg = Config { addresses: crate::config::AddressesConfig { live: keys, test: None }, ..Config::default() };
        let book = AddressBook::new(&cfg).expect("keys");
        (cfg, book)
    }

    fn gate(id: &str) -> &'static Gate {
        crate::gates::find(id).unwrap()
    }

    #[test]
    fn live_gates_with_keys_but_no_node_are_offline() {
        let (cfg, book) = with_all_keys();
        for g in GATES.iter() {
            assert_eq!(status(&cfg, &book, Environment::Live, g), GateStatus::Offline, "{}", g.id);
            assert_eq!(status(&cfg, &book, Environment::Test, g), GateStatus::Online, "{}", g.id);
        }
        assert_eq!(deposits(&cfg, &book, Environment::Live, gate("xrp")), Err(Offline::XRP));
        assert_eq!(deposits(&cfg, &book, Environment::Live, gate("bitcoin")), Err(Offline::BITCOIN));
        for id in ["solana", "solana_usdc"] {
            assert_eq!(deposits(&cfg, &book, Environment::Live, gate(id)), Err(Offline::SOLANA), "{id}");
        }
        for id in ["tron", "tron_usdt"] {
            assert_eq!(deposits(&cfg, &book, Environment::Live, gate(id)), Err(Offline::TRON), "{id}");
        }
        assert_eq!(
            deposits(&cfg, &book, Environment::Live, gate("ethereum")),
            Err(Offline::NetworkNotConfigured("ethereum"))
        );
    }

    #[test]
    fn an_evm_network_with_a_node_is_online_and_pays_out_only_with_a_key() {
        let (mut cfg, _) = with_all_keys();
        cfg.evm
            .networks
            .insert("ethereum".into(), EvmNetworkConfig { rpc_url: "http://node".into(), ..Default::default() });
        let book = AddressBook::new(&cfg).unwrap();
        for id in ["ethereum", "ethereum_usdt", "ethereum_usdc"] {
            assert_eq!(status(&cfg, &book, Environment::Live, gate(id)), GateStatus::Online, "{id}");
            assert_eq!(payouts(&cfg, Environment::Live, gate(id)), Err(Offline::NoSigner("ethereum")), "{id}");
        }
        assert_eq!(status(&cfg, &book, Environment::Live, gate("bsc")), GateStatus::Offline);
        cfg.evm.networks.get_mut("ethereum").unwrap().hot_wallet_key = Some(Redacted("11".repeat(32)));
        assert_eq!(payouts(&cfg, Environment::Live, gate("ethereum_usdt")), Ok(()));
        assert_eq!(payouts(&cfg, Environment::Live, gate("bsc")), Err(Offline::NetworkNotConfigured("bsc")));
        // A payout signer alone never makes a chain without an adapter payable.
        assert_eq!(payouts(&cfg, Environment::Live, gate("bitcoin")), Err(Offline::BITCOIN));
        assert_eq!(payouts(&cfg, Environment::Live, gate("xrp")), Err(Offline::XRP));
    }

    #[test]
    fn bitcoin_tron_solana_and_xrp_with_a_node_take_deposits_and_pay_out_only_with_a_signer() {
        let (mut cfg, _) = with_all_keys();
        cfg.bitcoin.rpc_url = "http://bitcoind:8332".into();
        cfg.xrp.rpc_url = "http://rippled:5005".into();
        cfg.tron.api_url = "http://fullnode:8090".into();
        cfg.solana.rpc_url = "http://validator:8899".into();
        let book = AddressBook::new(&cfg).unwrap();
        for id in ["bitcoin", "tron", "tron_usdt", "solana", "solana_usdc", "xrp"] {
            assert_eq!(status(&cfg, &book, Environment::Live, gate(id)), GateStatus::Online, "{id}");
        }
        for id in ["solana", "solana_usdc"] {
            assert_eq!(payouts(&cfg, Environment::Live, gate(id)), Err(Offline::NoHotWallet("solana")), "{id}");
        }
        cfg.solana.hot_wallet_key_file = Some("/run/secrets/solana.json".into());
        for id in ["solana", "solana_usdc"] {
            assert_eq!(payouts(&cfg, Environment::Live, gate(id)), Ok(()), "{id}");
        }
        for id in ["tron", "tron_usdt"] {
            assert_eq!(payouts(&cfg, Environment::Live, gate(id)), Err(Offline::NoHotWallet("tron")), "{id}");
        }
        cfg.tron.hot_wallet_key_file = Some("/run/secrets/tron-key".into());
        assert_eq!(payouts(&cfg, Environment::Live, gate("tron_usdt")), Ok(()));
        // Bitcoin and XRP pay out once their hot wallet key is configured.
        assert_eq!(payouts(&cfg, Environment::Live, gate("bitcoin")), Err(Offline::NoHotWallet("bitcoin")));
        cfg.bitcoin.hot_wallet_key_file = Some("/run/secrets/btc.xprv".into());
        assert_eq!(payouts(&cfg, Environment::Live, gate("bitcoin")), Ok(()));
        assert_eq!(payouts(&cfg, Environment::Live, gate("xrp")), Err(Offline::NoHotWallet("xrp")));
        cfg.xrp.hot_wallet_key_file = Some("/run/secrets/xrp-seed".into());
        assert_eq!(payouts(&cfg, Environment::Live, gate("xrp")), Ok(()));
        cfg.bitcoin.rpc_url.clear();
        assert_eq!(payouts(&cfg, Environment::Live, gate("bitcoin")), Err(Offline::BITCOIN), "a key without a node");
        // Without TRON deposit keys the node alone is not enough.
        cfg.addresses.live.tron_xpub = None;
        let book = AddressBook::new(&cfg).unwrap();
        assert_eq!(
            deposits(&cfg, &book, Environment::Live, gate("tron")),
            Err(Offline::NoDepositKeys(AddressFamily::Tron))
        );
    }

    #[test]
    fn an_evm_node_without_deposit_keys_is_offline_and_configuration_wins() {
        let mut cfg = Config::default();
        cfg.evm
            .networks
            .insert("base".into(), EvmNetworkConfig { rpc_url: "http://node".into(), ..Default::default() });
        let book = AddressBook::new(&cfg).unwrap();
        assert_eq!(
            deposits(&cfg, &book, Environment::Live, gate("base")),
            Err(Offline::NoDepositKeys(AddressFamily::Evm))
        );
        cfg.gates.test.insert(
            "bitcoin".into(),
            crate::config::GateOverride { status: Some(GateStatus::Offline), ..Default::default() },
        );
        assert_eq!(deposits(&cfg, &book, Environment::Test, gate("bitcoin")), Err(Offline::ConfiguredOffline));
        assert_eq!(payouts(&cfg, Environment::Test, gate("bitcoin")), Err(Offline::ConfiguredOffline));
        assert_eq!(payouts(&cfg, Environment::Test, gate("solana_usdc")), Ok(()));
    }

    /// A `MakeWriter` into a shared buffer, to read what start-up logged.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn start_up_logs_every_live_gate_with_its_reason() {
        let (mut cfg, _) = with_all_keys();
        cfg.evm
            .networks
            .insert("polygon".into(), EvmNetworkConfig { rpc_url: "http://node".into(), ..Default::default() });
        let book = AddressBook::new(&cfg).unwrap();
        let out = Captured::default();
        let writer = out.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
        tracing::subscriber::with_default(subscriber, || log_live_gates(&cfg, &book));
        let log = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let line = |gate: &str| {
            log.lines()
                .find(|l| l.contains(&format!("gate=\"{gate}\"")))
                .unwrap_or_else(|| panic!("{gate} not logged:\n{log}"))
        };
        for g in GATES.iter() {
            let l = line(g.id);
            if g.network == "polygon" {
                assert!(l.contains("live gate online") && l.contains("no payout signer"), "{l}");
            } else {
                assert!(l.contains("live gate offline"), "{l}");
            }
        }
        assert!(line("bitcoin").contains("set [bitcoin] rpc_url"), "{log}");
        assert!(line("xrp").contains("set [xrp] rpc_url"), "{log}");
        assert!(line("ethereum").contains("evm.networks.ethereum"), "{log}");
        assert!(log.contains("live gates online: 3"), "{log}");
    }
}
