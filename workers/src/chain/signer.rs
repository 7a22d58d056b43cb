//! Signing outgoing transactions, kept apart from everything else: the payout executor asks a
//! [`Signer`] for a signed transaction and never sees a key. The test environment uses the
//! sandbox signer; live gates use hot-wallet signers (`evm::EvmSigner`,
//! `bitcoin::wallet::BitcoinSigner`, `xrp::wallet::XrpSigner`, `tron::wallet::TronSigner`,
//! `solana::wallet::SolanaSigner`; keys from a file or secret, loaded only by the executor
//! process). The API process never builds one.

use std::collections::HashMap;
use std::sync::Arc;

use entity::Environment;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{ChainError, SignedTx};
use domain::gates::{GATES, Gate};

/// What to sign: one transfer of a payout.
#[derive(Debug, Clone)]
pub struct PayoutTx<'a> {
    pub gate: &'static Gate,
    pub payout_id: Uuid,
    pub destination: &'a str,
    pub destination_tag: Option<&'a str>,
    /// What the recipient receives.
    pub amount: Decimal,
    /// The most the transaction may pay in fees (the configured estimate).
    pub max_fee: Decimal,
    /// The account nonce to sign with, on account-based chains (see [`Signer::nonce_account`]).
    pub nonce: Option<u64>,
    /// The fees to sign with, read from the network by [`Signer::fees`] before the executor
    /// opens its write transaction (`None` where the chain prices otherwise).
    pub fees: Option<Fees>,
    /// On UTXO chains: the wallet outputs free to spend (read by [`Signer::funding`], less those
    /// other payouts' signed transactions spend) and the fee rate.
    pub funding: Option<Funding>,
}

/// An unspent output of a UTXO hot wallet, as the chain shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletOutput {
    /// `<txid>:<vout>`.
    pub outpoint: String,
    pub sats: u64,
}

/// What a UTXO signer can spend, read from the network before the write transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Funding {
    /// `<network>:<wallet address>`: the key of the wallet's spent-output rows.
    pub scope: String,
    /// The wallet's confirmed unspent outputs.
    pub outputs: Vec<WalletOutput>,
    /// Fee rate to sign with, in satoshis per virtual byte (already capped).
    pub fee_rate_sat_vb: u64,
}

pub use domain::chain::evm_tx::Fees as GasFees;

/// The terms a transaction is signed with that come from the network (read by
/// [`Signer::fees`] before the executor's write transaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fees {
    /// EIP-1559 gas prices.
    Gas(GasFees),
    /// An XRP Ledger transaction's fee and the last ledger it may enter (`LastLedgerSequence`).
    Xrp { fee_drops: u64, last_ledger: u32 },
    /// A TRON transaction's reference block (height and bytes 8..16 of its id), its expiration
    /// and timestamp (ms).
    Tron { ref_block: u64, ref_block_hash: [u8; 8], expiration_ms: u64, timestamp_ms: u64 },
    /// A Solana transaction's recent blockhash, the last block height it is valid at, and the
    /// slot the node answered from (`getLatestBlockhash`).
    Solana { blockhash: [u8; 32], last_valid_block_height: u64, slot: u64 },
}

impl Fees {
    /// The gas prices of an EVM transaction; an error for other chains' terms.
    pub fn gas(self) -> Result<GasFees, ChainError> {
        match self {
            Fees::Gas(g) => Ok(g),
            Fees::Xrp { .. } | Fees::Tron { .. } | Fees::Solana { .. } => {
                Err(ChainError::Unavailable("another chain's terms given to an EVM signer".into()))
            }
        }
    }
}

/// The account a signer sends from, on chains that order an account's transactions by nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonceAccount {
    /// `<network>:<address>`: the key of its nonce counter.
    pub scope: String,
    /// The account's next nonce as the chain sees it (pending transactions included).
    pub chain_next: u64,
}

/// Signing is local: every network read a signer needs ([`Signer::nonce_account`],
/// [`Signer::fees`], [`Signer::replacement_fees`]) is a separate call the executor makes
/// before it opens the database transaction that stores the signed payout, so no RPC call ever
/// runs while a write transaction is open (on SQLite that transaction blocks every writer).
#[async_trait::async_trait]
pub trait Signer: Send + Sync {
    /// Signs `tx` with its `nonce` and `fees`; no network access.
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError>;

    /// The fees to sign `tx` with, read from the network (`None`: the chain needs none).
    async fn fees(&self, tx: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        let _ = tx;
        Ok(None)
    }

    /// The nonce and fees a signed transaction of this signer carries (`None` on chains
    /// without nonces: nothing can replace their transactions).
    fn signed_terms(&self, raw: &str) -> Option<(u64, Fees)> {
        let _ = raw;
        None
    }

    /// Fees for a replacement of a transaction signed with `original`: higher than it by the
    /// margin nodes require, read from the network, bounded by the configured cap.
    async fn replacement_fees(&self, original: Fees) -> Result<Fees, ChainError> {
        let _ = original;
        Err(ChainError::Unavailable("this chain's transactions cannot be replaced".into()))
    }

    /// A zero-value transaction from the hot wallet to itself with `nonce` and `fees` (on the
    /// XRP Ledger a no-op `AccountSet`): it takes the nonce of a stuck (or refused) payout
    /// transaction, so that one can never be mined.
    async fn sign_replacement(&self, nonce: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        let _ = (nonce, fees);
        Err(ChainError::Unavailable("this chain's transactions cannot be replaced".into()))
    }

