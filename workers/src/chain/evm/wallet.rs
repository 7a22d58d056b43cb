//! Payout hot wallets on EVM networks: EIP-1559 transfers (native or ERC-20) signed with a
//! key loaded only in the payout executor, and replacement fees.

use std::str::FromStr;
use std::sync::Arc;

use alloy_primitives::{Address, U256};
use rust_decimal::Decimal;
use serde_json::json;

use super::super::signer::{Fees, GasFees, NonceAccount, PayoutTx, Signer, Signers};
use super::super::{ChainError, SignedTx};
use super::Token;
use super::rpc::{Rpc, hex_u64, hex_u256};
use domain::chain::address::AddressFamily;
use domain::chain::evm_tx::signed_terms;
use domain::config::{EvmConfig, EvmNetworkConfig};
use domain::gates::{self, GATES, Gate};

/// key. The key is loaded only where signers are built (the payout executor).
pub struct HotWallet {
    key: alloy_signer_local::PrivateKeySigner,
    network: String,
    chain_id: u64,
    rpc: Arc<Rpc>,
    max_fee_per_gas: u128,
    priority_fee: u128,
    token_gas_limit: u64,
}

impl HotWallet {
    pub fn address(&self) -> String {
        format!("{:#x}", self.key.address())
    }

    /// (`maxFeePerGas`, `maxPriorityFeePerGas`): twice the latest base fee plus the tip,
    /// capped by the configured per-gas cap and by `cap_total` over `gas`.
    async fn fees(&self, gas: u64, cap_total: Option<u128>) -> Result<GasFees, ChainError> {
        let base = self.base_fee().await?;
        let mut max_fee = base.saturating_mul(2).saturating_add(self.priority_fee).min(self.max_fee_per_gas);
        if let Some(total) = cap_total {
            max_fee = max_fee.min(total / u128::from(gas.max(1)));
        }
        if max_fee < base {
            return Err(ChainError::Unavailable(format!(
                "the base fee ({base} wei/gas) is above the fee cap ({max_fee} wei/gas); the payout waits"
            )));
        }
        Ok(GasFees { max_fee_per_gas: max_fee, priority_fee_per_gas: self.priority_fee.min(max_fee) })
    }

    async fn base_fee(&self) -> Result<u128, ChainError> {
        let block = self.rpc.call("eth_getBlockByNumber", json!(["latest", false])).await?;
        Ok(hex_u256(&block["baseFeePerGas"], "baseFeePerGas")?.try_into().unwrap_or(u128::MAX))
    }

    /// Signs `unsigned` locally (no network access).
    fn sign_local(&self, unsigned: alloy_consensus::TxEip1559) -> Result<SignedTx, ChainError> {
        use alloy_consensus::{SignableTransaction, TxEnvelope};
        use alloy_eips::eip2718::Encodable2718;
        use alloy_signer::SignerSync;
        let signature = self
            .key
            .sign_hash_sync(&unsigned.signature_hash())
            .map_err(|e| ChainError::Unavailable(format!("signing: {e}")))?;
        let signed = unsigned.into_signed(signature);
        let tx_hash = format!("{:#x}", signed.hash());
        let raw = format!("0x{}", hex::encode(TxEnvelope::Eip1559(signed).encoded_2718()));
        Ok(SignedTx { tx_hash, raw })
    }
}

impl Signers {
    /// Adds the hot wallets of `cfg`'s live EVM networks (those with a key configured).
    pub fn with_evm(mut self, cfg: &EvmConfig) -> Result<Signers, ChainError> {
        for (gate, signer) in signers(cfg)? {
            self.insert(entity::Environment::Live, gate, signer);
        }
        Ok(self)
    }
}

/// The fees of a replacement: twice the original's max fee and tip (nodes require at least
/// +10 %), at least the current market (twice the base fee plus the configured tip), bounded
/// by the configured per-gas cap. Refused when the cap leaves no room for a +10 % bump.
pub fn bumped_fees(original: GasFees, market: GasFees, cap: u128) -> Result<GasFees, ChainError> {
    let max_fee = original.max_fee_per_gas.saturating_mul(2).max(market.max_fee_per_gas).min(cap);
    let tip = original.priority_fee_per_gas.saturating_mul(2).max(market.priority_fee_per_gas).min(max_fee);
    let enough = |new: u128, old: u128| new >= old.saturating_add(old.div_ceil(10)).max(old.saturating_add(1));
    if !enough(max_fee, original.max_fee_per_gas) || !enough(tip, original.priority_fee_per_gas) {
        return Err(ChainError::Unavailable(format!(
            "the fee cap ({cap} wei/gas) leaves no room to replace a transaction paying {} wei/gas (tip {}); raise max_fee_per_gas_gwei",
            original.max_fee_per_gas, original.priority_fee_per_gas
        )));
    }
    Ok(GasFees { max_fee_per_gas: max_fee, priority_fee_per_gas: tip })
}

