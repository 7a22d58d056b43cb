//! The Solana payout hot wallet (payout executor only): one account, from an ed25519 keypair
//! (`[solana] hot_wallet_key_file`), that pays every SOL and USDC payout and refund.
//!
//! - A destination the SPL Token program owns (a token account or a mint, not a wallet) is
//!   refused before anything is signed (`getAccountInfo`): the payout fails, its funds released.
//! - Terms ([`Signer::fees`], a network read before the executor's write transaction): a recent
//!   blockhash at `confirmed` commitment, the last block height it is valid at, and the slot the
//!   node answered from (`getLatestBlockhash`). Solana has no account nonce: a transaction whose
//!   blockhash expired unseen can never enter a block, and the payout is signed again (the chain
//!   checks by signature first).
//! - A SOL payout is a system transfer; a USDC payout creates the recipient's associated token
//!   account when it is missing (`CreateIdempotent`: nothing happens when it exists; the hot
//!   wallet pays its rent) and moves the units with `TransferChecked` from the hot wallet's own.
//! - The stored transaction ([`Stored`]) is the wire transaction (base64) with its blockhash's
//!   last valid block height and that slot, which `outgoing` needs to judge expiry.

use std::sync::Arc;

use base64::Engine;
use ed25519_dalek::{Signer as _, SigningKey};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::tx::{self, Payment, Priority, Pubkey};
use super::{bad, mint_of, rpc};
use crate::chain::evm::Rpc;
use crate::chain::signer::{Fees, PayoutTx, Signer, Signers, base_units, hot_wallet_secret};
use crate::chain::{ChainError, SignedTx};
use domain::chain::address::AddressFamily;
use domain::config::SolanaConfig;
use domain::gates::GATES;

fn unavailable(message: impl Into<String>) -> ChainError {
    ChainError::Unavailable(message.into())
}

/// A payout's stored transaction (`SignedTx::raw`, JSON): what is sent, and its validity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The signed wire transaction, base64.
    pub tx: String,
    /// Blocks above this height cannot include it.
    pub last_valid_block_height: u64,
    /// The slot the blockhash was read at: a node whose ledger starts after it cannot say the
    /// transaction never landed.
    pub slot: u64,
}

impl Stored {
    pub fn parse(raw: &str) -> Result<Stored, ChainError> {
        serde_json::from_str(raw).map_err(|e| unavailable(format!("our own Solana transaction: {e}")))
    }

    /// The wire bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, ChainError> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.tx)
            .map_err(|e| unavailable(format!("our own Solana transaction: {e}")))
    }
}

/// A keypair as the Solana CLI writes it (a JSON array of 64 bytes: secret, then public), or
/// base58 of the same 64 bytes; the public half must be the secret's.
pub fn parse_keypair(text: &str) -> Result<SigningKey, String> {
    let bytes: Vec<u8> = if text.starts_with('[') {
        serde_json::from_str(text).map_err(|_| "not a JSON array of bytes")?
    } else {
        bs58::decode(text).into_vec().map_err(|_| "neither a JSON array of bytes nor base58")?
    };
    let pair: [u8; 64] = bytes.try_into().map_err(|_| "a keypair is 64 bytes (secret, then public)")?;
    let key = SigningKey::from_bytes(pair[..32].try_into().expect("32 bytes"));
    if key.verifying_key().as_bytes()[..] != pair[32..] {
        return Err("its public half is not the secret's public key".into());
    }
    Ok(key)
}

/// The hot wallet's key (`hot_wallet_key` or `hot_wallet_key_file`); `None` without one.
pub fn hot_key(cfg: &SolanaConfig) -> Result<Option<SigningKey>, ChainError> {
    let file = cfg.hot_wallet_key_file.as_deref();
    let Some(text) = hot_wallet_secret("solana", cfg.hot_wallet_key.as_ref(), file)? else { return Ok(None) };
    parse_keypair(&text).map(Some).map_err(|why| unavailable(format!("solana.hot_wallet_key: {why}")))
}

pub struct SolanaSigner {
    rpc: Arc<Rpc>,
    key: SigningKey,
    /// The USDC mint.
    mint: Option<Pubkey>,
    /// Micro-lamports per compute unit (0: no priority fee).
    priority_fee: u64,
}

