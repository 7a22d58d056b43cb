//! The Solana sweeping rig (`solana_sweeps`, `solana_sweep_crash`) on LiteSVM: a live app whose
//! pool is three addresses of the test's own keys (`[solana] deposit_keys_file`, one keypair per
//! line), `solana` and `solana_usdc` swept to the hot wallet (`keypair()`, which holds 10 SOL and
//! an empty USDC token account), a SOL invoice and a USDC invoice paid by a payer, finalized and
//! credited, and the house funded with the hot wallet's SOL.

use std::time::{Duration, Instant};

use entity::{Environment, SweepStatus, sweep};
use sea_orm::{EntityTrait, QueryOrder};
use serde_json::{Value, json};
use testkit::d;
use workers::chain::signer::Signers;
use workers::sweeper::Sweeper;

use super::litesvm::LiteSvm;
use super::live::Live;
use super::solana_payouts::keypair;

/// The pool address of seed `[seed; 32]` and its keypair as the Solana CLI writes it.
fn pool_key(seed: u8) -> (String, String) {
    let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]);
    let mut pair = key.to_bytes().to_vec();
    pair.extend_from_slice(key.verifying_key().as_bytes());
    (bs58::encode(key.verifying_key().as_bytes()).into_string(), serde_json::to_string(&pair).unwrap())
}

pub fn hot_wallet() -> String {
    bs58::encode(ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key().as_bytes()).into_string()
}

/// Rent-exempt minimum of a token account (165 bytes).
pub const TOKEN_ACCOUNT_RENT: u64 = 2_039_280;
/// What the hot wallet holds before anything is swept.
pub const HOT_LAMPORTS: u64 = 10_000_000_000;

pub struct SolRig {
    pub l: Live<LiteSvm>,
    pub sol_address: String,
    pub usdc_address: String,
    pub signers: Signers,
    _dir: tempfile::TempDir,
}

impl SolRig {
    /// Both invoices (1.5 SOL, 12.5 USDC) paid, finalized and credited.
    pub async fn start() -> SolRig {
        let node = LiteSvm::start().await;
        let mint = node.call("shim_createMint", json!([6])).await.as_str().unwrap().to_owned();
        node.call("shim_fund", json!([hot_wallet(), HOT_LAMPORTS])).await;
        node.call("shim_mintTo", json!([hot_wallet(), 0u64])).await;
        let dir = tempfile::tempdir().unwrap();
        let pool: Vec<(String, String)> = [0x31, 0x32, 0x33].into_iter().map(pool_key).collect();
        let keys_file = dir.path().join("pool.keys");
        let lines: Vec<&str> = pool.iter().map(|(_, k)| k.as_str()).collect();
        std::fs::write(&keys_file, format!("# the pool's keypairs\n{}\n", lines.join("\n"))).unwrap();
        let addresses: Vec<String> = pool.iter().map(|(a, _)| a.clone()).collect();
        let l = Live::start(node, &["solana", "solana_usdc"], move |c, url| {
            (c.solana.rpc_url, c.solana.max_retries, c.solana.retry_backoff_ms) = (url, 1, 10);
            c.solana.usdc_mint = Some(mint);
            c.solana.hot_wallet_key = Some(domain::config::Redacted(keypair()));
            c.solana.deposit_keys_file = Some(keys_file);
            c.addresses.live.solana_pool = addresses;
            for (gate, min) in [("solana", "0.01"), ("solana_usdc", "1")] {
                let g = domain::config::TreasuryGateConfig {
                    hot_address: Some(hot_wallet()),
                    sweep: true,
                    min_sweep: d(min),
                    ..Default::default()
                };
                c.treasury.gates.insert(gate.into(), g);
            }
        })
        .await;
        let sol = l.invoice(json!({"currency": "SOL", "amount": "1.5"})).await;
        let usdc = l.invoice(json!({"currency": "USDC", "network": "solana", "amount": "12.5"})).await;
        let address = |inv: &Value| inv["deposit_address"].as_str().unwrap().to_owned();
        let (sol_address, usdc_address) = (address(&sol), address(&usdc));
        l.node.call("shim_paySol", json!([sol_address, 1_500_000_000u64])).await;
        l.node.call("shim_payToken", json!([usdc_address, 12_500_000u64])).await;
        l.step_over(1).await;
        l.node.finalize().await;
        l.step().await;
        assert_eq!((l.status(&sol).await, l.status(&usdc).await), ("paid".into(), "paid".into()));

        let db = &l.app.state.db;
        let txn = domain::db::begin_write(db).await.unwrap();
        let native = domain::gates::find("solana").unwrap();
        let float = rust_decimal::Decimal::new(HOT_LAMPORTS as i64, 9).normalize();
        domain::treasury::fund(&txn, Environment::Live, native, float, "hot wallet float").await.unwrap();
        txn.commit().await.unwrap();
        let signers = Signers::default().with_solana(&l.app.state.config.solana).unwrap();
        SolRig { l, sol_address, usdc_address, signers, _dir: dir }
    }

    /// The sweeper as the payout executor's process builds it.
    pub fn sweeper(&self) -> Sweeper {
        let config = &self.l.app.state.config;
        Sweeper::from_config(&self.l.app.state.db, &self.l.new_chains(), &self.signers, config)
            .unwrap()
            .expect("gates are swept")
    }

    pub async fn rows(&self) -> Vec<sweep::Model> {
        sweep::Entity::find().order_by_asc(sweep::Column::GateId).all(&self.l.app.state.db).await.unwrap()
    }

    /// Rounds of `sweeper`, the cluster finalizing after each, until the sweeps not failed are
    /// `n`, all confirmed; those.
    pub async fn swept(&self, sweeper: &Sweeper, n: usize) -> Vec<sweep::Model> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            sweeper.tick().await.unwrap();
            let rows: Vec<sweep::Model> =
                self.rows().await.into_iter().filter(|s| s.status != SweepStatus::Failed).collect();
            if rows.len() == n && rows.iter().all(|s| s.status == SweepStatus::Confirmed) {
                return rows;
            }
            assert!(
                Instant::now() < deadline,
                "sweeps stuck: {:?}",
                rows.iter().map(|s| (s.status, s.failure_reason.clone())).collect::<Vec<_>>()
            );
            self.l.node.produce(1).await;
            self.l.node.finalize().await;
        }
    }
}
