//! Sweeping suites' rigs (`evm_sweeps`, `bitcoin_sweeps`, and the `crash` binary's sweep suites).
//! On anvil: a live app whose deposit account is the test's own (its xprv in a file, its xpub
//! configured), the ethereum and ethereum_usdt gates swept to anvil's second dev account, a USDT
//! and an ETH invoice paid by a payer and confirmed, and the house funded with the hot wallet's
//! ETH. On Litecoin Core regtest: the same deposit account set-up, bitcoin swept to the payout
//! hot wallet's address (its key configured, as the payout executor loads it), and invoices paid
//! by the node's wallet.

use std::str::FromStr;

use bitcoin::bip32::{DerivationPath, Xpriv, Xpub};
use entity::Environment;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use testkit::anvil::Anvil;
use testkit::d;
use workers::chain::signer::Signers;
use workers::sweeper::Sweeper;

use super::evm_node::{HOT_WALLET, node};
use super::live::LiveApp;

pub fn eth(wei: u128) -> Decimal {
    Decimal::from_i128_with_scale(wei as i128, 18).normalize()
}

/// A deposit account of its own (xprv in a file, its xpub configured), as an operator sets up.
fn deposit_account(dir: &std::path::Path) -> (String, std::path::PathBuf) {
    let secp = bitcoin::secp256k1::Secp256k1::new();
    let master = Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x5e; 32]).unwrap();
    let account = master.derive_priv(&secp, &DerivationPath::from_str("m/44'/60'/0'").unwrap()).unwrap();
    let xpub = Xpub::from_priv(&secp, &account).to_string();
    let file = dir.join("deposit.xprv");
    std::fs::write(&file, account.to_string()).unwrap();
    (xpub, file)
}

pub struct Rig {
    pub anvil: Anvil,
    pub l: LiveApp,
    pub token: String,
    pub usdt: Value,
    pub ether: Value,
    pub usdt_address: String,
    pub eth_address: String,
    pub signers: Signers,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// Both invoices paid and credited, the house funded with the hot wallet's ETH.
    pub async fn start() -> Rig {
        let anvil = Anvil::start().await;
        let token = anvil.deploy_token(1_000_000_000_000).await;
        anvil.mine(2).await;
        let dir = tempfile::tempdir().unwrap();
        let (xpub, key_file) = deposit_account(dir.path());
        let (net, token_for_cfg) = (node(&anvil, 2, 50, true), token.clone());
        let l = LiveApp::start(&["ethereum", "ethereum_usdt"], move |c| {
            c.addresses.live.evm_xpub = Some(xpub);
            c.evm.networks.insert("ethereum".into(), net);
            let t = domain::config::EvmTokenConfig { contract: token_for_cfg, decimals: Some(6) };
            c.evm.tokens.insert("ethereum_usdt".into(), t);
            c.evm.deposit_key_file = Some(key_file);
            for (gate, min) in [("ethereum", "0.01"), ("ethereum_usdt", "1")] {
                let g = domain::config::TreasuryGateConfig {
                    hot_address: Some(HOT_WALLET.into()),
                    sweep: true,
                    min_sweep: d(min),
                    ..Default::default()
                };
                c.treasury.gates.insert(gate.into(), g);
            }
        })
        .await;

        let usdt = l.invoice(json!({"currency": "USDT", "network": "ethereum", "amount": "50"})).await;
        let ether = l.invoice(json!({"currency": "ETH", "network": "ethereum", "amount": "1"})).await;
        let usdt_address = usdt["deposit_address"].as_str().unwrap().to_owned();
        let eth_address = ether["deposit_address"].as_str().unwrap().to_owned();
        anvil.send_token(&token, &usdt_address, 50_000_000).await;
        anvil.send_eth(&eth_address, 1_000_000_000_000_000_000).await;
        anvil.mine(1).await;
        l.step().await;
        anvil.mine(12).await;
        l.step().await;
        assert_eq!((l.status(&usdt).await, l.status(&ether).await), ("paid".into(), "paid".into()));

        let hot_before = anvil.balance_of(HOT_WALLET).await;
        let db = &l.app.state.db;
        let txn = domain::db::begin_write(db).await.unwrap();
        let native = domain::gates::find("ethereum").unwrap();
        domain::treasury::fund(&txn, Environment::Live, native, eth(hot_before), "hot wallet float").await.unwrap();
        txn.commit().await.unwrap();
        let signers = Signers::default().with_evm(&l.app.state.config.evm).unwrap();
        Rig { anvil, l, token, usdt, ether, usdt_address, eth_address, signers, _dir: dir }
    }

