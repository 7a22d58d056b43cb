//! Sweeping the Bitcoin deposit addresses (payout executor only): the deposit account's
//! extended private key (`[bitcoin] deposit_key_file`, the account `m/84'/0'/0'` whose xpub is
//! `addresses.live.bitcoin_xpub`), the deposit addresses' confirmed unspent outputs, and one
//! transaction spending many of them to one destination.
//!
//! - [`DepositWallet::load`] refuses a key that does not derive the configured xpub's first
//!   address.
//! - [`DepositWallet::unspent`]: one `scantxoutset` over every address's output script; each
//!   output with its address and depth (the node's UTXO set: mempool outputs are never listed).
//! - [`DepositWallet::sign_batch`]: every input's key derived at its address's index
//!   (`m/84'/0'/0'/0/<index>`), one output to the destination of the inputs' total less the fee
//!   (the rate × the transaction's virtual size); a PSBT signed with the account key, finalized,
//!   every input signalling RBF. Local, no network access.

use std::str::FromStr;

use bitcoin::bip32::{ChildNumber, DerivationPath, Xpriv};
use bitcoin::consensus::encode::serialize_hex;
use bitcoin::psbt::Psbt;
use bitcoin::secp256k1::{All, Secp256k1};
use bitcoin::{
    Address, Amount, CompressedPublicKey, Network, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid,
    Witness, absolute::LockTime, transaction::Version,
};
use serde_json::{Value, json};

use super::super::evm::Rpc;
use super::super::{ChainError, SignedTx};
use super::wallet::{parse_xprv, sats, vsize};
use domain::config::BitcoinConfig;

fn unavailable(e: impl std::fmt::Display) -> ChainError {
    ChainError::Unavailable(format!("bitcoin deposits: {e}"))
}

/// One confirmed unspent output of a deposit address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositOutput {
    /// The address (as asked) and its derivation index.
    pub address: String,
    pub index: u32,
    /// `<txid>:<vout>`.
    pub outpoint: String,
    pub sats: u64,
    pub confirmations: u64,
}

/// The deposit account's key and the node, for sweeping.
pub struct DepositWallet {
    account: Xpriv,
    secp: Secp256k1<All>,
    rpc: Rpc,
    target_blocks: u16,
    fallback_rate: u64,
    max_rate: u64,
}

impl DepositWallet {
    /// `None` without `deposit_key_file`. `expected_first` is the configured xpub's index-0
    /// address.
    pub fn load(cfg: &BitcoinConfig, expected_first: Option<&str>) -> Result<Option<DepositWallet>, ChainError> {
        let Some(path) = cfg.deposit_key_file.as_deref() else { return Ok(None) };
        let text = std::fs::read_to_string(path).map_err(|e| unavailable(format!("deposit_key_file: {e}")))?;
        let account = parse_xprv(text.trim())?;
        if account.depth != 3 {
            return Err(unavailable(format!(
                "deposit_key_file: expected the account-level key m/84'/0'/0' (depth 3), got depth {}",
                account.depth
            )));
        }
        let wallet = DepositWallet {
            account,
            secp: Secp256k1::new(),
            rpc: super::rpc(cfg, cfg.wallet_scan_timeout_ms),
            target_blocks: cfg.fee_target_blocks,
            fallback_rate: cfg.fallback_fee_rate_sat_vb,
            max_rate: cfg.max_fee_rate_sat_vb,
        };
        let first = wallet.address(0)?.to_string();
        match expected_first {
            Some(want) if want == first => Ok(Some(wallet)),
            Some(want) => Err(unavailable(format!(
                "deposit_key_file derives {first} at index 0, but addresses.live.bitcoin_xpub derives {want}"
            ))),
            None => Err(unavailable("addresses.live.bitcoin_xpub is not configured")),
        }
    }

    fn path(index: u32) -> Result<DerivationPath, ChainError> {
        let child = |i| ChildNumber::from_normal_idx(i).map_err(unavailable);
        Ok(DerivationPath::from(vec![child(0)?, child(index)?]))
    }

    fn public(&self, index: u32) -> Result<CompressedPublicKey, ChainError> {
        let key = self.account.derive_priv(&self.secp, &Self::path(index)?).map_err(unavailable)?.to_priv();
        CompressedPublicKey::from_private_key(&self.secp, &key).map_err(unavailable)
    }

