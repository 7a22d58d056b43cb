//! TRON sweeping (TRX, and TRC-20 USDT with its energy topped up from the hot wallet), in a
//! round of its own per gate: the gate's open sweeps are followed, then new ones planned with
//! the generic planner (`plan`: every settled deposit address holding at least `min_sweep`).
//!
//! With the module's guarantees, as TRON has them:
//! - **No nonce.** A transaction carries a reference block and an expiration instead; every one
//!   (the hot wallet's top-up, the deposit address's sweep) is still signed and stored on its
//!   row (guarded on the status) before it is sent, and a stored one the node does not know is
//!   sent again as it is. One whose expiration passed unseen (`Outgoing::Expired`, judged by the
//!   adapter at the solidified block) can never enter a block: its sweep fails, and the next
//!   plan takes the address again (a top-up that did arrive is not sent twice: the address then
//!   holds it, and only what it lacks is topped up).
//! - **TRX**: one `TransferContract` of the balance less the most its bandwidth can burn (the
//!   signed size, plus java-tron's 64 bytes, at `getTransactionFee`). An activated account may
//!   have free bandwidth and burn less: what was burnt is read from the transaction info at the
//!   gate's confirmations and booked as the house's `sweep_fee`, the rest stays on the address.
//! - **USDT**: the address first gets from the hot wallet exactly what the token transfer can
//!   burn (its energy as `/wallet/triggerconstantcontract` runs it now, at `getEnergyFee`, plus
//!   its bandwidth), less the TRX it holds; once that top-up is in a block, the transfer is
//!   signed (`fee_limit`: the TRX the address holds, at most `tron.fee_limit_sun`) and the
//!   top-up and its fee are the house's `gas_topup`. Once the transfer is confirmed, what the
//!   top-up left over (bandwidth the address had free) is swept back to the hot wallet
//!   (`parent_id`), booked back as `gas_topup`.

use std::sync::Arc;

use alloy_primitives::U256;
use alloy_signer_local::PrivateKeySigner;
use entity::{Environment, SweepStatus, sweep};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

use super::{SweepError, Sweeper};
use crate::chain::signer::{PayoutTx, base_units};
use crate::chain::tron::deposits::{Prices, TronDeposits, top_up};
use crate::chain::tron::tx::{self as tron_tx, Call};
use crate::chain::{Outgoing, SignedTx};
use domain::chain::address::tron::{account_id_of, address_of};
use domain::config::TreasuryGateConfig;
use domain::gates::Gate;

/// TRX has 6 decimals (sun).
const TRX_DECIMALS: u32 = 6;

/// A sweep's size estimate signs its transfer with this `fee_limit`: its varint is as long as
/// any real one up to 2^35 sun, so the estimate is never short.
const PROBE_FEE_LIMIT: u64 = u32::MAX as u64;

fn sun(amount: Decimal) -> Result<u64, SweepError> {
    Ok(base_units(amount, TRX_DECIMALS)?)
}

fn trx(sun: u64) -> Decimal {
    Decimal::from_i128_with_scale(i128::from(sun), TRX_DECIMALS).normalize()
}

fn overflow() -> SweepError {
    SweepError::Other("overflow".into())
}

/// What a USDT transfer can burn: its energy at the energy price, and its bandwidth (the
/// probe's size) at the byte price; `None` on overflow.
pub fn usdt_burn(prices: &Prices, energy: u64, probe: &SignedTx) -> Option<u64> {
    prices.energy(energy)?.checked_add(prices.bandwidth(probe)?)
}

impl Sweeper {
    /// One round of a TRON gate: follows its open sweeps, then plans new ones.
    pub(super) async fn tron_round(&self, gate: &'static Gate, cfg: &TreasuryGateConfig) -> Result<(), SweepError> {
        let open = sweep::Entity::find()
            .filter(sweep::Column::GateId.eq(gate.id))
            .filter(sweep::Column::Status.is_in([SweepStatus::Planned, SweepStatus::ToppingUp, SweepStatus::Sending]))
            .order_by_asc(sweep::Column::Id)
            .all(&self.db)
            .await?;
        for s in &open {
            if let Err(e) = self.tron_advance(s, gate).await {
                tracing::warn!(sweep = %s.id, gate = gate.id, error = %e, "TRON sweep step failed; tried again next round");
            }
        }
        self.plan(gate, cfg, |_| true).await
    }

    async fn tron_advance(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        match s.status {
            SweepStatus::Planned if gate.is_token => self.tron_top_up(s, gate).await,
            SweepStatus::Planned => self.tron_sign(s, gate, SweepStatus::Planned, Decimal::ZERO).await,
            SweepStatus::ToppingUp => self.tron_follow_top_up(s, gate).await,
            SweepStatus::Sending => self.tron_follow(s, gate).await,
            SweepStatus::Confirmed | SweepStatus::Failed => Ok(()),
        }
    }

