//! The Bitcoin payout hot wallet (payout executor only): one BIP84 key, `m/84'/0'/0'/0/0` of the
//! configured extended private key, whose P2WPKH address receives the operator's float and the
//! payouts' change, so the wallet is one address an operator can audit, top up and restore in
//! any BIP84 wallet.
//!
//! - Funding ([`Signer::funding`], a network read before the executor's write transaction):
//!   the wallet's confirmed unspent outputs from `scantxoutset` over its output script (the
//!   node needs no wallet), and the fee rate from `estimatesmartfee` (the configured fallback
//!   when the node has no estimate), capped by `max_fee_rate_sat_vb`. Unconfirmed change is not
//!   spent: a payout waits for a confirmed output rather than build on a transaction that could
//!   still leave the chain. The scan is kept until the best block changes.
//! - Signing ([`Signer::sign`], local): largest outputs first until the amount and the fee are
//!   covered; the fee is the rate times the transaction's virtual size, capped by the payout's
//!   configured network fee (so the merchant is never charged more than was reserved); change
//!   below the dust limit goes to the fee. A PSBT is built, signed with the extended key
//!   (BIP32 derivation), finalized and extracted; every input signals RBF.
//! - The executor records the outputs a signed transaction spends ([`Signer::spends`]) in the
//!   transaction that stores it: no output is signed over twice.

use std::str::FromStr;

use bitcoin::bip32::{DerivationPath, Xpriv};
use bitcoin::consensus::encode::{deserialize_hex, serialize_hex};
use bitcoin::psbt::Psbt;
use bitcoin::secp256k1::{All, Secp256k1};
use bitcoin::{
    Address, Amount, CompressedPublicKey, Network, OutPoint, ScriptBuf, Sequence, Transaction, TxIn, TxOut, Txid,
    Witness, absolute::LockTime, transaction::Version,
};
use rust_decimal::Decimal;
use serde_json::{Value, json};

use super::super::evm::Rpc;
use super::super::signer::{Funding, PayoutTx, Signer, Signers, WalletOutput, hot_wallet_secret};
use super::super::{ChainError, SignedTx};
use domain::chain::address::{AccountKeysConfig, AddressDeriver, AddressFamily, ChainNet};
use domain::config::BitcoinConfig;

/// The hot wallet's key: the first BIP84 receiving address of the account.
const PATH: &str = "m/84'/0'/0'/0/0";
/// Outputs below this many satoshis are not relayed (P2WPKH dust at 3 sat/vB).
const DUST_SATS: u64 = 294;

pub struct BitcoinSigner {
    master: Xpriv,
    path: DerivationPath,
    public: CompressedPublicKey,
    script: ScriptBuf,
    scope: String,
    rpc: Rpc,
    target_blocks: u16,
    fallback_rate: u64,
    max_rate: u64,
    secp: Secp256k1<All>,
    /// The confirmed outputs at a best block hash (see [`BitcoinSigner::confirmed_outputs`]).
    scanned: std::sync::Mutex<Option<(String, Vec<WalletOutput>)>>,
    scans: std::sync::atomic::AtomicU64,
}

fn unavailable(e: impl std::fmt::Display) -> ChainError {
    ChainError::Unavailable(e.to_string())
}

impl BitcoinSigner {
    /// The signer of `cfg`'s hot wallet; `None` without a key. The key is read here, in the
    /// executor process only.
    pub fn load(cfg: &BitcoinConfig) -> Result<Option<BitcoinSigner>, ChainError> {
        let file = cfg.hot_wallet_key_file.as_deref();
        let Some(text) = hot_wallet_secret("bitcoin", cfg.hot_wallet_key.as_ref(), file)? else { return Ok(None) };
        let master = parse_xprv(&text)?;
        BitcoinSigner::new(master, super::rpc(cfg, cfg.wallet_scan_timeout_ms), cfg).map(Some)
    }