    /// The P2WPKH address of deposit index `index` (mainnet, as invoices show it).
    pub fn address(&self, index: u32) -> Result<Address, ChainError> {
        Ok(Address::p2wpkh(&self.public(index)?, Network::Bitcoin))
    }

    /// The confirmed unspent outputs of `addresses` (with their derivation indexes), and the
    /// node's tip height. An address whose index does not derive it is refused.
    pub async fn unspent(&self, addresses: &[(String, u32)]) -> Result<Vec<DepositOutput>, ChainError> {
        let mut scripts: Vec<(ScriptBuf, &(String, u32))> = Vec::new();
        for a in addresses {
            let derived = self.address(a.1)?;
            if derived.to_string() != a.0 {
                return Err(unavailable(format!("index {} derives {derived}, not {}", a.1, a.0)));
            }
            scripts.push((derived.script_pubkey(), a));
        }
        if scripts.is_empty() {
            return Ok(Vec::new());
        }
        let descriptors: Vec<Value> =
            scripts.iter().map(|(s, _)| json!({"desc": format!("raw({})", s.to_hex_string())})).collect();
        let scan = self.rpc.call("scantxoutset", json!(["start", descriptors])).await?;
        if scan["success"] != true {
            return Err(unavailable(format!("scantxoutset did not complete: {scan}")));
        }
        let tip = scan["height"].as_u64().ok_or_else(|| unavailable(format!("scantxoutset: {scan}")))?;
        let unspents = scan["unspents"].as_array().ok_or_else(|| unavailable(format!("scantxoutset: {scan}")))?;
        let mut out = Vec::new();
        for u in unspents {
            let (Some(script), Some(txid), Some(vout), Some(sats), Some(height)) = (
                u["scriptPubKey"].as_str(),
                u["txid"].as_str(),
                u["vout"].as_u64(),
                sats(&u["amount"]),
                u["height"].as_u64(),
            ) else {
                return Err(unavailable(format!("unexpected unspent output {u}")));
            };
            let Some((_, (address, index))) = scripts.iter().find(|(s, _)| s.to_hex_string() == script) else {
                continue;
            };
            out.push(DepositOutput {
                address: address.clone(),
                index: *index,
                outpoint: format!("{txid}:{vout}"),
                sats,
                confirmations: tip.saturating_sub(height) + 1,
            });
        }
        out.sort_by(|a, b| a.outpoint.cmp(&b.outpoint));
        Ok(out)
    }

    /// The fee rate to sign with: the node's estimate for the target, or the fallback, capped.
    pub async fn fee_rate(&self) -> Result<u64, ChainError> {
        let estimate = self.rpc.call("estimatesmartfee", json!([self.target_blocks])).await?;
        let rate = estimate.get("feerate").and_then(sats).map(|per_kvb| per_kvb.div_ceil(1000));
        Ok(rate.unwrap_or(self.fallback_rate).clamp(1, self.max_rate))
    }

    /// Signs one transaction spending every one of `inputs` to `destination`: their total less
    /// the fee at `rate`. Returns it with the amount sent and the fee, in satoshis.
    pub fn sign_batch(
        &self,
        inputs: &[DepositOutput],
        destination: &str,
        rate: u64,
    ) -> Result<(SignedTx, u64, u64), ChainError> {
        let to = super::address_script(destination)?;
        let total: u64 = inputs.iter().map(|i| i.sats).sum();
        let fee = rate.saturating_mul(vsize(inputs.len(), to.len(), false));
        let amount = total.checked_sub(fee).filter(|a| *a >= DUST_SATS).ok_or_else(|| {
            unavailable(format!("{total} sat in {} outputs is not worth the fee of {fee} sat", inputs.len()))
        })?;
        let input = inputs
            .iter()
            .map(|i| {
                Ok(TxIn {
                    previous_output: outpoint(&i.outpoint)?,
                    script_sig: ScriptBuf::new(),
                    sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                    witness: Witness::default(),
                })
            })
            .collect::<Result<Vec<_>, ChainError>>()?;
        let output = vec![TxOut { value: Amount::from_sat(amount), script_pubkey: to }];
        let unsigned = Transaction { version: Version::TWO, lock_time: LockTime::ZERO, input, output };
        let mut psbt = Psbt::from_unsigned_tx(unsigned).map_err(unavailable)?;
        let fingerprint = self.account.fingerprint(&self.secp);
        let mut publics = Vec::with_capacity(inputs.len());
        for (n, i) in inputs.iter().enumerate() {
            let public = self.public(i.index)?;
            let script = ScriptBuf::new_p2wpkh(&public.wpubkey_hash());
            let slot = &mut psbt.inputs[n];
            slot.witness_utxo = Some(TxOut { value: Amount::from_sat(i.sats), script_pubkey: script });
            slot.bip32_derivation.insert(public.0, (fingerprint, Self::path(i.index)?));
            publics.push(public);
        }
        psbt.sign(&self.account, &self.secp).map_err(|(_, e)| unavailable(format!("signing failed: {e:?}")))?;
        for (slot, public) in psbt.inputs.iter_mut().zip(&publics) {
            let sig = *slot.partial_sigs.values().next().ok_or_else(|| unavailable("an input was left unsigned"))?;
            slot.final_script_witness = Some(Witness::p2wpkh(&sig, &public.0));
            slot.partial_sigs.clear();
            slot.bip32_derivation.clear();
        }
        let tx = psbt.extract_tx().map_err(unavailable)?;
        Ok((SignedTx { tx_hash: tx.compute_txid().to_string(), raw: serialize_hex(&tx) }, amount, fee))
    }
}

