//! Sweeping the Solana pool's deposit addresses (payout executor only): each pool address's
//! keypair (`[solana] deposit_keys_file`, one per line, as the Solana CLI writes them or base58)
//! and the hot wallet's, which pays a USDC sweep's fees.
//!
//! - [`SolanaDeposits::load`] refuses a key of no pool address, and needs the hot wallet's key.
//!   A pool address without a key is not swept (the planner skips it; its funds stay where
//!   they are, in the reconciliation's holdings).
//! - A SOL sweep is the deposit address's own system transfer of its whole balance less the
//!   transaction's fee, so that the account is left empty (it holds no data: nothing stays
//!   behind for rent).
//! - A USDC sweep is paid for by the hot wallet (a deposit address holds no SOL): the whole
//!   token balance moved with `TransferChecked` to the destination's associated token account
//!   (created when missing, the hot wallet paying its rent), then the deposit's token account
//!   closed (`CloseAccount`), its rent going to the hot wallet. Both keys sign.
//! - [`SolanaDeposits::hot_wallet_change`] reads, once the sweep is finalized, what its
//!   transaction did to the hot wallet's SOL (the fee, the rent back): the house's books.

use std::collections::HashMap;
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use serde_json::json;

use super::tx::{self, Payment, Pubkey};
use super::wallet::{self, SIGNATURE_FEE, hot_key, parse_keypair, priority};
use super::{bad, mint_of, rpc};
use crate::chain::evm::Rpc;
use crate::chain::signer::Fees;
use crate::chain::{ChainError, SignedTx};
use domain::chain::address::AddressFamily;
use domain::config::SolanaConfig;
use domain::gates::GATES;

fn unavailable(message: impl Into<String>) -> ChainError {
    ChainError::Unavailable(message.into())
}

/// The pool addresses' keys, for sweeping.
pub struct SolanaDeposits {
    rpc: Arc<Rpc>,
    keys: HashMap<String, SigningKey>,
    hot: SigningKey,
    mint: Option<Pubkey>,
    /// Micro-lamports per compute unit (0: no priority fee).
    priority_fee: u64,
}

/// A signed sweep: the stored transaction and what it moves (lamports or token units).
pub struct SignedSweep {
    pub tx: SignedTx,
    pub units: u64,
}

/// What a finalized sweep transaction did to the hot wallet's SOL, in lamports: the fee it paid
/// and the change of its balance (the rent a closed token account gave back, less any fee and
/// rent it paid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotWalletChange {
    pub fee: u64,
    pub change: i128,
}

/// Parses `deposit_keys_file`'s text: one keypair per line (blank lines and `#` comments
/// skipped), each the key of a `pool` address; by address.
pub fn parse_keys(text: &str, pool: &[String]) -> Result<HashMap<String, SigningKey>, String> {
    let mut keys = HashMap::new();
    for (n, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l.trim())) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = parse_keypair(line).map_err(|why| format!("line {n}: {why}"))?;
        let address = tx::address(&key.verifying_key().to_bytes());
        if !pool.contains(&address) {
            return Err(format!("line {n}: {address} is not in addresses.live.solana_pool"));
        }
        keys.insert(address, key);
    }
    Ok(keys)
}

impl SolanaDeposits {
    /// `None` without `deposit_keys_file`. `pool` is `addresses.live.solana_pool`.
    pub fn load(cfg: &SolanaConfig, pool: &[String]) -> Result<Option<SolanaDeposits>, ChainError> {
        let Some(path) = cfg.deposit_keys_file.as_deref() else { return Ok(None) };
        let text = std::fs::read_to_string(path).map_err(|e| unavailable(format!("solana.deposit_keys_file: {e}")))?;
        let keys = parse_keys(&text, pool).map_err(|why| unavailable(format!("solana.deposit_keys_file {why}")))?;
        let hot = hot_key(cfg)?
            .ok_or_else(|| unavailable("sweeping Solana needs solana.hot_wallet_key: it pays the USDC sweeps' fees"))?;
        let mint = GATES
            .iter()
            .find(|g| g.family == AddressFamily::Solana && g.is_token)
            .and_then(|g| mint_of(cfg, g))
            .and_then(|m| tx::pubkey(&m));
        Ok(Some(SolanaDeposits { rpc: rpc(cfg), keys, hot, mint, priority_fee: cfg.priority_fee_micro_lamports }))
    }