/// Signs one gate's payouts from a hot wallet.
pub struct EvmSigner {
    wallet: Arc<HotWallet>,
    gate: &'static Gate,
    token: Option<Token>,
}

fn base_units(amount: Decimal, decimals: u32) -> Result<U256, ChainError> {
    let scaled = amount
        .checked_mul(Decimal::from_i128_with_scale(10i128.pow(decimals.min(28)), 0))
        .filter(|v| v.fract().is_zero() && !v.is_sign_negative())
        .ok_or_else(|| ChainError::Unavailable(format!("{amount} has more than {decimals} decimals")))?;
    U256::from_str(&scaled.trunc().normalize().to_string()).map_err(|e| ChainError::Unavailable(e.to_string()))
}

impl EvmSigner {
    /// (receiver of the call, value, input, gas limit) of a payout of `amount` to `to`.
    fn call(&self, to: Address, amount: Decimal) -> Result<(Address, U256, alloy_primitives::Bytes, u64), ChainError> {
        use alloy_primitives::Bytes;
        Ok(match self.token {
            None => (to, base_units(amount, self.gate.decimals)?, Bytes::new(), 21_000u64),
            Some(t) => {
                let units = base_units(amount, t.decimals)?;
                let mut data = Vec::with_capacity(68);
                data.extend_from_slice(&[0xa9, 0x05, 0x9c, 0xbb]); // transfer(address,uint256)
                data.extend_from_slice(&[0u8; 12]);
                data.extend_from_slice(to.as_slice());
                data.extend_from_slice(&units.to_be_bytes::<32>());
                (t.contract, U256::ZERO, Bytes::from(data), self.wallet.token_gas_limit)
            }
        })
    }

    fn destination(tx: &PayoutTx<'_>) -> Result<Address, ChainError> {
        Address::from_str(tx.destination).map_err(|e| ChainError::Unavailable(format!("destination: {e}")))
    }
}

#[async_trait::async_trait]
impl Signer for EvmSigner {
    async fn sign(&self, tx: &PayoutTx<'_>) -> Result<SignedTx, ChainError> {
        use alloy_consensus::TxEip1559;
        use alloy_primitives::TxKind;

        let nonce = tx.nonce.ok_or_else(|| ChainError::Unavailable("an EVM payout needs a nonce".into()))?;
        let fees = tx.fees.ok_or_else(|| ChainError::Unavailable("an EVM payout needs its fees".into()))?.gas()?;
        let (call_to, value, input, gas) = self.call(Self::destination(tx)?, tx.amount)?;
        self.wallet.sign_local(TxEip1559 {
            chain_id: self.wallet.chain_id,
            nonce,
            gas_limit: gas,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.priority_fee_per_gas,
            to: TxKind::Call(call_to),
            value,
            access_list: Default::default(),
            input,
        })
    }

    async fn fees(&self, tx: &PayoutTx<'_>) -> Result<Option<Fees>, ChainError> {
        let (_, _, _, gas) = self.call(Self::destination(tx)?, tx.amount)?;
        // A native payout's fee is paid in its own asset: the configured estimate caps it.
        let cap_total = match self.token {
            None => base_units(tx.max_fee, self.gate.decimals)?.try_into().ok(),
            Some(_) => None,
        };
        self.wallet.fees(gas, cap_total).await.map(|f| Some(Fees::Gas(f)))
    }

    fn signed_terms(&self, raw: &str) -> Option<(u64, Fees)> {
        signed_terms(raw).map(|(nonce, fees)| (nonce, Fees::Gas(fees)))
    }

    async fn replacement_fees(&self, original: Fees) -> Result<Fees, ChainError> {
        let market = self.wallet.fees(21_000, None).await?;
        bumped_fees(original.gas()?, market, self.wallet.max_fee_per_gas).map(Fees::Gas)
    }

    async fn sign_replacement(&self, nonce: u64, fees: Fees) -> Result<SignedTx, ChainError> {
        use alloy_consensus::TxEip1559;
        use alloy_primitives::{Bytes, TxKind};
        let fees = fees.gas()?;
        self.wallet.sign_local(TxEip1559 {
            chain_id: self.wallet.chain_id,
            nonce,
            gas_limit: 21_000,
            max_fee_per_gas: fees.max_fee_per_gas,
            max_priority_fee_per_gas: fees.priority_fee_per_gas,
            to: TxKind::Call(self.wallet.key.address()),
            value: U256::ZERO,
            access_list: Default::default(),
            input: Bytes::new(),
        })
    }