    /// The deposit account and the key of `s`'s address (checked to derive it).
    fn tron_key(&self, s: &sweep::Model) -> Result<(Arc<TronDeposits>, PrivateKeySigner), SweepError> {
        let deposits = self.tron.clone().ok_or_else(|| SweepError::Other("no TRON deposit key".into()))?;
        let index = u32::try_from(s.derivation_index).map_err(|e| SweepError::Other(e.to_string()))?;
        let key = deposits.key(index)?;
        let derived = address_of(&key.address().into_array());
        if derived != s.address {
            return Err(SweepError::Other(format!("deposit key {index} derives {derived}, not {}", s.address)));
        }
        Ok((deposits, key))
    }

    fn destination(s: &sweep::Model) -> Result<[u8; 20], SweepError> {
        account_id_of(&s.destination)
            .ok_or_else(|| SweepError::Other(format!("{} is not a TRON address", s.destination)))
    }

    /// The TRX (sun) the USDT transfer of `units` from `s`'s address can burn now.
    async fn tron_usdt_burn(
        &self,
        deposits: &TronDeposits,
        key: &PrivateKeySigner,
        s: &sweep::Model,
        units: U256,
    ) -> Result<u64, SweepError> {
        let to = Self::destination(s)?;
        let prices = deposits.prices().await?;
        let energy = deposits.transfer_energy(&s.address, &to, units).await?;
        let call = Call::Trc20 { contract: deposits.usdt()?, to, units, fee_limit: PROBE_FEE_LIMIT };
        let probe = deposits.sign(key, call).await?;
        let burn = usdt_burn(&prices, energy, &probe).ok_or_else(overflow)?;
        let cap = self.config.tron.fee_limit_sun;
        if burn > cap {
            return Err(SweepError::Other(format!(
                "the USDT transfer from {} would burn {} TRX ({energy} energy), more than tron.fee_limit_sun; \
                 not topped up",
                s.address,
                trx(burn)
            )));
        }
        Ok(burn)
    }

    /// A USDT address: tops it up from the hot wallet with what the token transfer can burn
    /// (what it lacks of it), or, when it holds enough, signs the transfer right away.
    async fn tron_top_up(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let (deposits, key) = self.tron_key(s)?;
        let balance = self.chain(gate)?.balance(&s.address).await?;
        let units = U256::from(base_units(balance, gate.decimals)?);
        let burn = self.tron_usdt_burn(&deposits, &key, s, units).await?;
        if !self.fee_allowed(gate, &s.address, trx(burn)) {
            return Ok(());
        }
        let holds = sun(self.chain(native)?.balance(&s.address).await?)?;
        let lack = top_up(burn, holds);
        if lack == 0 {
            return self.tron_sign(s, gate, SweepStatus::Planned, Decimal::ZERO).await;
        }
        let amount = trx(lack);
        let hot = self
            .signers
            .get(Environment::Live, native.id)
            .ok_or_else(|| SweepError::Other(format!("no hot wallet on {}", native.id)))?;
        let mut tx = PayoutTx {
            gate: native,
            payout_id: s.id,
            destination: &s.address,
            destination_tag: None,
            amount,
            max_fee: amount,
            nonce: None,
            fees: None,
            funding: None,
        };
        tx.fees = hot.fees(&tx).await?;
        let signed = hot.sign(&tx).await?;
        self.tron_check_hot(gate, &signed)?;
        if !Self::store_top_up(&self.db, s, amount, &signed).await? {
            return Ok(());
        }
        self.send_stored(s, native, &signed, "TRX top-up").await
    }

    /// The hot wallet that signed `signed` must be the swept gate's `hot_address`: what the
    /// planner sends to and the reconciliation reads.
    fn tron_check_hot(&self, swept: &Gate, signed: &SignedTx) -> Result<(), SweepError> {
        let (raw, _) = tron_tx::decode(&signed.raw).map_err(SweepError::Other)?;
        let signing = address_of(&raw.owner);
        self.check_hot(swept, &format!("{}:{signing}", swept.network))
    }

