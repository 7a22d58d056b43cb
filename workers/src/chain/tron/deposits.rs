//! Sweeping the TRON deposit addresses (payout executor only): the deposit account's extended
//! private key (`[tron] deposit_key_file`, the account `m/44'/195'/0'` whose xpub is
//! `addresses.live.tron_xpub`), whose external chain (`/0/<index>`) holds every TRON deposit
//! address, and what a sweep needs of the node to price its transactions:
//!
//! - Bandwidth: a transaction takes its serialized size plus 64 bytes (java-tron's room for its
//!   result) of the owner's bandwidth; what free or staked bandwidth does not cover is burnt at
//!   `getTransactionFee` sun a byte (`/wallet/getchainparameters`). The most a transaction can
//!   burn for it is therefore known once it is signed.
//! - Energy: a TRC-20 `transfer` costs what `/wallet/triggerconstantcontract` says it used
//!   (`energy_used`, run against the node's current state: a receiver holding none of the token
//!   costs more), burnt at `getEnergyFee` sun a unit when the owner stakes none.

use std::str::FromStr;
use std::sync::Arc;

use alloy_primitives::U256;
use alloy_signer_local::PrivateKeySigner;
use serde_json::{Value, json};

use super::TronApi;
use super::tx::{Call, Raw};
use super::wallet::{owner_of, sign_raw, terms};
use crate::chain::signer::Fees;
use crate::chain::{ChainError, SignedTx};
use domain::chain::address::AddressFamily;
use domain::chain::address::tron::{account_id_of, address_of};
use domain::config::TronConfig;
use domain::gates::{self, GATES};

/// The bytes java-tron adds to a transaction's serialized size when it charges bandwidth
/// (`Constant.MAX_RESULT_SIZE_IN_TX`).
pub const RESULT_BYTES: u64 = 64;

fn unavailable(message: impl Into<String>) -> ChainError {
    ChainError::Unavailable(message.into())
}

/// The network's prices (`/wallet/getchainparameters`), in sun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prices {
    /// Sun burnt for one unit of energy (`getEnergyFee`).
    pub energy: u64,
    /// Sun burnt for one byte of bandwidth (`getTransactionFee`).
    pub byte: u64,
}

impl Prices {
    /// Reads `getEnergyFee` and `getTransactionFee` from a `/wallet/getchainparameters` answer;
    /// either missing is an error (never taken for free).
    pub fn of(answer: &Value) -> Result<Prices, ChainError> {
        let param = |key: &str| {
            answer["chainParameter"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["key"] == key))
                .and_then(|p| p["value"].as_u64())
                .ok_or_else(|| unavailable(format!("no {key} in the TRON chain parameters: {answer}")))
        };
        Ok(Prices { energy: param("getEnergyFee")?, byte: param("getTransactionFee")? })
    }

    /// The most `tx` can burn for its bandwidth (none of it free), in sun.
    pub fn bandwidth(&self, tx: &SignedTx) -> Option<u64> {
        let bytes = u64::try_from(tx.raw.len() / 2).ok()?.checked_add(RESULT_BYTES)?;
        bytes.checked_mul(self.byte)
    }

    /// What `energy` units burn, in sun.
    pub fn energy(&self, energy: u64) -> Option<u64> {
        energy.checked_mul(self.energy)
    }
}

/// The TRX (sun) a deposit address still needs to pay `burn`, holding `holds`: none when it
/// holds enough.
pub fn top_up(burn: u64, holds: u64) -> u64 {
    burn.saturating_sub(holds)
}

/// The deposit account's key and the node, for sweeping.
pub struct TronDeposits {
    external: bitcoin::bip32::Xpriv,
    secp: bitcoin::secp256k1::Secp256k1<bitcoin::secp256k1::All>,
    api: Arc<TronApi>,
    usdt: Option<[u8; 20]>,
    expiration_ms: u64,
}