    /// `Some` for account-based chains: the executor then allocates the nonce from the
    /// database, in the transaction that stores the signed payout, so no nonce is used twice or
    /// skipped, whatever restarts or concurrent executors do.
    async fn nonce_account(&self) -> Result<Option<NonceAccount>, ChainError> {
        Ok(None)
    }

    /// `Some` for UTXO chains: the wallet's unspent outputs and the fee rate, read from the
    /// network. The executor takes out the outputs other payouts already spend, and records the
    /// ones the signed transaction spends ([`Signer::spends`]) in the transaction that stores it,
    /// so no output is ever signed over twice, whatever concurrent executors do.
    async fn funding(&self) -> Result<Option<Funding>, ChainError> {
        Ok(None)
    }

    /// The wallet outputs (`<txid>:<vout>`) a signed transaction of this signer spends.
    fn spends(&self, raw: &str) -> Vec<String> {
        let _ = raw;
        Vec::new()
    }
}

/// A hot wallet's secret as configured in section `section` (`<section>.hot_wallet_key`, or the
/// file `<section>.hot_wallet_key_file` names), trimmed; `None` when neither is set.
pub fn hot_wallet_secret(
    section: &str,
    key: Option<&domain::config::Redacted>,
    file: Option<&std::path::Path>,
) -> Result<Option<String>, ChainError> {
    let text = match (key, file) {
        (Some(k), _) => k.0.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| ChainError::Unavailable(format!("{section}.hot_wallet_key_file: {e}")))?,
        (None, None) => return Ok(None),
    };
    Ok(Some(text.trim().to_owned()))
}

/// An amount in the gate's base units (sun, lamports, token units), exactly.
pub fn base_units(amount: Decimal, decimals: u32) -> Result<u64, ChainError> {
    let scaled = amount.checked_mul(Decimal::from(10u64.pow(decimals)));
    let exact = scaled.filter(|d| d.fract().is_zero() && *d >= Decimal::ZERO);
    exact.and_then(|d| u64::try_from(d).ok()).ok_or_else(|| {
        ChainError::Unavailable(format!("{amount} is not a whole number of base units ({decimals} decimals)"))
    })
}

/// The body of a sandbox transaction (its `raw` is this as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SandboxTx {
    pub gate_id: String,
    pub to: String,
    pub tag: Option<String>,
    pub amount: Decimal,
    pub max_fee: Decimal,
    /// The payout id, as a memo.
    pub memo: String,
}

/// Signs sandbox transactions: deterministic, so signing a payout twice gives the same
/// transaction and hash.
pub struct SandboxSigner;

#[async_trait::async_trait]
impl Signer for SandboxSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        let body = SandboxTx {
            gate_id: tx.gate.id.to_owned(),
            to: tx.destination.to_owned(),
            tag: tx.destination_tag.map(str::to_owned),
            amount: tx.amount.normalize(),
            max_fee: tx.max_fee.normalize(),
            memo: tx.payout_id.to_string(),
        };
        let raw = serde_json::to_string(&body).map_err(|e| ChainError::Unavailable(e.to_string()))?;
        let tx_hash = hex::encode(Sha256::digest(raw.as_bytes()));
        Ok(SignedTx { tx_hash, raw })
    }
}

/// The signer of every (environment, gate) the executor can pay out on.
#[derive(Clone, Default)]
pub struct Signers {
    by_gate: HashMap<(Environment, &'static str), Arc<dyn Signer>>,
}

impl Signers {
    /// The sandbox signer on every test gate; live gates get theirs from their adapters
    /// (`Signers::with_evm` in `evm`, `Signers::with_bitcoin` in `bitcoin::wallet`,
    /// `Signers::with_xrp` in `xrp::wallet`, and so on for TRON and Solana).
    pub fn sandbox() -> Signers {
        let signer: Arc<dyn Signer> = Arc::new(SandboxSigner);
        Signers { by_gate: GATES.iter().map(|g| ((Environment::Test, g.id), signer.clone())).collect() }
    }

    pub fn insert(&mut self, env: Environment, gate: &'static Gate, signer: Arc<dyn Signer>) {
        self.by_gate.insert((env, gate.id), signer);
    }

    /// `signer` on every live gate of `family`: one hot wallet paying all of that network's
    /// assets (TRX and USDT, SOL and USDC, XRP).
    pub fn insert_live_family(&mut self, family: domain::chain::address::AddressFamily, signer: Arc<dyn Signer>) {
        for gate in GATES.iter().filter(|g| g.family == family) {
            self.insert(Environment::Live, gate, signer.clone());
        }
    }

    pub fn get(&self, env: Environment, gate_id: &str) -> Option<Arc<dyn Signer>> {
        let gate = domain::gates::find(gate_id)?;
        self.by_gate.get(&(env, gate.id)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payout_amounts_become_exact_base_units() {
        assert_eq!(base_units(Decimal::new(1_234_567, 6), 6).unwrap(), 1_234_567);
        assert_eq!(base_units(Decimal::new(25, 0), 6).unwrap(), 25_000_000);
        assert!(base_units(Decimal::new(1, 7), 6).is_err());
        assert!(base_units(Decimal::new(-1, 0), 6).is_err());
    }
}
