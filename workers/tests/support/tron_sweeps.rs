//! The TRON sweeping rig (`tron_sweeps`, `tron_sweep_crash`): a live app on the fake full node
//! keeping real balances (`keep_balances`), whose TRON deposit account is the test's own (its
//! xprv in a file, its xpub configured), `tron` and `tron_usdt` swept to the payout hot wallet
//! (`support::tron_payouts::KEY`), a 100 TRX and a 50 USDT invoice paid by a payer and
//! confirmed, the hot wallet holding 100 TRX of the house's.

use std::str::FromStr;

use bitcoin::bip32::{DerivationPath, Xpriv, Xpub};
use domain::chain::address::tron::account_id_of;
use entity::{Environment, sweep};
use rust_decimal::Decimal;
use sea_orm::{EntityTrait, QueryOrder};
use serde_json::{Value, json};
use testkit::d;
use workers::chain::signer::Signers;
use workers::sweeper::Sweeper;

use super::live::Live;
use super::tron_node::{FakeTron, Tx};
use super::tron_payouts::{KEY, USDT, hot_wallet};

/// What the hot wallet holds of the house's before anything is swept, in sun.
pub const HOT_FLOAT_SUN: u64 = 100_000_000;
/// Free bandwidth the USDT deposit address has (an activated account's daily 600 bytes): its
/// token transfer burns only energy, and the bandwidth in its top-up is left over.
pub const FREE_NET: u64 = 600;

pub fn sun(d: Decimal) -> u64 {
    u64::try_from(d * Decimal::from(1_000_000)).unwrap()
}

pub fn trx(sun: u64) -> Decimal {
    Decimal::new(sun as i64, 6).normalize()
}

pub fn usdt_id() -> [u8; 20] {
    account_id_of(USDT).unwrap()
}

pub fn id(address: &str) -> [u8; 20] {
    account_id_of(address).unwrap()
}

pub struct TronRig {
    pub l: Live<FakeTron>,
    pub trx: Value,
    pub usdt: Value,
    pub trx_address: String,
    pub usdt_address: String,
    pub signers: Signers,
    _dir: tempfile::TempDir,
}

impl TronRig {
    pub async fn start() -> TronRig {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let master = Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x7e; 32]).unwrap();
        let account = master.derive_priv(&secp, &DerivationPath::from_str("m/44'/195'/0'").unwrap()).unwrap();
        let xpub = Xpub::from_priv(&secp, &account).to_string();
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("deposit.xprv");
        std::fs::write(&key_file, account.to_string()).unwrap();
        let node = FakeTron::start(10).await;
        node.with(|l| l.keep_balances = true);
        let l = Live::start(node, &["tron", "tron_usdt"], move |c, url| {
            (c.tron.api_url, c.tron.max_retries, c.tron.retry_backoff_ms) = (url, 1, 10);
            c.tron.hot_wallet_key = Some(domain::config::Redacted(KEY.into()));
            c.tron.expiration_secs = 60;
            c.tron.deposit_key_file = Some(key_file);
            c.addresses.live.tron_xpub = Some(xpub);
            for gate in ["tron", "tron_usdt"] {
                let g = domain::config::TreasuryGateConfig {
                    hot_address: Some(hot_wallet()),
                    sweep: true,
                    min_sweep: d("1"),
                    ..Default::default()
                };
                c.treasury.gates.insert(gate.into(), g);
            }
        })
        .await;

        let trx_inv = l.invoice(json!({"currency": "TRX", "amount": "100"})).await;
        let usdt_inv = l.invoice(json!({"currency": "USDT", "network": "tron", "amount": "50"})).await;
        let trx_address = trx_inv["deposit_address"].as_str().unwrap().to_owned();
        let usdt_address = usdt_inv["deposit_address"].as_str().unwrap().to_owned();
        l.node.include(vec![
            Tx::Trx { id: "f0".repeat(32), to: id(&hot_wallet()), sun: HOT_FLOAT_SUN },
            Tx::Trx { id: "a1".repeat(32), to: id(&trx_address), sun: 100_000_000 },
            Tx::Token { id: "b1".repeat(32), contract: usdt_id(), to: id(&usdt_address), units: 50_000_000, ok: true },
        ]);
        l.node.with(|n| n.free_net.insert(id(&usdt_address), FREE_NET));
        l.step().await;
        l.step_over(19).await;
        assert_eq!((l.status(&trx_inv).await, l.status(&usdt_inv).await), ("paid".into(), "paid".into()));

        let db = &l.app.state.db;
        let txn = domain::db::begin_write(db).await.unwrap();
        let native = domain::gates::find("tron").unwrap();
        domain::treasury::fund(&txn, Environment::Live, native, trx(HOT_FLOAT_SUN), "hot wallet float").await.unwrap();
        txn.commit().await.unwrap();
        let signers = Signers::default().with_tron(&l.app.state.config.tron).unwrap();
        TronRig { l, trx: trx_inv, usdt: usdt_inv, trx_address, usdt_address, signers, _dir: dir }
    }

    /// The sweeper as the payout executor's process builds it (hot wallet and deposit keys).
    pub fn sweeper(&self) -> Sweeper {
        let config = &self.l.app.state.config;
        Sweeper::from_config(&self.l.app.state.db, &self.l.new_chains(), &self.signers, config)
            .unwrap()
            .expect("TRON gates are swept")
    }

    /// Every sweep, by gate then creation.
    pub async fn rows(&self) -> Vec<sweep::Model> {
        sweep::Entity::find()
            .order_by_asc(sweep::Column::GateId)
            .order_by_asc(sweep::Column::Id)
            .all(&self.l.app.state.db)
            .await
            .unwrap()
    }

    /// Ticks `sweeper`, a block mined after each round, until `done` holds of the sweeps.
    pub async fn tick_until(&self, sweeper: &Sweeper, what: &str, done: impl Fn(&[sweep::Model]) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            sweeper.tick().await.unwrap();
            let rows = self.rows().await;
            if done(&rows) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: sweeps stuck: {:?}",
                rows.iter().map(|s| (&s.gate_id, s.status, &s.failure_reason)).collect::<Vec<_>>()
            );
            self.l.node.mine(1);
        }
    }
}
