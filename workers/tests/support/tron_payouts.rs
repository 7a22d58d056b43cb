//! Live TRON payouts against the fake full node (`tron_payouts`, `tron_payout_crash`): a live
//! app whose `[tron]` section names the node and a hot wallet key (transactions expiring 3 s
//! after their reference block), and the merchant's payouts (`support::payouts`).

use domain::chain::address::tron::{account_id_of, address_of};
use serde_json::json;
use uuid::Uuid;
use workers::chain::signer::Signers;
use workers::chain::tron::tx::{self as tron_tx, Raw};

use super::live::Live;
use super::payouts::Payouts;
use super::tron_node::FakeTron;

/// The hot wallet's key (TronWeb's vectors use it too).
pub const KEY: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
pub const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

/// The hot wallet's address (`T…`, of [`KEY`]).
pub fn hot_wallet() -> String {
    let key: alloy_signer_local::PrivateKeySigner = KEY.parse().unwrap();
    address_of(&key.address().into_array())
}

/// A recipient of nobody's: the account id `[byte; 20]`.
pub fn destination(byte: u8) -> String {
    address_of(&[byte; 20])
}

pub struct TronPayouts {
    pub p: Payouts<FakeTron>,
}

impl std::ops::Deref for TronPayouts {
    type Target = Payouts<FakeTron>;
    fn deref(&self) -> &Payouts<FakeTron> {
        &self.p
    }
}

fn signers(cfg: &domain::config::Config) -> Signers {
    Signers::default().with_tron(&cfg.tron).unwrap()
}

impl TronPayouts {
    /// The merchant with `funds` (gate, amount) in the live ledger.
    pub async fn start(funds: &[(&str, &str)]) -> TronPayouts {
        let live = Live::start(FakeTron::start(10).await, &["tron", "tron_usdt"], |c, url| {
            (c.tron.api_url, c.tron.max_retries, c.tron.retry_backoff_ms) = (url, 1, 10);
            c.tron.hot_wallet_key = Some(domain::config::Redacted(KEY.into()));
            c.tron.expiration_secs = 3;
        })
        .await;
        TronPayouts { p: Payouts::start(live, funds, signers).await }
    }

    /// A payout of `amount` `currency` (TRX, USDT) to `to`, created through the API.
    pub async fn payout(&self, currency: &str, to: &str, amount: &str) -> Uuid {
        self.p.payout(json!({"currency": currency, "network": "tron", "amount": amount, "destination": to})).await
    }

    /// The payout's stored transaction, decoded.
    pub async fn signed(&self, id: Uuid) -> Raw {
        tron_tx::decode(self.row(id).await.signed_tx.as_deref().expect("a signed transaction")).unwrap().0
    }

    /// Every transaction the node was given, decoded.
    pub fn broadcasts(&self) -> Vec<Raw> {
        self.live.node.with(|l| l.broadcasts.iter().map(|b| tron_tx::decode(b).unwrap().0).collect())
    }

    /// What the chain's blocks paid `to`: (transaction id, sun or token units).
    pub fn paid_to(&self, to: &str) -> Vec<(String, u64)> {
        self.live.node.paid_to(&account_id_of(to).unwrap())
    }
}