impl TronDeposits {
    /// `None` without `deposit_key_file`. `expected_first` is the configured xpub's index-0
    /// address: a key that does not derive it is refused (sweeping with another account's key
    /// would sign for addresses that hold nothing, or worse, someone else's).
    pub fn load(cfg: &TronConfig, expected_first: Option<&str>) -> Result<Option<TronDeposits>, ChainError> {
        let Some(path) = cfg.deposit_key_file.as_deref() else { return Ok(None) };
        let bad = |why: String| unavailable(format!("tron.deposit_key_file: {why}"));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let usdt = GATES
            .iter()
            .find(|g| g.family == AddressFamily::Tron && g.is_token)
            .and_then(|g| cfg.usdt_contract.as_deref().or_else(|| gates::token_contract(g)))
            .and_then(account_id_of);
        let keys = TronDeposits::from_xprv(&text, TronApi::new(cfg), usdt, cfg.expiration_secs * 1_000)
            .map_err(|e| bad(e.to_string()))?;
        let first = keys.address(0)?;
        match expected_first {
            Some(want) if want == first => Ok(Some(keys)),
            Some(want) => Err(bad(format!(
                "derives {first} at index 0, but addresses.live.tron_xpub derives {want}: not the same account"
            ))),
            None => Err(bad("addresses.live.tron_xpub is not configured".into())),
        }
    }

    fn from_xprv(
        text: &str,
        api: TronApi,
        usdt: Option<[u8; 20]>,
        expiration_ms: u64,
    ) -> Result<TronDeposits, ChainError> {
        let account = bitcoin::bip32::Xpriv::from_str(text.trim()).map_err(|_| unavailable("not an xprv"))?;
        if account.depth != 3 {
            return Err(unavailable(format!(
                "expected the account-level key m/44'/195'/0' (depth 3), got depth {}",
                account.depth
            )));
        }
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let external = account
            .derive_priv(&secp, &[bitcoin::bip32::ChildNumber::Normal { index: 0 }])
            .map_err(|e| unavailable(e.to_string()))?;
        Ok(TronDeposits { external, secp, api: Arc::new(api), usdt, expiration_ms })
    }

    /// The private key of deposit address `index`.
    pub fn key(&self, index: u32) -> Result<PrivateKeySigner, ChainError> {
        let failed = |e: String| unavailable(format!("deposit index {index}: {e}"));
        let child = bitcoin::bip32::ChildNumber::from_normal_idx(index).map_err(|e| failed(e.to_string()))?;
        let xpriv = self.external.derive_priv(&self.secp, &[child]).map_err(|e| failed(e.to_string()))?;
        PrivateKeySigner::from_slice(&xpriv.private_key.secret_bytes()).map_err(|e| failed(e.to_string()))
    }

    /// Deposit address `index` (`T…`).
    pub fn address(&self, index: u32) -> Result<String, ChainError> {
        Ok(address_of(&owner_of(&self.key(index)?)))
    }

    /// The network's energy and bandwidth prices.
    pub async fn prices(&self) -> Result<Prices, ChainError> {
        Prices::of(&self.api.call("/wallet/getchainparameters", json!({})).await?)
    }

    /// The energy `owner`'s USDT `transfer(to, units)` uses now, as the node runs it without
    /// sending it.
    pub async fn transfer_energy(&self, owner: &str, to: &[u8; 20], units: U256) -> Result<u64, ChainError> {
        let contract = self.usdt.ok_or_else(|| unavailable("no TRC-20 USDT contract configured"))?;
        let body = json!({
            "owner_address": owner,
            "contract_address": address_of(&contract),
            "function_selector": "transfer(address,uint256)",
            "parameter": format!("{:0>64}{:064x}", hex::encode(to), units),
            "visible": true,
        });
        let answer = self.api.call("/wallet/triggerconstantcontract", body).await?;
        if answer["result"]["result"] != true {
            return Err(unavailable(format!("the USDT transfer's energy was not estimated: {answer}")));
        }
        answer["energy_used"]
            .as_u64()
            .filter(|e| *e > 0)
            .ok_or_else(|| unavailable(format!("no energy_used in the estimate: {answer}")))
    }

    /// `call` from deposit address `key`, signed now (the newest block its reference).
    pub async fn sign(&self, key: &PrivateKeySigner, call: Call) -> Result<SignedTx, ChainError> {
        let Fees::Tron { ref_block, ref_block_hash, expiration_ms, timestamp_ms } =
            terms(&self.api, self.expiration_ms).await?
        else {
            return Err(unavailable("no TRON reference block"));
        };
        let raw = Raw { owner: owner_of(key), call, ref_block, ref_block_hash, expiration_ms, timestamp_ms };
        Ok(sign_raw(key, &raw))
    }