    async fn nonce_account(&self) -> Result<Option<NonceAccount>, ChainError> {
        let address = self.wallet.address();
        let v = self.wallet.rpc.call("eth_getTransactionCount", json!([address, "pending"])).await?;
        Ok(Some(NonceAccount {
            scope: format!("{}:{address}", self.wallet.network),
            chain_next: hex_u64(&v, "nonce")?,
        }))
    }
}

fn load_key(network: &str, net: &EvmNetworkConfig) -> Result<Option<alloy_signer_local::PrivateKeySigner>, ChainError> {
    let section = format!("evm.networks.{network}");
    let file = net.hot_wallet_key_file.as_deref();
    let Some(text) = super::super::signer::hot_wallet_secret(&section, net.hot_wallet_key.as_ref(), file)? else {
        return Ok(None);
    };
    alloy_signer_local::PrivateKeySigner::from_str(&text).map(Some).map_err(|_| {
        ChainError::Unavailable(format!("evm.networks.{network}: the hot wallet key is not a 32-byte hex key"))
    })
}

/// The deposit account's keys, for sweeping: the account-level xprv (`m/44'/60'/0'`) of
/// `evm.deposit_key_file`, whose external chain (`/0/<index>`) holds every EVM deposit address.
/// Loaded only by the payout executor's process; [`DepositKeys::load`] refuses a key that does
/// not derive the configured xpub's first address.
pub struct DepositKeys {
    external: bitcoin::bip32::Xpriv,
    secp: bitcoin::secp256k1::Secp256k1<bitcoin::secp256k1::All>,
}

impl DepositKeys {
    /// `None` when no deposit key is configured. `expected_first` is the xpub's index-0 address.
    pub fn load(cfg: &EvmConfig, expected_first: Option<&str>) -> Result<Option<DepositKeys>, ChainError> {
        let Some(path) = cfg.deposit_key_file.as_deref() else { return Ok(None) };
        let bad = |why: String| ChainError::Unavailable(format!("evm.deposit_key_file: {why}"));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let account = bitcoin::bip32::Xpriv::from_str(text.trim()).map_err(|_| bad("not an xprv".into()))?;
        if account.depth != 3 {
            return Err(bad(format!(
                "expected the account-level key m/44'/60'/0' (depth 3), got depth {}",
                account.depth
            )));
        }
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let external = account
            .derive_priv(&secp, &[bitcoin::bip32::ChildNumber::Normal { index: 0 }])
            .map_err(|e| bad(e.to_string()))?;
        let keys = DepositKeys { external, secp };
        let first = format!("{:#x}", keys.key(0)?.address());
        match expected_first {
            Some(want) if want.eq_ignore_ascii_case(&first) => Ok(Some(keys)),
            Some(want) => Err(bad(format!(
                "derives {first} at index 0, but addresses.live.evm_xpub derives {want}: not the same account"
            ))),
            None => Err(bad("addresses.live.evm_xpub is not configured".into())),
        }
    }

    /// The private key of deposit address `index`.
    pub fn key(&self, index: u32) -> Result<alloy_signer_local::PrivateKeySigner, ChainError> {
        let child = bitcoin::bip32::ChildNumber::from_normal_idx(index)
            .map_err(|e| ChainError::Unavailable(format!("deposit index {index}: {e}")))?;
        let xpriv = self
            .external
            .derive_priv(&self.secp, &[child])
            .map_err(|e| ChainError::Unavailable(format!("deposit index {index}: {e}")))?;
        alloy_signer_local::PrivateKeySigner::from_slice(&xpriv.private_key.secret_bytes())
            .map_err(|e| ChainError::Unavailable(format!("deposit index {index}: {e}")))
    }
}

/// A signer sending `gate`'s asset from `key` (a deposit address's, for its sweep) on the
/// gate's network, with the network's fee settings; `None` when the network or the token is
/// not configured. Its nonce account is the address's own (`<network>:<address>`).
pub fn signer_for_key(
    cfg: &EvmConfig,
    gate: &'static Gate,
    key: alloy_signer_local::PrivateKeySigner,
) -> Option<Arc<dyn Signer>> {
    let net = cfg.networks.get(gate.network)?;
    let wallet = Arc::new(wallet_of(key, gate.network, net, gates::evm_chain_id(gate))?);
    let token = match gate.is_token {
        true => {
            let (contract, decimals) = cfg.token(gate)?;
            Some(Token { contract, decimals })
        }
        false => None,
    };
    Some(Arc::new(EvmSigner { wallet, gate, token }))
}