impl SolanaSigner {
    /// The signer of `[solana]`'s hot wallet key; `None` without a node or a key.
    pub fn load(cfg: &SolanaConfig) -> Result<Option<SolanaSigner>, ChainError> {
        if !cfg.configured() {
            return Ok(None);
        }
        let Some(key) = hot_key(cfg)? else { return Ok(None) };
        let mint = GATES
            .iter()
            .find(|g| g.family == AddressFamily::Solana && g.is_token)
            .and_then(|g| mint_of(cfg, g))
            .and_then(|m| tx::pubkey(&m));
        Ok(Some(SolanaSigner { rpc: rpc(cfg), key, mint, priority_fee: cfg.priority_fee_micro_lamports }))
    }

    /// The hot wallet's address.
    pub fn address(&self) -> String {
        tx::address(&self.key.verifying_key().to_bytes())
    }

    fn payment(&self, tx: &PayoutTx<'_>) -> Result<Payment, ChainError> {
        let to = tx::pubkey(tx.destination)
            .ok_or_else(|| unavailable(format!("{} is not a Solana address", tx.destination)))?;
        let units = base_units(tx.amount, tx.gate.decimals)?;
        if !tx.gate.is_token {
            return Ok(Payment::Sol { to, lamports: units });
        }
        let mint = self.mint.ok_or_else(|| unavailable("no SPL mint configured"))?;
        let decimals = u8::try_from(tx.gate.decimals).map_err(|_| unavailable("token decimals above 255"))?;
        Ok(Payment::Spl { mint, decimals, owner: to, units })
    }
}

/// Base fee of a transaction with one signature, in lamports.
pub const SIGNATURE_FEE: u64 = 5_000;

/// The priority fee of `payment` at `micro_lamports` per unit; a SOL payout's lowered so that
/// its whole fee stays within `max_fee_lamports` (its configured network fee), none when even
/// the signature fee does not fit. `None` also when no price is configured.
pub fn priority(payment: &Payment, micro_lamports: u64, max_fee_lamports: Option<u64>) -> Option<Priority> {
    let unit_limit = tx::unit_limit(payment);
    let mut p = Priority { unit_limit, micro_lamports };
    if let (Payment::Sol { .. }, Some(max)) = (payment, max_fee_lamports) {
        let room = max.saturating_sub(SIGNATURE_FEE);
        if p.lamports() > room {
            // The highest price whose ceil(limit × price / 10^6) fits the room.
            let fitting = u128::from(room) * 1_000_000 / u128::from(unit_limit);
            p.micro_lamports = u64::try_from(fitting).unwrap_or(0);
        }
    }
    (p.micro_lamports > 0).then_some(p)
}

#[async_trait::async_trait]
impl Signer for SolanaSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        let Some(Fees::Solana { blockhash, last_valid_block_height, slot }) = tx.fees else {
            return Err(unavailable("a Solana payout needs a recent blockhash"));
        };
        let payer = self.key.verifying_key().to_bytes();
        let payment = self.payment(tx)?;
        // A SOL payout's fee must fit its configured network fee; a USDC payout's is paid in SOL.
        let max_fee = if tx.gate.is_token { None } else { base_units(tx.max_fee, tx.gate.decimals).ok() };
        let priority = priority(&payment, self.priority_fee, max_fee);
        let message = tx::message(&payer, &payment, priority, &blockhash);
        stored(&message, &[&self.key], last_valid_block_height, slot)
    }

    /// Also checks the destination: an account the SPL Token program owns (a token account or
    /// a mint) is no wallet. USDC paid "to" it would go to an associated token account that
    /// token account owns, which nobody can spend; SOL would sit in it. Refused before signing.
    async fn fees(&self, payout: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        let info = self
            .rpc
            .call("getAccountInfo", json!([payout.destination, {"encoding": "base64", "commitment": "confirmed"}]))
            .await?;
        if info["value"]["owner"] == tx::TOKEN_PROGRAM {
            return Err(ChainError::Refused(format!(
                "{} is an SPL token account or mint, not a wallet address: pay the owner's wallet address",
                payout.destination
            )));
        }
        latest_blockhash(&self.rpc).await.map(Some)
    }
}