    /// `call` signed with the terms of an earlier signature (same reference block, same
    /// expiration): its size is what a sweep is priced by before it is signed for real.
    pub fn sign_like(&self, key: &PrivateKeySigner, call: Call, like: &SignedTx) -> Result<SignedTx, ChainError> {
        let (raw, _) = super::tx::decode(&like.raw).map_err(unavailable)?;
        Ok(sign_raw(key, &Raw { call, owner: owner_of(key), ..raw }))
    }

    /// The USDT contract's account id.
    pub fn usdt(&self) -> Result<[u8; 20], ChainError> {
        self.usdt.ok_or_else(|| unavailable("no TRC-20 USDT contract configured"))
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use bitcoin::bip32::{DerivationPath, Xpriv, Xpub};

    use super::*;

    fn account(seed: u8) -> (Xpriv, String) {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let master = Xpriv::new_master(bitcoin::NetworkKind::Main, &[seed; 32]).unwrap();
        let account = master.derive_priv(&secp, &DerivationPath::from_str("m/44'/195'/0'").unwrap()).unwrap();
        let xpub = Xpub::from_priv(&secp, &account).to_string();
        (account, xpub)
    }

    fn first_of(xpub: &str) -> String {
        let cfg = domain::chain::address::AccountKeysConfig { tron_xpub: Some(xpub.into()), ..Default::default() };
        let d = domain::chain::address::AddressDeriver::from_config(
            &cfg,
            domain::chain::address::ChainNet::Mainnet,
            "live",
        )
        .unwrap();
        d.derive(AddressFamily::Tron, 0).unwrap().address
    }

    fn config(dir: &std::path::Path, key: &Xpriv) -> TronConfig {
        let file = dir.join("deposit.xprv");
        std::fs::write(&file, key.to_string()).unwrap();
        TronConfig { deposit_key_file: Some(file), ..Default::default() }
    }

    #[test]
    fn the_deposit_key_must_derive_the_configured_xpubs_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let (ours, xpub) = account(0x71);
        let (theirs, _) = account(0x72);
        let first = first_of(&xpub);
        let keys = TronDeposits::load(&config(dir.path(), &ours), Some(&first)).unwrap().unwrap();
        assert_eq!(keys.address(0).unwrap(), first);
        let err = TronDeposits::load(&config(dir.path(), &theirs), Some(&first)).err().unwrap().to_string();
        assert!(err.contains("not the same account") && err.contains("tron.deposit_key_file"), "{err}");
        let err = TronDeposits::load(&config(dir.path(), &ours), None).err().unwrap().to_string();
        assert!(err.contains("tron_xpub is not configured"), "{err}");
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let deeper = ours.derive_priv(&secp, &[bitcoin::bip32::ChildNumber::Normal { index: 0 }]).unwrap();
        let err = TronDeposits::load(&config(dir.path(), &deeper), Some(&first)).err().unwrap().to_string();
        assert!(err.contains("depth 4"), "{err}");
        assert!(TronDeposits::load(&TronConfig::default(), Some(&first)).unwrap().is_none());
    }

    #[test]
    fn energy_and_bandwidth_are_priced_from_the_chain_parameters_and_topped_up_to_what_is_lacking() {
        let answer = json!({"chainParameter": [
            {"key": "getMaintenanceTimeInterval", "value": 21_600_000},
            {"key": "getTransactionFee", "value": 1_000},
            {"key": "getEnergyFee", "value": 420},
        ]});
        let prices = Prices::of(&answer).unwrap();
        assert_eq!(prices, Prices { energy: 420, byte: 1_000 });
        assert!(Prices::of(&json!({"chainParameter": [{"key": "getEnergyFee", "value": 420}]})).is_err());
        assert_eq!(prices.energy(14_650), Some(6_153_000));
        assert_eq!(prices.energy(u64::MAX), None);
        // 200 signed bytes and the result's 64.
        let tx = SignedTx { tx_hash: String::new(), raw: "00".repeat(200) };
        assert_eq!(prices.bandwidth(&tx), Some(264_000));
        assert_eq!(top_up(6_417_000, 0), 6_417_000);
        assert_eq!(top_up(6_417_000, 417_000), 6_000_000);
        assert_eq!(top_up(6_417_000, 7_000_000), 0);
    }
}