/// The gas a transfer of `gate`'s asset is signed with (21 000 for the native coin, the
/// network's `token_gas_limit` for a token).
pub fn transfer_gas(cfg: &EvmConfig, gate: &Gate) -> u64 {
    match (gate.is_token, cfg.networks.get(gate.network)) {
        (true, Some(net)) => net.token_gas_limit,
        _ => 21_000,
    }
}

fn wallet_of(
    key: alloy_signer_local::PrivateKeySigner,
    network: &str,
    net: &EvmNetworkConfig,
    default_chain_id: Option<u64>,
) -> Option<HotWallet> {
    let gwei = 1_000_000_000u128;
    Some(HotWallet {
        key,
        network: network.to_owned(),
        chain_id: net.chain_id.or(default_chain_id)?,
        rpc: Arc::new(Rpc::new(net)),
        max_fee_per_gas: u128::from(net.max_fee_per_gas_gwei).saturating_mul(gwei),
        priority_fee: u128::from(net.priority_fee_gwei).saturating_mul(gwei),
        token_gas_limit: net.token_gas_limit,
    })
}

/// A gate and the signer of its payouts.
pub type GateSigner = (&'static Gate, Arc<dyn Signer>);

/// The payout signers of `cfg`'s networks that have a hot wallet key: one per EVM gate.
pub fn signers(cfg: &EvmConfig) -> Result<Vec<GateSigner>, ChainError> {
    let mut out: Vec<GateSigner> = Vec::new();
    for (network, net) in &cfg.networks {
        let Some(key) = load_key(network, net)? else { continue };
        let gates: Vec<&'static Gate> =
            GATES.iter().filter(|g| g.network == network && g.family == AddressFamily::Evm).collect();
        let Some(wallet) = wallet_of(key, network, net, gates.first().and_then(|g| gates::evm_chain_id(g))) else {
            continue;
        };
        let wallet = Arc::new(wallet);
        for gate in gates {
            let token = if gate.is_token {
                let Some((contract, decimals)) = cfg.token(gate) else { continue };
                Some(Token { contract, decimals })
            } else {
                None
            };
            out.push((gate, Arc::new(EvmSigner { wallet: wallet.clone(), gate, token }) as Arc<dyn Signer>));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payout_amounts_become_exact_base_units() {
        assert_eq!(base_units(Decimal::new(15, 2), 18).unwrap(), U256::from(150_000_000_000_000_000u128));
        assert_eq!(base_units(Decimal::new(25, 0), 6).unwrap(), U256::from(25_000_000u64));
        assert!(base_units(Decimal::new(1, 7), 6).is_err(), "more decimals than the token has");
        assert!(base_units(Decimal::new(-1, 0), 6).is_err());
    }

    #[test]
    fn replacement_fees_double_the_original_within_the_cap() {
        let gwei = 1_000_000_000u128;
        let f = |m: u128, t: u128| GasFees { max_fee_per_gas: m * gwei, priority_fee_per_gas: t * gwei };
        assert_eq!(bumped_fees(f(10, 2), f(5, 2), 200 * gwei).unwrap(), f(20, 4));
        assert_eq!(bumped_fees(f(10, 2), f(50, 2), 200 * gwei).unwrap(), f(50, 4), "at least the market");
        assert_eq!(bumped_fees(f(10, 2), f(5, 2), 15 * gwei).unwrap(), f(15, 4), "bounded by the cap");
        assert!(bumped_fees(f(10, 2), f(5, 2), 10 * gwei).is_err(), "no room under the cap");
    }

    #[tokio::test]
    async fn signed_terms_read_back_the_nonce_and_fees() {
        let key = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
        let wallet = HotWallet {
            key: alloy_signer_local::PrivateKeySigner::from_str(key).unwrap(),
            network: "ethereum".into(),
            chain_id: 1,
            rpc: Arc::new(Rpc::new(&EvmNetworkConfig::default())),
            max_fee_per_gas: 1,
            priority_fee: 1,
            token_gas_limit: 1,
        };
        let signer = EvmSigner { wallet: Arc::new(wallet), gate: gates::find("ethereum").unwrap(), token: None };
        let fees = Fees::Gas(GasFees { max_fee_per_gas: 7, priority_fee_per_gas: 3 });
        let tx = signer.sign_replacement(42, fees).await.unwrap();
        assert_eq!(signer_terms(&signer, &tx.raw), Some((42, fees)));
    }

    fn signer_terms(s: &EvmSigner, raw: &str) -> Option<(u64, Fees)> {
        Signer::signed_terms(s, raw)
    }
}
