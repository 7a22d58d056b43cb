//! The XRP payout hot wallet (payout executor only): one account, from a family seed
//! (`[xrp] hot_wallet_key_file`), that pays every payout and refund with a `Payment`.
//!
//! - The `Sequence` is the account's nonce: the executor allocates it from its counter in the
//!   transaction that stores the signed payout ([`Signer::nonce_account`] reads the account's
//!   next `Sequence` in the current open ledger, pending transactions included), so no
//!   `Sequence` is used twice or skipped.
//! - Terms ([`Signer::fees`], a network read before the write transaction): the fee is the open
//!   ledger's (`fee`: at least the base fee), capped by `max_fee_drops` and the payout's
//!   configured network fee; `LastLedgerSequence` is the newest validated ledger plus
//!   `last_ledger_offset`. A payout whose transaction expired unseen is signed again with the
//!   same `Sequence` (the chain checks first that it is in no ledger and the `Sequence` unused).
//! - A payout refused for good (`tem…`) leaves its `Sequence` to a no-op `AccountSet`, so later
//!   payouts are not stuck behind a gap.

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use serde_json::json;

use super::codec::{Keypair, Kind, Tx};
use super::{account_sequence, fetch, validated_ledger};
use crate::chain::evm::Rpc;
use crate::chain::signer::{Fees, NonceAccount, PayoutTx, Signer, Signers, hot_wallet_secret};
use crate::chain::{ChainError, SignedTx};
use domain::chain::address::{AddressFamily, xrp};
use domain::config::XrpConfig;

fn unavailable(message: impl Into<String>) -> ChainError {
    ChainError::Unavailable(message.into())
}

pub struct XrpSigner {
    rpc: Rpc,
    keys: Keypair,
    address: String,
    max_fee_drops: u64,
    last_ledger_offset: u32,
}

impl XrpSigner {
    /// The signer of `[xrp]`'s hot wallet seed; `None` without a node or a seed.
    pub fn load(cfg: &XrpConfig) -> Result<Option<XrpSigner>, ChainError> {
        if !cfg.configured() {
            return Ok(None);
        }
        let file = cfg.hot_wallet_key_file.as_deref();
        let Some(seed) = hot_wallet_secret("xrp", cfg.hot_wallet_key.as_ref(), file)? else { return Ok(None) };
        let keys = Keypair::from_seed(&seed).map_err(|e| unavailable(format!("xrp.hot_wallet_key: {e}")))?;
        let address = xrp::address_of(&keys.account_id());
        let rpc = Rpc::with("XRP RPC", &cfg.rpc_url, cfg.request_timeout_ms, cfg.max_retries, cfg.retry_backoff_ms);
        Ok(Some(XrpSigner {
            rpc,
            keys,
            address,
            max_fee_drops: cfg.max_fee_drops,
            last_ledger_offset: cfg.last_ledger_offset,
        }))
    }

    /// The hot wallet's classic address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The open ledger's fee, capped by `max_fee_drops` and `cap_drops`, and the last ledger a
    /// transaction signed now may enter.
    async fn terms(&self, cap_drops: u64, at_least: u64) -> Result<Fees, ChainError> {
        let fee = fetch(&self.rpc, "fee", json!({})).await?;
        let read = |k: &str| fee["drops"][k].as_str().and_then(|s| s.parse::<u64>().ok());
        let base = read("base_fee").ok_or_else(|| unavailable(format!("unexpected fee answer: {fee}")))?;
        let open = read("open_ledger_fee").unwrap_or(base);
        // Above the cap the transaction waits (queued or refused, then expired and signed again
        // at the fee of that time): never a fee above what the payout reserved.
        let fee_drops = open.max(base).max(at_least).min(self.max_fee_drops).min(cap_drops);
        let validated = validated_ledger(&self.rpc).await?;
        let last_ledger = u32::try_from(validated + u64::from(self.last_ledger_offset))
            .map_err(|_| unavailable("ledger index beyond u32"))?;
        Ok(Fees::Xrp { fee_drops, last_ledger })
    }

