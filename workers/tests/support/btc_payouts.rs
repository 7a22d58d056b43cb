//! Live Bitcoin payouts against Litecoin Core regtest (`bitcoin_regtest`, `bitcoin_payout_crash`):
//! a live app whose `[bitcoin]` section names the node and a hot wallet key of its own (not the
//! deposit account's), a merchant paying payouts' network fees and auto-approving them, and
//! payout executors built as the `payout-executor` worker builds them.

use std::time::{Duration, Instant};

use bitcoin::hashes::Hash;
use bitcoin::{Address, Network, ScriptBuf, Transaction, WPubkeyHash};
use entity::{PayoutStatus, payout};
use rust_decimal::Decimal;
use serde_json::json;
use uuid::Uuid;
use workers::chain::bitcoin::wallet::BitcoinSigner;
use workers::chain::signer::Signers;
use workers::executor::Executor;

use super::litecoind::Litecoind;
use super::live::Live;
use super::payouts::Payouts;

/// A mainnet extended key of the test's own: the hot wallet.
pub fn hot_wallet_key() -> String {
    bitcoin::bip32::Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x42; 32]).unwrap().to_string()
}

/// A P2WPKH destination of nobody's (`bc1q…` of the 20-byte hash `[byte; 20]`).
pub fn destination(byte: u8) -> Address {
    let script = ScriptBuf::new_p2wpkh(&WPubkeyHash::from_byte_array([byte; 20]));
    Address::from_script(&script, Network::Bitcoin).unwrap()
}

pub struct BtcPayouts {
    pub p: Payouts<Litecoind>,
    /// The hot wallet's address (`bc1q…`; its script is what the regtest node pays).
    pub hot_wallet: Address,
}

impl std::ops::Deref for BtcPayouts {
    type Target = Payouts<Litecoind>;
    fn deref(&self) -> &Payouts<Litecoind> {
        &self.p
    }
}

fn signers(cfg: &domain::config::Config) -> Signers {
    Signers::default().with_bitcoin(&cfg.bitcoin, &cfg.addresses.live).unwrap()
}

impl BtcPayouts {
    /// The hot wallet funded with one confirmed output of each of `float` (decimal strings),
    /// the merchant with `funds` BTC in the live ledger.
    pub async fn start(float: &[&str], funds: &str) -> BtcPayouts {
        let node = Litecoind::start().await;
        let (user, password) = (node.user, node.password);
        let live = Live::start(node, &["bitcoin"], |c, url| {
            c.bitcoin.rpc_user = Some(user.into());
            c.bitcoin.rpc_password = Some(domain::config::Redacted(password.into()));
            (c.bitcoin.rpc_url, c.bitcoin.max_retries, c.bitcoin.retry_backoff_ms) = (url, 1, 10);
            c.bitcoin.hot_wallet_key = Some(domain::config::Redacted(hot_wallet_key()));
        })
        .await;
        let hot_wallet = BitcoinSigner::load(&live.app.state.config.bitcoin).unwrap().unwrap().address();
        for amount in float {
            live.node.pay(&hot_wallet.to_string(), amount).await;
        }
        live.node.mine(1).await;
        BtcPayouts { p: Payouts::start(live, &[("bitcoin", funds)], signers).await, hot_wallet }
    }

    /// A BTC payout of `amount` to `to`, created through the API.
    pub async fn payout(&self, to: &Address, amount: &str) -> Uuid {
        self.p.payout(json!({"currency": "BTC", "amount": amount, "destination": to.to_string()})).await
    }

    /// Runs `executors` over `ids` (all of them at once, each in its own order), a block mined
    /// between rounds, until every payout is completed, within 120 s.
    pub async fn complete(&self, executors: &[Executor], ids: &[Uuid]) -> Vec<payout::Model> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let rounds = executors.iter().enumerate().map(|(n, e)| async move {
                let mut order = ids.to_vec();
                if n % 2 == 1 {
                    order.reverse();
                }
                for id in order {
                    e.execute(id).await.unwrap_or_else(|err| {
                        // A shortfall (change not confirmed yet) or a lost race: looked at again next round.
                        eprintln!("payout {id}: {err}");
                        workers::executor::Next::Done
                    });
                }
            });
            futures::future::join_all(rounds).await;
            let mut rows = Vec::new();
            for id in ids {
                rows.push(self.row(*id).await);
            }
            if rows.iter().all(|p| p.status == PayoutStatus::Completed) {
                return rows;
            }
            assert!(
                Instant::now() < deadline,
                "payouts stuck: {:?}",
                rows.iter().map(|p| p.status).collect::<Vec<_>>()
            );
            self.live.node.mine(1).await;
        }
    }

    /// The transaction `txid` as the node holds it.
    pub async fn tx(&self, txid: &str) -> Transaction {
        self.live.node.tx(txid).await
    }

    /// What `tx` paid in fees: its inputs (read from the node) less its outputs, in BTC, and
    /// whether every input was the hot wallet's.
    pub async fn fee_of(&self, tx: &Transaction) -> (Decimal, bool) {
        let mut inputs = 0u64;
        let mut ours = true;
        for i in &tx.input {
            let prev = self.tx(&i.previous_output.txid.to_string()).await;
            let out = &prev.output[i.previous_output.vout as usize];
            inputs += out.value.to_sat();
            ours &= out.script_pubkey == self.hot_wallet.script_pubkey();
        }
        let outputs: u64 = tx.output.iter().map(|o| o.value.to_sat()).sum();
        (Decimal::new((inputs - outputs) as i64, 8).normalize(), ours)
    }

    /// The unspent outputs paying `to` on the node's chain, in satoshis.
    pub async fn unspent_to(&self, to: &Address) -> Vec<u64> {
        self.live.node.unspent_to(to).await
    }
}