    /// The sweeper as the payout executor's process builds it (hot wallet and deposit keys).
    pub fn sweeper(&self) -> Sweeper {
        let config = &self.l.app.state.config;
        Sweeper::from_config(&self.l.app.state.db, &self.l.new_chains(), &self.signers, config)
            .unwrap()
            .expect("gates are swept")
    }
}

/// A live app on Litecoin Core regtest whose bitcoin deposit account is the test's own, swept to
/// [`BtcRig::hot`], the payout hot wallet's address, once `min_sweep` (0.1 BTC) is there.
pub struct BtcRig {
    pub l: super::live::Live<super::litecoind::Litecoind>,
    pub hot: bitcoin::Address,
    _dir: tempfile::TempDir,
}

impl BtcRig {
    pub async fn start() -> BtcRig {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let master = Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x6b; 32]).unwrap();
        let account = master.derive_priv(&secp, &DerivationPath::from_str("m/84'/0'/0'").unwrap()).unwrap();
        let xpub = Xpub::from_priv(&secp, &account).to_string();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("deposit.xprv");
        std::fs::write(&key_file, account.to_string()).unwrap();
        let hot_key = domain::config::Redacted(super::btc_payouts::hot_wallet_key());
        let key_only = domain::config::BitcoinConfig { hot_wallet_key: Some(hot_key.clone()), ..Default::default() };
        let hot = workers::chain::bitcoin::wallet::BitcoinSigner::load(&key_only).unwrap().unwrap().address();
        let node = super::litecoind::Litecoind::start().await;
        let (user, password) = (node.user, node.password);
        let hot_for_cfg = hot.to_string();
        let l = super::live::Live::start(node, &["bitcoin"], move |c, url| {
            c.addresses.live.bitcoin_xpub = Some(xpub);
            c.bitcoin.rpc_user = Some(user.into());
            c.bitcoin.rpc_password = Some(domain::config::Redacted(password.into()));
            (c.bitcoin.rpc_url, c.bitcoin.max_retries, c.bitcoin.retry_backoff_ms) = (url, 1, 10);
            c.bitcoin.deposit_key_file = Some(key_file);
            c.bitcoin.hot_wallet_key = Some(hot_key);
            let g = domain::config::TreasuryGateConfig {
                hot_address: Some(hot_for_cfg),
                sweep: true,
                min_sweep: d("0.1"),
                ..Default::default()
            };
            c.treasury.gates.insert("bitcoin".into(), g);
        })
        .await;
        BtcRig { l, hot, _dir: dir }
    }

    /// Invoices of `amounts` paid by the node's wallet, mined to the gate's 3 confirmations and
    /// credited; their deposit addresses.
    pub async fn paid(&self, amounts: &[&str]) -> Vec<String> {
        let mut addresses = Vec::new();
        for amount in amounts {
            let inv = self.l.invoice(json!({"currency": "BTC", "amount": amount})).await;
            let address = inv["deposit_address"].as_str().unwrap().to_owned();
            self.l.node.pay(&address, amount).await;
            addresses.push(address);
        }
        self.l.node.mine(1).await;
        self.l.step().await;
        self.l.step_over(2).await;
        addresses
    }

    /// The payout hot wallet's signer, as the payout executor loads it.
    pub fn signers(&self) -> Signers {
        let cfg = &self.l.app.state.config;
        Signers::default().with_bitcoin(&cfg.bitcoin, &cfg.addresses.live).unwrap()
    }

    pub fn sweeper(&self) -> Sweeper {
        let config = &self.l.app.state.config;
        Sweeper::from_config(&self.l.app.state.db, &self.l.new_chains(), &self.signers(), config)
            .unwrap()
            .expect("bitcoin is swept")
    }
}