/// The terms a transaction is signed with: a recent blockhash at `confirmed` commitment, the
/// last block height it is valid at, and the slot the node answered from.
pub async fn latest_blockhash(rpc: &Rpc) -> Result<Fees, ChainError> {
    let v = rpc.call("getLatestBlockhash", json!([{"commitment": "confirmed"}])).await?;
    let blockhash = v["value"]["blockhash"].as_str().and_then(tx::pubkey);
    let (Some(blockhash), Some(last_valid_block_height), Some(slot)) =
        (blockhash, v["value"]["lastValidBlockHeight"].as_u64(), v["context"]["slot"].as_u64())
    else {
        return Err(bad("getLatestBlockhash", &v));
    };
    Ok(Fees::Solana { blockhash, last_valid_block_height, slot })
}

/// A stored transaction (`SignedTx`) of `message` signed by `keys`, in the order of its signer
/// keys (the fee payer first): its id is the first signature.
pub fn stored(
    message: &[u8],
    keys: &[&SigningKey],
    last_valid_block_height: u64,
    slot: u64,
) -> Result<SignedTx, ChainError> {
    let signatures: Vec<[u8; 64]> = keys.iter().map(|k| k.sign(message).to_bytes()).collect();
    let wire = tx::signed_by(message, &signatures);
    let stored = Stored { tx: base64::engine::general_purpose::STANDARD.encode(wire), last_valid_block_height, slot };
    let raw = serde_json::to_string(&stored).map_err(|e| unavailable(e.to_string()))?;
    Ok(SignedTx { tx_hash: bs58::encode(signatures[0]).into_string(), raw })
}

impl Signers {
    /// Adds the Solana hot wallet's signer on the live `solana` and `solana_usdc` gates when
    /// `[solana]` names a node and a key (payout executor only).
    pub fn with_solana(mut self, cfg: &SolanaConfig) -> Result<Signers, ChainError> {
        let Some(signer) = SolanaSigner::load(cfg)? else { return Ok(self) };
        tracing::info!(address = %signer.address(), "Solana payout hot wallet loaded");
        self.insert_live_family(AddressFamily::Solana, Arc::new(signer));
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sol_payouts_priority_fee_fits_its_configured_network_fee() {
        let sol = Payment::Sol { to: [1; 32], lamports: 1 };
        let spl = Payment::Spl { mint: [2; 32], decimals: 6, owner: [3; 32], units: 1 };
        assert_eq!(priority(&sol, 0, Some(10_000)), None, "none configured");
        // 1,000 units at 2,000 micro-lamports = 2 lamports: fits 10,000.
        assert_eq!(priority(&sol, 2_000, Some(10_000)), Some(Priority { unit_limit: 1_000, micro_lamports: 2_000 }));
        // 1,000 units at 10,000,000 = 10,000 lamports: lowered to the 5,000 left after the
        // signature fee.
        let p = priority(&sol, 10_000_000, Some(10_000)).unwrap();
        assert_eq!((p.micro_lamports, p.lamports()), (5_000_000, 5_000));
        assert_eq!(priority(&sol, 10_000, Some(5_000)), None, "no room above the signature fee");
        // USDC: the hot wallet pays in SOL, nothing to fit.
        assert_eq!(priority(&spl, 50_000, Some(0)), Some(Priority { unit_limit: 60_000, micro_lamports: 50_000 }));
    }

    #[test]
    fn keypairs_are_read_as_the_solana_cli_writes_them_or_in_base58() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let mut pair = key.to_bytes().to_vec();
        pair.extend_from_slice(key.verifying_key().as_bytes());
        let json = serde_json::to_string(&pair).unwrap();
        assert_eq!(parse_keypair(&json).unwrap().to_bytes(), key.to_bytes());
        assert_eq!(parse_keypair(&bs58::encode(&pair).into_string()).unwrap().to_bytes(), key.to_bytes());
        assert!(parse_keypair(&serde_json::to_string(&pair[..32]).unwrap()).unwrap_err().contains("64 bytes"));
        pair[40] ^= 1;
        assert!(parse_keypair(&serde_json::to_string(&pair).unwrap()).unwrap_err().contains("public half"));
        assert!(parse_keypair("0x1234").is_err());
    }
}
