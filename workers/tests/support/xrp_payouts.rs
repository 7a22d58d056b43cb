//! Live XRP payouts against the fake rippled (`xrp_payouts`, `xrp_payout_crash`): a live app
//! whose `[xrp]` section names the node and a hot wallet seed (validity windows of 3 ledgers),
//! the hot wallet funded on the node, and the merchant's payouts (`support::payouts`).

use serde_json::json;
use uuid::Uuid;
use workers::chain::signer::Signers;
use workers::chain::xrp::codec;
use workers::chain::xrp::wallet::XrpSigner;

use super::live::Live;
use super::payouts::Payouts;
use super::xrp_node::FakeRippled;

/// A secp256k1 family seed (xrpl-py's vectors use it too).
pub const SECP256K1_SEED: &str = "sn3nxiW7v8KXzPzAqzyHXbSSKNuN9";
/// An ed25519 family seed.
pub const ED25519_SEED: &str = "sEdTM1uX8pu2do5XvTnutH6HsouMaM2";
/// Recipients of nobody's.
pub const DEST: &str = "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe";
pub const DEST2: &str = "rHb9CJAWyB4rj91VRWn96DkukG4bwdtyTh";
/// The hot wallet's first `Sequence` on the node.
pub const FIRST_SEQUENCE: u32 = 5;

pub struct XrpPayouts {
    pub p: Payouts<FakeRippled>,
    /// The hot wallet's classic address.
    pub wallet: String,
}

impl std::ops::Deref for XrpPayouts {
    type Target = Payouts<FakeRippled>;
    fn deref(&self) -> &Payouts<FakeRippled> {
        &self.p
    }
}

fn signers(cfg: &domain::config::Config) -> Signers {
    Signers::default().with_xrp(&cfg.xrp).unwrap()
}

impl XrpPayouts {
    /// The hot wallet of `seed` funded on the node, the merchant with `funds` XRP in the live ledger.
    pub async fn start(seed: &str, funds: &str) -> XrpPayouts {
        let seed = seed.to_owned();
        let live = Live::start(FakeRippled::start(5).await, &["xrp"], |c, url| {
            (c.xrp.rpc_url, c.xrp.max_retries, c.xrp.retry_backoff_ms) = (url, 1, 10);
            c.xrp.hot_wallet_key = Some(domain::config::Redacted(seed));
            c.xrp.last_ledger_offset = 3;
        })
        .await;
        let wallet = XrpSigner::load(&live.app.state.config.xrp).unwrap().unwrap().address().to_owned();
        live.node.fund(&wallet, FIRST_SEQUENCE);
        XrpPayouts { p: Payouts::start(live, &[("xrp", funds)], signers).await, wallet }
    }

    /// An XRP payout of `amount` to `to` (with `tag`), created through the API.
    pub async fn payout(&self, to: &str, tag: Option<&str>, amount: &str) -> Uuid {
        let mut body = json!({"currency": "XRP", "amount": amount, "destination": to});
        if let Some(tag) = tag {
            body["destination_tag"] = json!(tag);
        }
        self.p.payout(body).await
    }

    /// The payout's stored transaction, decoded.
    pub async fn signed(&self, id: Uuid) -> codec::Tx {
        codec::Tx::decode(self.row(id).await.signed_tx.as_deref().expect("a signed transaction")).unwrap()
    }

    /// Every blob the node was given, decoded.
    pub fn submitted(&self) -> Vec<codec::Tx> {
        self.live.node.with(|l| l.submitted.iter().map(|b| codec::Tx::decode(b).unwrap()).collect())
    }

    /// (available, reserved) of the merchant's live XRP, the ledger's sums checked.
    pub async fn balance(&self) -> (rust_decimal::Decimal, rust_decimal::Decimal) {
        self.p.balance("xrp").await
    }
}
