//! Live Solana payouts against the fake node (`solana_payouts`, `solana_payout_crash`): a live
//! app whose `[solana]` section names the node and a hot wallet keypair, and the merchant's
//! payouts (`support::payouts`). SOL payouts are estimated at 0.00001 SOL, twice what a
//! transaction costs, so the fee the chain took is what the merchant pays.

use serde_json::json;
use uuid::Uuid;
use workers::chain::signer::Signers;
use workers::chain::solana::tx as sol_tx;

use super::live::Live;
use super::payouts::Payouts;
use super::solana_node::FakeSolana;

pub const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";

/// The hot wallet's keypair (the vectors' seed, `[7; 32]`): base58 of its 64 bytes, as
/// wallets export it.
pub fn keypair() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let mut pair = key.to_bytes().to_vec();
    pair.extend_from_slice(key.verifying_key().as_bytes());
    bs58::encode(pair).into_string()
}

/// A recipient of nobody's: the address `[byte; 32]`.
pub fn destination(byte: u8) -> String {
    bs58::encode([byte; 32]).into_string()
}

pub struct SolanaPayouts {
    pub p: Payouts<FakeSolana>,
}

impl std::ops::Deref for SolanaPayouts {
    type Target = Payouts<FakeSolana>;
    fn deref(&self) -> &Payouts<FakeSolana> {
        &self.p
    }
}

fn signers(cfg: &domain::config::Config) -> Signers {
    Signers::default().with_solana(&cfg.solana).unwrap()
}

impl SolanaPayouts {
    /// The merchant with `funds` (gate, amount) in the live ledger.
    pub async fn start(funds: &[(&str, &str)]) -> SolanaPayouts {
        let live = Live::start(FakeSolana::start(10).await, &["solana", "solana_usdc"], |c, url| {
            (c.solana.rpc_url, c.solana.max_retries, c.solana.retry_backoff_ms) = (url, 1, 10);
            c.solana.hot_wallet_key = Some(domain::config::Redacted(keypair()));
            c.fees.get_mut("solana").unwrap().network_fee = rust_decimal::Decimal::new(1, 5);
        })
        .await;
        SolanaPayouts { p: Payouts::start(live, funds, signers).await }
    }

    /// A payout of `amount` `currency` (SOL, USDC) to `to`, created through the API.
    pub async fn payout(&self, currency: &str, to: &str, amount: &str) -> Uuid {
        self.p.payout(json!({"currency": currency, "network": "solana", "amount": amount, "destination": to})).await
    }

    /// The payout's stored transaction, decoded.
    pub async fn signed(&self, id: Uuid) -> sol_tx::Decoded {
        let raw = self.row(id).await.signed_tx.expect("a signed transaction");
        let stored = workers::chain::solana::wallet::Stored::parse(&raw).unwrap();
        sol_tx::decode(&stored.bytes().unwrap()).unwrap()
    }

    /// Adds a slot and finalizes everything so far.
    pub fn finalize_next(&self) {
        self.live.node.produce(1);
        self.live.node.finalize();
    }
}