    /// `topping_up`: the top-up in a block, the token transfer is signed.
    async fn tron_follow_top_up(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let (Some(hash), Some(raw)) = (s.topup_tx_hash.clone(), s.topup_signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} tops up without a transaction", s.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        match self.chain(native)?.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= 1 => {
                self.tron_sign(s, gate, SweepStatus::ToppingUp, fee.unwrap_or_default()).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => self.send(s, native, &tx).await,
            Outgoing::Failed(reason) => {
                self.fail(s, SweepStatus::ToppingUp, &format!("TRX top-up failed: {reason}")).await
            }
            Outgoing::Expired => {
                self.fail(s, SweepStatus::ToppingUp, "TRX top-up expired unseen; the address is planned again").await
            }
        }
    }

    /// Signs the sweep transaction from the deposit address and stores it (status `from` →
    /// `sending`, guarded), then sends it. Leaving `topping_up`, the top-up and `topup_fee`
    /// (what its own transaction burnt from the hot wallet) are booked to the house in the same
    /// database transaction.
    async fn tron_sign(
        &self,
        s: &sweep::Model,
        gate: &'static Gate,
        from: SweepStatus,
        topup_fee: Decimal,
    ) -> Result<(), SweepError> {
        let native = Self::native_of(gate)?;
        let (deposits, key) = self.tron_key(s)?;
        let to = Self::destination(s)?;
        let holds = sun(self.chain(native)?.balance(&s.address).await?)?;
        let (signed, amount) = if gate.is_token {
            let balance = self.chain(gate)?.balance(&s.address).await?;
            let units = base_units(balance, gate.decimals)?;
            if units == 0 {
                return self.fail(s, from, "no USDT left on the address").await;
            }
            // All the TRX it holds may be burnt for the energy: the top-up was priced to it.
            let fee_limit = holds.min(self.config.tron.fee_limit_sun);
            let call = Call::Trc20 { contract: deposits.usdt()?, to, units: U256::from(units), fee_limit };
            (deposits.sign(&key, call).await?, balance)
        } else {
            let prices = deposits.prices().await?;
            let probe = deposits.sign(&key, Call::Trx { to, sun: holds }).await?;
            let most = prices.bandwidth(&probe).ok_or_else(overflow)?;
            if from == SweepStatus::Planned && !self.fee_allowed(gate, &s.address, trx(most)) {
                return Ok(());
            }
            let Some(amount) = holds.checked_sub(most).filter(|a| *a > 0) else {
                return self.fail(s, from, &format!("{} TRX is not worth the fee", trx(holds))).await;
            };
            // The same terms, a smaller amount: never larger than the size priced.
            (deposits.sign_like(&key, Call::Trx { to, sun: amount }, &probe)?, trx(amount))
        };
        let txn = domain::db::begin_write(&self.db).await?;
        if !Self::store_sweep(&txn, s, from, amount, &signed).await? {
            txn.rollback().await?;
            return Ok(());
        }
        Self::book_top_up(&txn, s, from, topup_fee, gate).await?;
        txn.commit().await?;
        self.send_stored(s, gate, &signed, "TRON sweep").await
    }

    /// `sending`: follows the sweep transaction to the gate's confirmations, then confirms it
    /// (its fee booked, a USDT sweep's leftover planned back).
    async fn tron_follow(&self, s: &sweep::Model, gate: &'static Gate) -> Result<(), SweepError> {
        let (Some(hash), Some(raw)) = (s.tx_hash.clone(), s.signed_tx.clone()) else {
            return Err(SweepError::Other(format!("sweep {} sends without a transaction", s.id)));
        };
        let tx = SignedTx { tx_hash: hash, raw };
        match self.chain(gate)?.outgoing(&tx).await? {
            Outgoing::Confirmations { confirmations, fee } if confirmations >= u64::from(gate.confirmations) => {
                // A USDT transfer's fee is the energy the top-up paid (booked with it); the
                // native adapter's reading is used for TRX only.
                let fee = if gate.is_token { None } else { fee };
                self.confirm(s, gate, fee).await
            }
            Outgoing::Confirmations { .. } => Ok(()),
            Outgoing::Unknown => {
                // A fork may have taken the top-up with it: both stored transactions go out
                // again, the top-up first (a node that has it answers it is known; one past its
                // expiration is refused, and the transfer then expires too).
                if let (Some(hash), Some(raw)) = (s.topup_tx_hash.clone(), s.topup_signed_tx.clone()) {
                    let native = Self::native_of(gate)?;
                    let answer = self.chain(native)?.broadcast(&SignedTx { tx_hash: hash, raw }).await?;
                    tracing::info!(sweep = %s.id, ?answer, "TRX top-up sent again with its sweep");
                }
                self.send(s, gate, &tx).await
            }
            Outgoing::Failed(reason) => self.fail(s, SweepStatus::Sending, &reason).await,
            Outgoing::Expired => {
                self.fail(s, SweepStatus::Sending, "sweep transaction expired unseen; the address is planned again")
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usdt_transfer_burns_its_energy_and_bandwidth() {
        let prices = Prices { energy: 420, byte: 1_000 };
        let probe = SignedTx { tx_hash: String::new(), raw: "ab".repeat(280) };
        // 14 650 energy × 420 sun, (280 + 64) bytes × 1 000 sun.
        assert_eq!(usdt_burn(&prices, 14_650, &probe), Some(6_153_000 + 344_000));
        assert_eq!(usdt_burn(&prices, u64::MAX, &probe), None);
        assert_eq!(trx(6_497_000), Decimal::new(6_497, 3));
        assert_eq!(sun(Decimal::new(6_497, 3)).unwrap(), 6_497_000);
        assert!(sun(Decimal::new(1, 7)).is_err());
    }
}