/// Outputs below this many satoshis are not relayed (P2WPKH dust at 3 sat/vB).
const DUST_SATS: u64 = 294;

fn outpoint(s: &str) -> Result<OutPoint, ChainError> {
    let (txid, vout) = s.split_once(':').ok_or_else(|| unavailable(format!("bad outpoint {s}")))?;
    Ok(OutPoint { txid: Txid::from_str(txid).map_err(unavailable)?, vout: vout.parse().map_err(unavailable)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wallet() -> (DepositWallet, tempfile::TempDir) {
        let secp = Secp256k1::new();
        let master = Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x33; 32]).unwrap();
        let account = master.derive_priv(&secp, &DerivationPath::from_str("m/84'/0'/0'").unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("deposit.xprv");
        std::fs::write(&file, account.to_string()).unwrap();
        let cfg = BitcoinConfig {
            rpc_url: "http://node:8332".into(),
            deposit_key_file: Some(file.clone()),
            ..Default::default()
        };
        let xpub = bitcoin::bip32::Xpub::from_priv(&secp, &account).to_string();
        let keys = domain::chain::address::AccountKeysConfig { bitcoin_xpub: Some(xpub), ..Default::default() };
        let deriver = domain::chain::address::AddressDeriver::from_config(
            &keys,
            domain::chain::address::ChainNet::Mainnet,
            "live",
        )
        .unwrap();
        let first = deriver.derive(domain::chain::address::AddressFamily::Bitcoin, 0).unwrap().address;
        assert!(DepositWallet::load(&cfg, Some("bc1qnotthefirstaddress")).is_err(), "another account is refused");
        (DepositWallet::load(&cfg, Some(&first)).unwrap().unwrap(), dir)
    }

    #[test]
    fn a_batch_spends_every_input_to_one_output_less_the_fee() {
        let (w, _dir) = wallet();
        let out = |index: u32, n: u8, sats: u64| DepositOutput {
            address: w.address(index).unwrap().to_string(),
            index,
            outpoint: format!("{}:{n}", "ab".repeat(32)),
            sats,
            confirmations: 3,
        };
        let inputs = [out(0, 0, 100_000), out(1, 1, 50_000), out(7, 2, 25_000)];
        let hot = w.address(1000).unwrap().to_string();
        let (tx, amount, fee) = w.sign_batch(&inputs, &hot, 2).unwrap();
        let decoded: Transaction = bitcoin::consensus::encode::deserialize_hex(&tx.raw).unwrap();
        assert_eq!(decoded.input.len(), 3);
        assert_eq!(decoded.output.len(), 1);
        assert_eq!(fee, 2 * vsize(3, 22, false));
        assert_eq!(amount + fee, 175_000);
        assert_eq!(decoded.output[0].value.to_sat(), amount);
        assert!(decoded.input.iter().all(|i| i.witness.len() == 2), "every input signed");
        // Too little to pay its own fee: refused, nothing signed.
        assert!(w.sign_batch(&[out(0, 0, 300)], &hot, 2).is_err());
    }
}