    fn new(master: Xpriv, rpc: Rpc, cfg: &BitcoinConfig) -> Result<BitcoinSigner, ChainError> {
        let secp = Secp256k1::new();
        let path = DerivationPath::from_str(PATH).map_err(unavailable)?;
        let key = master.derive_priv(&secp, &path).map_err(unavailable)?.to_priv();
        let public = CompressedPublicKey::from_private_key(&secp, &key).map_err(unavailable)?;
        let address = Address::p2wpkh(&public, Network::Bitcoin);
        Ok(BitcoinSigner {
            master,
            path,
            public,
            script: ScriptBuf::new_p2wpkh(&public.wpubkey_hash()),
            scope: format!("bitcoin:{address}"),
            rpc,
            target_blocks: cfg.fee_target_blocks,
            fallback_rate: cfg.fallback_fee_rate_sat_vb,
            max_rate: cfg.max_fee_rate_sat_vb,
            secp,
            scanned: std::sync::Mutex::new(None),
            scans: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The wallet's confirmed unspent outputs. They change only with a new block (unconfirmed
    /// ones are not listed), so one `scantxoutset` (minutes on mainnet) serves every payout
    /// signed at the same best block.
    async fn confirmed_outputs(&self) -> Result<Vec<WalletOutput>, ChainError> {
        let best = self.rpc.call("getbestblockhash", json!([])).await?;
        let best = best.as_str().ok_or_else(|| unavailable(format!("bitcoin: best block hash {best}")))?.to_owned();
        if let Some((at, outputs)) = &*self.scanned.lock().expect("scan cache")
            && *at == best
        {
            return Ok(outputs.clone());
        }
        let desc = format!("raw({})", self.script.to_hex_string());
        let scan = self.rpc.call("scantxoutset", json!(["start", [{"desc": desc}]])).await?;
        self.scans.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if scan["success"] != true {
            return Err(unavailable(format!("bitcoin: scantxoutset did not complete: {scan}")));
        }
        let unspents =
            scan["unspents"].as_array().ok_or_else(|| unavailable(format!("bitcoin: scantxoutset: {scan}")))?;
        let mut outputs = Vec::new();
        for u in unspents {
            let (Some(txid), Some(vout), Some(sats)) = (u["txid"].as_str(), u["vout"].as_u64(), sats(&u["amount"]))
            else {
                return Err(unavailable(format!("bitcoin: unexpected unspent output {u}")));
            };
            outputs.push(WalletOutput { outpoint: format!("{txid}:{vout}"), sats });
        }
        // Kept only when the scan read the block asked about (a block may have come meanwhile).
        if scan["bestblock"].as_str() == Some(best.as_str()) {
            *self.scanned.lock().expect("scan cache") = Some((best, outputs.clone()));
        }
        Ok(outputs)
    }

    /// `scantxoutset` calls made so far.
    pub fn scans(&self) -> u64 {
        self.scans.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The wallet's address (mainnet `bc1q…`): where the operator sends the float.
    pub fn address(&self) -> Address {
        Address::p2wpkh(&self.public, Network::Bitcoin)
    }

    /// The fee rate to sign with: the node's estimate for the target, or the fallback, capped.
    fn fee_rate(&self, estimate: &Value) -> u64 {
        let rate = estimate
            .get("feerate")
            .and_then(sats)
            // BTC per 1,000 vbytes → satoshis per vbyte, rounded up.
            .map(|per_kvb| per_kvb.div_ceil(1000))
            .unwrap_or(self.fallback_rate);
        rate.clamp(1, self.max_rate)
    }

    /// Builds and signs the transaction paying `to` `amount_sats` from `funding`.
    fn build(
        &self,
        to: &Address,
        amount_sats: u64,
        max_fee_sats: u64,
        funding: &Funding,
    ) -> Result<SignedTx, ChainError> {
        let plan =
            select(&funding.outputs, amount_sats, funding.fee_rate_sat_vb, max_fee_sats, to.script_pubkey().len())?;
        let mut output = vec![TxOut { value: Amount::from_sat(amount_sats), script_pubkey: to.script_pubkey() }];
        if plan.change > 0 {
            output.push(TxOut { value: Amount::from_sat(plan.change), script_pubkey: self.script.clone() });
        }
        let mut input = Vec::new();
        for o in &plan.inputs {
            input.push(TxIn {
                previous_output: outpoint(&o.outpoint)?,
                script_sig: ScriptBuf::new(),
                sequence: Sequence::ENABLE_RBF_NO_LOCKTIME,
                witness: Witness::default(),
            });
        }
        let unsigned = Transaction { version: Version::TWO, lock_time: LockTime::ZERO, input, output };
        let mut psbt = Psbt::from_unsigned_tx(unsigned).map_err(unavailable)?;
        let origin = (self.master.fingerprint(&self.secp), self.path.clone());
        for (i, o) in plan.inputs.iter().enumerate() {
            let input = &mut psbt.inputs[i];
            input.witness_utxo = Some(TxOut { value: Amount::from_sat(o.sats), script_pubkey: self.script.clone() });
            input.bip32_derivation.insert(self.public.0, origin.clone());
        }
        psbt.sign(&self.master, &self.secp).map_err(|(_, e)| unavailable(format!("bitcoin: signing failed: {e:?}")))?;
        for input in &mut psbt.inputs {
            let sig = *input
                .partial_sigs
                .values()
                .next()
                .ok_or_else(|| unavailable("bitcoin: an input was left unsigned"))?;
            input.final_script_witness = Some(Witness::p2wpkh(&sig, &self.public.0));
            input.partial_sigs.clear();
            input.bip32_derivation.clear();
        }
        let tx = psbt.extract_tx().map_err(|e| unavailable(format!("bitcoin: {e}")))?;
        Ok(SignedTx { tx_hash: tx.compute_txid().to_string(), raw: serialize_hex(&tx) })
    }
}

impl Signers {
    /// Adds the live Bitcoin hot wallet when `[bitcoin]` names a node and a key. `deposits` are
    /// the live deposit keys (`addresses.live`): a hot wallet whose address is one of the deposit
    /// addresses is refused (see [`refuse_deposit_address`]), so the executor does not start.
    pub fn with_bitcoin(mut self, cfg: &BitcoinConfig, deposits: &AccountKeysConfig) -> Result<Signers, ChainError> {
        if !cfg.configured() {
            return Ok(self);
        }
        let Some(signer) = BitcoinSigner::load(cfg)? else { return Ok(self) };
        refuse_deposit_address(cfg, &signer.address(), deposits)?;
        let gate = domain::gates::find("bitcoin").ok_or_else(|| unavailable("no bitcoin gate"))?;
        tracing::info!(address = %signer.address(), "bitcoin payout hot wallet");
        self.insert(entity::Environment::Live, gate, std::sync::Arc::new(signer));
        Ok(self)
    }
}

/// Refuses a hot wallet whose address `hot` is one of the live deposit addresses (the key is
/// the deposit account's own seed): the change of every payout would land on an invoice's
/// address, where the scanner records it as that merchant's deposit and credits it. The error
/// names the configured key (`bitcoin.hot_wallet_key` or `bitcoin.hot_wallet_key_file`) and
/// `addresses.live.bitcoin_xpub`.
///
/// Deposit addresses are `<account>/0/<index>` of the configured account key; the hot wallet is
/// `m/84'/0'/0'/0/0` of its master key. The two meet only when the account key is the master's
/// own `m/84'/0'/0'` (below it every step is hardened, so no other account reaches it), and
/// then at index 0: comparing with deposit address 0 is the whole check.
fn refuse_deposit_address(cfg: &BitcoinConfig, hot: &Address, deposits: &AccountKeysConfig) -> Result<(), ChainError> {
    let only_bitcoin = AccountKeysConfig { bitcoin_xpub: deposits.bitcoin_xpub.clone(), ..Default::default() };
    let deriver = AddressDeriver::from_config(&only_bitcoin, ChainNet::Mainnet, "addresses.live")
        .map_err(|e| unavailable(e.to_string()))?;
    if !deriver.supports(AddressFamily::Bitcoin) {
        return Ok(());
    }
    let first = deriver.derive(AddressFamily::Bitcoin, 0).map_err(unavailable)?;
    if first.address != hot.to_string() {
        return Ok(());
    }
    let key = if cfg.hot_wallet_key.is_some() { "bitcoin.hot_wallet_key" } else { "bitcoin.hot_wallet_key_file" };
    Err(unavailable(format!(
        "{key}: the hot wallet's address {hot} is deposit address 0 of addresses.live.bitcoin_xpub \
         (the key is the deposit account's own): payout change sent there would be credited to \
         the invoice holding that address. Configure a hot wallet key of its own"
    )))
}

/// Which outputs a payout spends and what it pays.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub inputs: Vec<WalletOutput>,
    pub fee: u64,
    pub change: u64,
}

/// Virtual size of a P2WPKH-funded transaction with `inputs` inputs, one output with a
/// `to_script`-byte script and (with `change`) a P2WPKH change output: an upper bound (each
/// signature counted at its largest).
pub fn vsize(inputs: usize, to_script: usize, change: bool) -> u64 {
    // Version, locktime, counts and the segwit marker: 10.5 vB, rounded up; a P2WPKH input 68 vB;
    // an output 8 (value) + 1 (script length) + its script; P2WPKH change 31.
    let outputs = 9 + to_script as u64 + if change { 31 } else { 0 };
    11 + 68 * inputs as u64 + outputs
}

/// Largest outputs first, as few as cover `amount` and the fee at `rate`. The fee is capped by
/// `max_fee` (the payout's configured network fee: the merchant is never charged more than was
/// reserved), but never below 1 sat/vB, the relay minimum; change under the dust limit is left to
/// the fee when the cap allows it.
pub fn select(
    outputs: &[WalletOutput],
    amount: u64,
    rate: u64,
    max_fee: u64,
    to_script: usize,
) -> Result<Plan, ChainError> {
    let mut sorted: Vec<&WalletOutput> = outputs.iter().collect();
    sorted.sort_by(|a, b| b.sats.cmp(&a.sats).then_with(|| a.outpoint.cmp(&b.outpoint)));
    let mut total = 0u64;
    let mut inputs = Vec::new();
    for o in sorted {
        total = total.saturating_add(o.sats);
        inputs.push(o.clone());
        let n = inputs.len();
        let fee_at = |change: bool| -> Result<u64, ChainError> {
            let size = vsize(n, to_script, change);
            let fee = rate.saturating_mul(size).min(max_fee);
            if fee < size {
                return Err(unavailable(format!(
                    "bitcoin: the payout's network fee cap ({max_fee} sat) is below 1 sat/vB for its {size} vB transaction"
                )));
            }
            Ok(fee)
        };
        let fee = fee_at(true)?;
        if let Some(change) = total.checked_sub(amount).and_then(|r| r.checked_sub(fee))
            && change >= DUST_SATS
        {
            return Ok(Plan { inputs, fee, change });
        }
        // No change output: what is left over goes to the fee, within the cap.
        let fee = fee_at(false)?;
        if let Some(left) = total.checked_sub(amount).and_then(|r| r.checked_sub(fee))
            && fee + left <= max_fee
        {
            return Ok(Plan { inputs, fee: fee + left, change: 0 });
        }
    }
    Err(unavailable(format!(
        "bitcoin: the hot wallet's confirmed outputs not spent by other payouts hold {total} sat, \
         not enough for {amount} sat and its fee; top up the hot wallet or wait for its change to confirm"
    )))
}

/// A BIP32 extended private key, `xprv…` or (as BIP84 wallets export it) `zprv…`: the same key
/// under another version prefix.
pub fn parse_xprv(s: &str) -> Result<Xpriv, ChainError> {
    use bitcoin::base58;
    let refuse = || unavailable("bitcoin: the hot wallet key is not a BIP32 extended private key (xprv… or zprv…)");
    let mut data = base58::decode_check(s).map_err(|_| refuse())?;
    if data.len() == 78 && data[..4] == [0x04, 0xb2, 0x43, 0x0c] {
        data[..4].copy_from_slice(&[0x04, 0x88, 0xad, 0xe4]);
    }
    let master = Xpriv::decode(&data).map_err(|_| refuse())?;
    if master.network != bitcoin::NetworkKind::Main {
        return Err(unavailable("bitcoin: the hot wallet key is a testnet key (tprv…); payouts are on mainnet"));
    }
    Ok(master)
}

/// `<txid>:<vout>` as an outpoint.
fn outpoint(s: &str) -> Result<OutPoint, ChainError> {
    let (txid, vout) = s.split_once(':').ok_or_else(|| unavailable(format!("bad outpoint {s}")))?;
    Ok(OutPoint { txid: Txid::from_str(txid).map_err(unavailable)?, vout: vout.parse().map_err(unavailable)? })
}

/// Satoshis of a JSON amount in BTC (`0.5`), read from its decimal text: exact, no float.
pub fn sats(v: &Value) -> Option<u64> {
    to_sats(Decimal::from_str(&v.to_string()).ok()?)
}

/// Whole satoshis of a decimal BTC amount; `None` with more than 8 decimals.
fn to_sats(amount: Decimal) -> Option<u64> {
    let s = amount.checked_mul(Decimal::from(100_000_000u64))?;
    if !s.fract().is_zero() || s.is_sign_negative() {
        return None;
    }
    u64::try_from(s).ok()
}

#[async_trait::async_trait]
impl Signer for BitcoinSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        let funding = tx.funding.as_ref().ok_or_else(|| unavailable("bitcoin: signing needs the wallet's outputs"))?;
        let to = Address::from_str(tx.destination)
            .map_err(|e| unavailable(format!("bitcoin: destination: {e}")))?
            .require_network(Network::Bitcoin)
            .map_err(|e| unavailable(format!("bitcoin: destination: {e}")))?;
        let amount = to_sats(tx.amount)
            .ok_or_else(|| unavailable(format!("bitcoin: amount {} is not whole satoshis", tx.amount)))?;
        let max_fee = to_sats(tx.max_fee)
            .ok_or_else(|| unavailable(format!("bitcoin: fee cap {} is not whole satoshis", tx.max_fee)))?;
        self.build(&to, amount, max_fee, funding)
    }

    async fn funding(&self) -> Result<Option<Funding>, ChainError> {
        let outputs = self.confirmed_outputs().await?;
        let estimate = self.rpc.call("estimatesmartfee", json!([self.target_blocks])).await?;
        Ok(Some(Funding { scope: self.scope.clone(), outputs, fee_rate_sat_vb: self.fee_rate(&estimate) }))
    }

    fn spends(&self, raw: &str) -> Vec<String> {
        let Ok(tx) = deserialize_hex::<Transaction>(raw) else { return Vec::new() };
        tx.input.iter().map(|i| format!("{}:{}", i.previous_output.txid, i.previous_output.vout)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BIP84's test vector root ("abandon … about"), as `xprv` and as `zprv`.
    const XPRV: &str = "xprv9s21ZrQH143K3GJpoapnV8SFfukcVBSfeCficPSGfubmSFDxo1kuHnLisriDvSnRRuL2Qrg5ggqHKNVpxR86QEC8w35uxmGoggxtQTPvfUu";
    const ZPRV: &str = "zprvAWgYBBk7JR8Gjrh4UJQ2uJdG1r3WNRRfURiABBE3RvMXYSrRJL62XuezvGdPvG6GFBZduosCc1YP5wixPox7zhZLfiUm8aunE96BBa4Kei5";

    fn signer() -> BitcoinSigner {
        let cfg = BitcoinConfig { rpc_url: "http://node:8332".into(), ..Default::default() };
        BitcoinSigner::new(parse_xprv(XPRV).unwrap(), Rpc::with("Bitcoin RPC", &cfg.rpc_url, 1, 0, 1), &cfg).unwrap()
    }

    fn out(n: u8, sats: u64) -> WalletOutput {
        WalletOutput { outpoint: format!("{}:{}", format!("{n:02x}").repeat(32), n), sats }
    }

    const TO: &str = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";

    /// BIP84's account key of the same vector, `m/84'/0'/0'` of [`XPRV`], as deposit key.
    const ZPUB: &str = "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";

    /// `Signers::with_bitcoin` as the payout executor's start-up calls it: its error, if any.
    fn start_up(key: Option<&str>, key_file: Option<&std::path::Path>, deposit_xpub: &str) -> Result<(), String> {
        let cfg = BitcoinConfig {
            rpc_url: "http://node:8332".into(),
            hot_wallet_key: key.map(|k| domain::config::Redacted(k.to_owned())),
            hot_wallet_key_file: key_file.map(std::path::Path::to_owned),
            ..Default::default()
        };
        let deposits = AccountKeysConfig { bitcoin_xpub: Some(deposit_xpub.into()), ..Default::default() };
        match Signers::default().with_bitcoin(&cfg, &deposits) {
            Ok(signers) => {
                assert!(signers.get(entity::Environment::Live, "bitcoin").is_some());
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_hot_wallet_key_of_the_deposit_account_is_refused_at_start_up() {
        // The key whose m/84'/0'/0' is the deposit account: its hot wallet address is deposit
        // address 0 (bc1qcr8te…, BIP84's first receiving address).
        let err = start_up(Some(XPRV), None, ZPUB).unwrap_err();
        assert!(err.contains("bitcoin.hot_wallet_key:") && err.contains("addresses.live.bitcoin_xpub"), "{err}");
        assert!(err.contains("bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu"), "{err}");
        let err = start_up(Some(ZPRV), None, ZPUB).unwrap_err();
        assert!(err.contains("bitcoin.hot_wallet_key:"), "the same key as zprv: {err}");
        // From a file, the file's setting is named.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hot.key");
        std::fs::write(&file, format!("{XPRV}\n")).unwrap();
        let err = start_up(None, Some(&file), ZPUB).unwrap_err();
        assert!(err.contains("bitcoin.hot_wallet_key_file:"), "{err}");
        // A key of its own starts.
        let own = Xpriv::new_master(bitcoin::NetworkKind::Main, &[0x42; 32]).unwrap().to_string();
        assert_eq!(start_up(Some(&own), None, ZPUB), Ok(()));
        // So does the vector's key beside another deposit account (`m/84'/0'/1'`).
        let secp = Secp256k1::new();
        let other = parse_xprv(XPRV).unwrap().derive_priv(&secp, &DerivationPath::from_str("m/84'/0'/1'").unwrap());
        let other = bitcoin::bip32::Xpub::from_priv(&secp, &other.unwrap()).to_string();
        assert_eq!(start_up(Some(XPRV), None, &other), Ok(()));
    }

    #[test]
    fn the_largest_outputs_cover_amount_and_fee_with_change_back() {
        let outs = [out(1, 10_000), out(2, 500_000), out(3, 200_000)];
        let plan = select(&outs, 600_000, 10, 50_000, 22).unwrap();
        assert_eq!(plan.inputs.iter().map(|o| o.sats).collect::<Vec<_>>(), [500_000, 200_000]);
        assert_eq!(plan.fee, 10 * vsize(2, 22, true));
        assert_eq!(plan.change, 700_000 - 600_000 - plan.fee);
        // The fee is capped by the payout's network fee.
        let capped = select(&outs, 600_000, 10, 1_000, 22).unwrap();
        assert_eq!((capped.fee, capped.change), (1_000, 99_000));
    }

    #[test]
    fn dust_change_goes_to_the_fee_and_shortfalls_and_tiny_caps_are_errors() {
        let outs = [out(1, 100_000)];
        let fee = 2 * vsize(1, 22, false);
        let plan = select(&outs, 100_000 - fee - 100, 2, 10_000, 22).unwrap();
        assert_eq!((plan.change, plan.fee), (0, fee + 100), "100 sat of change would be dust");
        let short = select(&outs, 100_000, 2, 10_000, 22).unwrap_err().to_string();
        assert!(short.contains("not enough"), "{short}");
        let cap = select(&outs, 1_000, 50, 100, 22).unwrap_err().to_string();
        assert!(cap.contains("fee cap"), "{cap}");
    }

    #[test]
    fn the_fee_rate_is_the_nodes_estimate_or_the_fallback_within_the_cap() {
        let s = signer();
        assert_eq!(s.fee_rate(&json!({"feerate": 0.00012345, "blocks": 3})), 13, "12.345 sat/vB, rounded up");
        assert_eq!(s.fee_rate(&json!({"errors": ["Insufficient data or no feerate found"], "blocks": 0})), 10);
        assert_eq!(s.fee_rate(&json!({"feerate": 0.05})), 500, "capped by max_fee_rate_sat_vb");
    }

    #[tokio::test]
    async fn a_signed_payout_pays_exactly_spends_what_it_lists_signals_rbf_and_stays_under_its_cap() {
        let s = signer();
        // BIP84's first receiving address of the vector.
        assert_eq!(s.address().to_string(), "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", "m/84'/0'/0'/0/0");
        assert_eq!(parse_xprv(ZPRV).unwrap(), parse_xprv(XPRV).unwrap(), "zprv is the same key");
        let tprv = Xpriv::new_master(bitcoin::NetworkKind::Test, &[7; 32]).unwrap().to_string();
        assert!(parse_xprv(&tprv).unwrap_err().to_string().contains("testnet"));
        assert!(parse_xprv("xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD265TMg7usUDFdp6W1EGMcet8").is_err());
        let funding =
            Funding { scope: s.scope.clone(), outputs: vec![out(1, 300_000), out(2, 50_000_000)], fee_rate_sat_vb: 7 };
        let gate = domain::gates::find("bitcoin").unwrap();
        let payout = PayoutTx {
            gate,
            payout_id: uuid::Uuid::nil(),
            destination: TO,
            destination_tag: None,
            amount: Decimal::from_str("0.1234").unwrap(),
            max_fee: Decimal::from_str("0.0001").unwrap(),
            nonce: None,
            fees: None,
            funding: Some(funding),
        };
        let signed = s.sign(&payout).await.unwrap();
        let tx: Transaction = deserialize_hex(&signed.raw).unwrap();
        assert_eq!(signed.tx_hash, tx.compute_txid().to_string());
        assert_eq!(s.spends(&signed.raw), [format!("{}:2", "02".repeat(32))]);
        assert_eq!(tx.output[0].value.to_sat(), 12_340_000);
        assert_eq!(tx.output[0].script_pubkey, Address::from_str(TO).unwrap().assume_checked().script_pubkey());
        assert_eq!(tx.output[1].script_pubkey, s.script, "change back to the hot wallet");
        let fee = 50_000_000 - 12_340_000 - tx.output[1].value.to_sat();
        assert!(fee <= 10_000 && fee >= 7 * tx.vsize() as u64, "fee {fee} for {} vB", tx.vsize());
        assert!(tx.input.iter().all(|i| i.sequence.is_rbf() && i.witness.len() == 2));
        // The same signer never signs with more decimals than satoshis.
        let bad = PayoutTx { amount: Decimal::from_str("0.123456789").unwrap(), ..payout };
        assert!(s.sign(&bad).await.is_err());
    }
}