    /// The hot wallet's address (a USDC sweep's fee payer, and where a closed account's rent goes).
    pub fn hot_address(&self) -> String {
        tx::address(&self.hot.verifying_key().to_bytes())
    }

    /// Whether `address`'s key is loaded (only those are swept).
    pub fn holds(&self, address: &str) -> bool {
        self.keys.contains_key(address)
    }

    fn key(&self, address: &str) -> Result<&SigningKey, ChainError> {
        self.keys.get(address).ok_or_else(|| unavailable(format!("no key for {address} in solana.deposit_keys_file")))
    }

    /// The terms to sign with (a recent blockhash).
    pub async fn terms(&self) -> Result<Fees, ChainError> {
        wallet::latest_blockhash(&self.rpc).await
    }

    /// The fee of a SOL sweep, in lamports: one signature and its priority fee.
    pub fn sol_fee(&self) -> u64 {
        let probe = Payment::Sol { to: [0; 32], lamports: 0 };
        SIGNATURE_FEE + priority(&probe, self.priority_fee, None).map_or(0, |p| p.lamports())
    }

    /// The fee of a USDC sweep, paid by the hot wallet, in lamports: two signatures and the
    /// priority fee (the rent of a destination token account it may create comes on top).
    pub fn token_fee(&self) -> u64 {
        let probe = Payment::SplSweep { mint: [0; 32], decimals: 0, from: [0; 32], to: [0; 32], units: 0 };
        2 * SIGNATURE_FEE + priority(&probe, self.priority_fee, None).map_or(0, |p| p.lamports())
    }

    /// `from`'s whole balance of `lamports` less the fee, to `to`; `None` when nothing is left
    /// after the fee.
    pub fn sign_sol(
        &self,
        from: &str,
        to: &str,
        lamports: u64,
        terms: &Fees,
    ) -> Result<Option<SignedSweep>, ChainError> {
        let Fees::Solana { blockhash, last_valid_block_height, slot } = terms else {
            return Err(unavailable("a Solana sweep needs a recent blockhash"));
        };
        let key = self.key(from)?;
        let Some(units) = lamports.checked_sub(self.sol_fee()).filter(|u| *u > 0) else { return Ok(None) };
        let to = tx::pubkey(to).ok_or_else(|| unavailable(format!("{to} is not a Solana address")))?;
        let payment = Payment::Sol { to, lamports: units };
        let priority = priority(&payment, self.priority_fee, None);
        let message = tx::message(&key.verifying_key().to_bytes(), &payment, priority, blockhash);
        let tx = wallet::stored(&message, &[key], *last_valid_block_height, *slot)?;
        Ok(Some(SignedSweep { tx, units }))
    }

    /// All `units` of USDC (`decimals`) from `from`'s token account to `to`'s, the account then
    /// closed; the hot wallet pays the fees and signs first.
    pub fn sign_token(
        &self,
        from: &str,
        to: &str,
        units: u64,
        decimals: u32,
        terms: &Fees,
    ) -> Result<SignedSweep, ChainError> {
        let Fees::Solana { blockhash, last_valid_block_height, slot } = terms else {
            return Err(unavailable("a Solana sweep needs a recent blockhash"));
        };
        let key = self.key(from)?;
        let mint = self.mint.ok_or_else(|| unavailable("no SPL mint configured"))?;
        let to = tx::pubkey(to).ok_or_else(|| unavailable(format!("{to} is not a Solana address")))?;
        let decimals = u8::try_from(decimals).map_err(|_| unavailable("token decimals above 255"))?;
        let payment = Payment::SplSweep { mint, decimals, from: key.verifying_key().to_bytes(), to, units };
        let priority = priority(&payment, self.priority_fee, None);
        let message = tx::message(&self.hot.verifying_key().to_bytes(), &payment, priority, blockhash);
        let tx = wallet::stored(&message, &[&self.hot, key], *last_valid_block_height, *slot)?;
        Ok(SignedSweep { tx, units })
    }