    fn sign_tx(&self, kind: Kind, sequence: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        let Fees::Xrp { fee_drops, last_ledger } = fees else {
            return Err(unavailable("an XRP transaction needs XRP terms"));
        };
        let sequence = u32::try_from(sequence).map_err(|_| unavailable("Sequence beyond u32"))?;
        let tx = self.keys.sign(Tx {
            kind,
            account: self.keys.account_id(),
            sequence,
            fee_drops,
            last_ledger,
            signing_pub_key: Vec::new(),
            signature: None,
        });
        Ok(SignedTx { tx_hash: tx.hash(), raw: tx.blob() })
    }
}

/// An amount of XRP in drops (10^-6), exactly.
pub fn to_drops(amount: Decimal) -> Result<u64, ChainError> {
    let drops = amount.checked_mul(Decimal::new(1_000_000, 0)).filter(|d| d.fract().is_zero() && *d >= Decimal::ZERO);
    drops.and_then(|d| d.to_u64()).ok_or_else(|| unavailable(format!("{amount} XRP is not a whole number of drops")))
}

#[async_trait::async_trait]
impl Signer for XrpSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        let destination = xrp::account_id_of(tx.destination)
            .ok_or_else(|| unavailable(format!("{} is not a classic XRP address", tx.destination)))?;
        let tag = match tx.destination_tag {
            None => None,
            Some(t) => Some(t.parse::<u32>().map_err(|_| unavailable(format!("destination tag {t} is not a u32")))?),
        };
        let kind = Kind::Payment { destination, tag, drops: to_drops(tx.amount)? };
        let sequence = tx.nonce.ok_or_else(|| unavailable("an XRP payout needs its Sequence"))?;
        let fees = tx.fees.ok_or_else(|| unavailable("an XRP payout needs its fee"))?;
        self.sign_tx(kind, sequence, fees)
    }

    async fn fees(&self, tx: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        self.terms(to_drops(tx.max_fee)?, 0).await.map(Some)
    }

    fn signed_terms(&self, raw: &str) -> Option<(u64, Fees)> {
        let tx = Tx::decode(raw).ok()?;
        Some((u64::from(tx.sequence), Fees::Xrp { fee_drops: tx.fee_drops, last_ledger: tx.last_ledger }))
    }

    /// The no-op's fee: at least a quarter above the original's (rippled replaces a queued
    /// transaction of the same `Sequence` only then), within `max_fee_drops`.
    async fn replacement_fees(&self, original: Fees) -> Result<Fees, ChainError> {
        let Fees::Xrp { fee_drops, .. } = original else { return Err(unavailable("not an XRP transaction's terms")) };
        self.terms(u64::MAX, fee_drops.saturating_mul(5).div_ceil(4)).await
    }

    async fn sign_replacement(&self, nonce: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        self.sign_tx(Kind::AccountSet, nonce, fees)
    }

    async fn nonce_account(&self) -> Result<Option<NonceAccount>, ChainError> {
        let next = account_sequence(&self.rpc, &self.address, "current").await?;
        Ok(Some(NonceAccount { scope: format!("xrp:{}", self.address), chain_next: next }))
    }
}

impl Signers {
    /// Adds the XRP hot wallet's signer on the live `xrp` gate when `[xrp]` names a node and a
    /// seed (payout executor only).
    pub fn with_xrp(mut self, cfg: &XrpConfig) -> Result<Signers, ChainError> {
        let Some(signer) = XrpSigner::load(cfg)? else { return Ok(self) };
        tracing::info!(address = signer.address(), "XRP payout hot wallet loaded");
        self.insert_live_family(AddressFamily::Xrp, std::sync::Arc::new(signer));
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payout_amounts_become_exact_drops() {
        assert_eq!(to_drops(Decimal::new(1_234_567, 6)).unwrap(), 1_234_567);
        assert_eq!(to_drops(Decimal::new(25, 0)).unwrap(), 25_000_000);
        assert!(to_drops(Decimal::new(1, 7)).is_err(), "below a drop");
        assert!(to_drops(Decimal::new(-1, 0)).is_err());
    }
}
