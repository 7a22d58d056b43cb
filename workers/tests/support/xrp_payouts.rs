//! Live XRP payouts against the fake rippled (`xrp_payouts`, `xrp_payout_crash`): a live app
//! whose `[xrp]` section names the node and a hot wallet seed (validity windows of 3 ledgers),
//! the hot wallet funded on the node, a merchant paying payouts' network fees and
//! auto-approving them, and payout executors built as the `payout-executor` worker builds them.

use std::time::Duration;

use entity::{Environment, payout};
use sea_orm::EntityTrait;
use serde_json::json;
use uuid::Uuid;
use workers::chain::Chains;
use workers::chain::signer::Signers;
use workers::chain::xrp::codec;
use workers::chain::xrp::wallet::XrpSigner;
use workers::executor::Executor;

use super::live::{Live, id};
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
    pub live: Live<FakeRippled>,
    /// The hot wallet's classic address.
    pub wallet: String,
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
        let db = &live.app.state.db;
        testkit::auto_approve_payouts_merchant_pays(db, live.merchant, Environment::Live).await;
        testkit::fund(db, live.merchant, Environment::Live, "xrp", funds).await;
        XrpPayouts { live, wallet }
    }

    /// A payout executor as the worker builds it from the configuration.
    pub fn executor(&self) -> Executor {
        let (db, cfg) = (&self.live.app.state.db, &self.live.app.state.config);
        Executor {
            db: db.clone(),
            chains: Chains::default().with_live(cfg),
            signers: Signers::default().with_xrp(&cfg.xrp).unwrap(),
            recheck: Duration::from_millis(10),
        }
    }

    /// An XRP payout of `amount` to `to` (with `tag`), created through the API.
    pub async fn payout(&self, to: &str, tag: Option<&str>, amount: &str) -> Uuid {
        let mut body = json!({"currency": "XRP", "amount": amount, "destination": to});
        if let Some(tag) = tag {
            body["destination_tag"] = json!(tag);
        }
        let r = self.live.app.post("/v1/payouts", Some(&self.live.key), &body).await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.body);
        id(r.data())
    }

    pub async fn row(&self, id: Uuid) -> payout::Model {
        payout::Entity::find_by_id(id).one(&self.live.app.state.db).await.unwrap().unwrap()
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
        let (b, _) = testkit::assert_ledger_sums(&self.live.app.state.db, self.live.merchant, "xrp").await;
        (b.available.0, b.reserved.0)
    }
}
