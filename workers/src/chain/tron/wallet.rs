//! The TRON payout hot wallet (payout executor only): one account, from a secp256k1 key
//! (`[tron] hot_wallet_key_file`), that pays every TRX and USDT payout and refund.
//!
//! - Terms ([`Signer::fees`], a network read before the executor's write transaction): the
//!   newest block (`/wallet/getnowblock`) is the transaction's reference block (TaPoS) and its
//!   time plus `expiration_secs` its expiration. TRON has no account nonce: a transaction that
//!   expired unseen can never enter a block, and the payout is signed again (the chain checks
//!   first that the node holds the blocks of its window).
//! - A TRX payout is a `TransferContract`; a USDT payout a `TriggerSmartContract` calling
//!   `transfer(to, units)`, burning at most `fee_limit_sun` for energy.

use std::sync::Arc;

use alloy_primitives::{B256, U256};
use alloy_signer::SignerSync;
use alloy_signer_local::PrivateKeySigner;
use serde_json::json;

use super::tx::{Call, Raw, signed_bytes};
use super::{TronApi, block_number};
use crate::chain::signer::{Fees, PayoutTx, Signer, Signers, base_units, hot_wallet_secret};
use crate::chain::{ChainError, SignedTx};
use domain::chain::address::AddressFamily;
use domain::chain::address::tron::{account_id_of, address_of};
use domain::config::TronConfig;
use domain::gates::{self, GATES};

fn unavailable(message: impl Into<String>) -> ChainError {
    ChainError::Unavailable(message.into())
}

/// The 65-byte signature of a transaction id: `r ‖ s ‖ 27 + recovery id` (TronWeb's form).
pub fn sign_id(key: &PrivateKeySigner, id: &[u8; 32]) -> [u8; 65] {
    let sig = key.sign_hash_sync(&B256::from(*id)).expect("a local key signs");
    let mut out = [0u8; 65];
    out[..32].copy_from_slice(&sig.r().to_be_bytes::<32>());
    out[32..64].copy_from_slice(&sig.s().to_be_bytes::<32>());
    out[64] = 27 + u8::from(sig.v());
    out
}

/// The account id (20 bytes) of a key: the last 20 bytes of the Keccak-256 of its public key,
/// as on EVM chains.
pub fn owner_of(key: &PrivateKeySigner) -> [u8; 20] {
    key.address().into_array()
}

pub struct TronSigner {
    api: Arc<TronApi>,
    key: PrivateKeySigner,
    owner: [u8; 20],
    usdt: Option<[u8; 20]>,
    expiration_ms: u64,
    fee_limit_sun: u64,
}

impl TronSigner {
    /// The signer of `[tron]`'s hot wallet key; `None` without a node or a key.
    pub fn load(cfg: &TronConfig) -> Result<Option<TronSigner>, ChainError> {
        if !cfg.configured() {
            return Ok(None);
        }
        let file = cfg.hot_wallet_key_file.as_deref();
        let Some(text) = hot_wallet_secret("tron", cfg.hot_wallet_key.as_ref(), file)? else { return Ok(None) };
        let key: PrivateKeySigner = text
            .trim_start_matches("0x")
            .parse()
            .map_err(|_| unavailable("tron.hot_wallet_key: not a secp256k1 private key (64 hex characters)"))?;
        let usdt = GATES
            .iter()
            .find(|g| g.family == AddressFamily::Tron && g.is_token)
            .and_then(|g| cfg.usdt_contract.as_deref().or_else(|| gates::token_contract(g)))
            .and_then(account_id_of);
        Ok(Some(TronSigner {
            api: Arc::new(TronApi::new(cfg)),
            owner: owner_of(&key),
            key,
            usdt,
            expiration_ms: cfg.expiration_secs * 1_000,
            fee_limit_sun: cfg.fee_limit_sun,
        }))
    }

    /// The hot wallet's address (`T…`).
    pub fn address(&self) -> String {
        address_of(&self.owner)
    }

    fn call(&self, tx: &PayoutTx<'_>) -> Result<Call, ChainError> {
        let to = account_id_of(tx.destination)
            .ok_or_else(|| unavailable(format!("{} is not a TRON address", tx.destination)))?;
        let units = base_units(tx.amount, tx.gate.decimals)?;
        if !tx.gate.is_token {
            return Ok(Call::Trx { to, sun: units });
        }
        let contract = self.usdt.ok_or_else(|| unavailable("no TRC-20 USDT contract configured"))?;
        Ok(Call::Trc20 { contract, to, units: U256::from(units), fee_limit: self.fee_limit_sun })
    }
}

#[async_trait::async_trait]
impl Signer for TronSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        let Some(Fees::Tron { ref_block, ref_block_hash, expiration_ms, timestamp_ms }) = tx.fees else {
            return Err(unavailable("a TRON payout needs its reference block"));
        };
        let raw =
            Raw { owner: self.owner, call: self.call(tx)?, ref_block, ref_block_hash, expiration_ms, timestamp_ms };
        Ok(sign_raw(&self.key, &raw))
    }

    async fn fees(&self, _: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        terms(&self.api, self.expiration_ms).await.map(Some)
    }
}

/// `raw` signed by `key` (its owner must be the key's account): the stored transaction, its
/// id the hash. One function for the hot wallet's payouts and the deposit addresses' sweeps.
pub fn sign_raw(key: &PrivateKeySigner, raw: &Raw) -> SignedTx {
    let id = raw.id();
    let signed = signed_bytes(raw, &sign_id(key, &id));
    SignedTx { tx_hash: hex::encode(id), raw: hex::encode(signed) }
}

/// The terms of a transaction signed now: the newest block (`/wallet/getnowblock`) as its
/// reference block, its time plus `expiration_ms` as its expiration.
pub async fn terms(api: &TronApi, expiration_ms: u64) -> Result<Fees, ChainError> {
    let head = api.call("/wallet/getnowblock", json!({})).await?;
    let time = head["block_header"]["raw_data"]["timestamp"].as_u64();
    let (Some(number), Some(time), Some(id)) = (block_number(&head), time, head["blockID"].as_str()) else {
        return Err(unavailable(format!("unexpected getnowblock answer: {head}")));
    };
    let id =
        hex::decode(id).ok().filter(|b| b.len() == 32).ok_or_else(|| unavailable("a blockID that is not 32 bytes"))?;
    Ok(Fees::Tron {
        ref_block: number,
        ref_block_hash: id[8..16].try_into().expect("8 bytes"),
        expiration_ms: time + expiration_ms,
        timestamp_ms: time,
    })
}

impl Signers {
    /// Adds the TRON hot wallet's signer on the live `tron` and `tron_usdt` gates when
    /// `[tron]` names a node and a key (payout executor only).
    pub fn with_tron(mut self, cfg: &TronConfig) -> Result<Signers, ChainError> {
        let Some(signer) = TronSigner::load(cfg)? else { return Ok(self) };
        tracing::info!(address = %signer.address(), "TRON payout hot wallet loaded");
        self.insert_live_family(AddressFamily::Tron, Arc::new(signer));
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_wallet_address_is_the_keys_tron_address() {
        let key: PrivateKeySigner = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d".parse().unwrap();
        // TronWeb: 4170997970c51812dc3a010c7d01b50e0d17dc79c8.
        assert_eq!(hex::encode(owner_of(&key)), "70997970c51812dc3a010c7d01b50e0d17dc79c8");
    }
}