    /// What finalized transaction `signature` (whose fee payer is the hot wallet) did to the
    /// hot wallet's SOL.
    pub async fn hot_wallet_change(&self, signature: &str) -> Result<HotWalletChange, ChainError> {
        let opts = json!({"encoding": "json", "commitment": "finalized", "maxSupportedTransactionVersion": 0});
        let v = self.rpc.call("getTransaction", json!([signature, opts])).await?;
        let meta = &v["meta"];
        let (Some(fee), Some(before), Some(after)) =
            (meta["fee"].as_u64(), meta["preBalances"][0].as_u64(), meta["postBalances"][0].as_u64())
        else {
            return Err(bad("getTransaction", &v));
        };
        // The fee payer is the first account key (a string, or `{pubkey}` in parsed encodings).
        let first = &v["transaction"]["message"]["accountKeys"][0];
        let payer = first.as_str().or_else(|| first["pubkey"].as_str());
        if payer != Some(self.hot_address().as_str()) {
            return Err(unavailable(format!("{signature}'s fee payer is {payer:?}, not the hot wallet")));
        }
        Ok(HotWalletChange { fee, change: i128::from(after) - i128::from(before) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(seed: u8) -> (String, String) {
        let key = SigningKey::from_bytes(&[seed; 32]);
        let mut bytes = key.to_bytes().to_vec();
        bytes.extend_from_slice(key.verifying_key().as_bytes());
        (tx::address(&key.verifying_key().to_bytes()), serde_json::to_string(&bytes).unwrap())
    }

    #[test]
    fn deposit_keys_are_read_one_per_line_and_only_for_pool_addresses() {
        let ((a, ka), (b, kb)) = (pair(1), pair(2));
        let text = format!(
            "# the pool's keys\n{ka}\n\n{}\n",
            bs58::encode(serde_json::from_str::<Vec<u8>>(&kb).unwrap()).into_string()
        );
        let keys = parse_keys(&text, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(tx::address(&keys[&b].verifying_key().to_bytes()), b);
        let err = parse_keys(&text, std::slice::from_ref(&a)).unwrap_err();
        assert!(err.contains("line 4") && err.contains(&b) && err.contains("solana_pool"), "{err}");
        assert!(parse_keys("[1,2,3]", &[a]).unwrap_err().starts_with("line 1"));
    }

    #[test]
    fn a_usdc_sweep_is_signed_by_the_hot_wallet_first_and_the_deposit_address() {
        let (hot, deposit) = (SigningKey::from_bytes(&[7; 32]), SigningKey::from_bytes(&[8; 32]));
        let (hot_pk, from) = (hot.verifying_key().to_bytes(), deposit.verifying_key().to_bytes());
        let (mint, to) = ([9u8; 32], [10u8; 32]);
        let payment = Payment::SplSweep { mint, decimals: 6, from, to, units: 12_500_000 };
        let message = tx::message(&hot_pk, &payment, None, &[3; 32]);
        let signed = wallet::stored(&message, &[&hot, &deposit], 100, 5).unwrap();
        let back = tx::decode(&wallet::Stored::parse(&signed.raw).unwrap().bytes().unwrap()).unwrap();
        assert_eq!(back.required_signatures, 2);
        assert_eq!(&back.keys[..2], &[hot_pk, from], "fee payer first, then the deposit address");
        assert_eq!(bs58::encode(back.signatures[0]).into_string(), signed.tx_hash);
        use ed25519_dalek::Verifier;
        for (i, key) in [&hot, &deposit].iter().enumerate() {
            let sig = ed25519_dalek::Signature::from_bytes(&back.signatures[i]);
            key.verifying_key().verify(&back.message, &sig).unwrap();
        }
        // Create the destination's account, transfer, close the deposit's account to the hot wallet.
        let token = tx::pubkey(tx::TOKEN_PROGRAM).unwrap();
        let source = tx::associated_token_account(&from, &mint);
        let (transfer, close) = (&back.instructions[1], &back.instructions[2]);
        assert_eq!(back.instructions.len(), 3);
        assert_eq!((transfer.0, transfer.1[0], transfer.1[3]), (token, source, from));
        assert_eq!(transfer.1[2], tx::associated_token_account(&to, &mint));
        assert_eq!((close.0, close.1.clone(), close.2.clone()), (token, vec![source, hot_pk, from], vec![9]));
    }
}
