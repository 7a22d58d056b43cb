//! The sandbox chain read and broadcast to as a [`Chain`]: blocks and deposits are written by
//! `domain::chain::sandbox::SandboxChain` (the test helpers, `ops sandbox`), which every process
//! shares through the database; payouts signed by the sandbox signer land in `sandbox_broadcast`.

use std::collections::{HashMap, HashSet};

use chrono::Utc;
use domain::addresses::address_key;
pub use domain::chain::sandbox::SandboxChain;
use domain::chain::sandbox::{failure_destination, sandbox_fee};
use domain::gates::Gate;
use entity::{Amount, sandbox_broadcast, sandbox_transfer};
use rust_decimal::Decimal;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

use super::signer::SandboxTx;
use super::{Broadcast, Chain, ChainError, Look, Outgoing, SignedTx, Transfer, TxStatus};

/// Accepts a sandbox-signed transaction into the block after the tip (once per hash).
async fn send(chain: &SandboxChain, tx: &SignedTx) -> Result<Broadcast, ChainError> {
    let body: SandboxTx = match serde_json::from_str(&tx.raw) {
        Ok(b) => b,
        Err(e) => return Ok(Broadcast::Rejected(format!("malformed transaction: {e}"))),
    };
    if body.gate_id != chain.gate().id {
        return Ok(Broadcast::Rejected(format!("transaction for {} sent to {}", body.gate_id, chain.gate().id)));
    }
    if body.to.eq_ignore_ascii_case(&failure_destination(chain.gate().family)) {
        return Ok(Broadcast::Rejected("sandbox: destination rejected (forced failure address)".into()));
    }
    let txn = domain::db::begin_write(chain.db()).await?;
    let tip = chain.locked_tip(&txn).await?;
    let row = sandbox_broadcast::Model {
        tx_hash: tx.tx_hash.clone(),
        gate_id: chain.gate().id.into(),
        destination: body.to,
        destination_tag: body.tag,
        amount: Amount::new(body.amount),
        fee: Amount::new(sandbox_fee(chain.gate(), body.max_fee)),
        reference: body.memo,
        block_height: tip + 1,
        created_at: Utc::now(),
    };
    let n = sandbox_broadcast::Entity::insert(sandbox_broadcast::ActiveModel::from(row))
        .on_conflict(OnConflict::column(sandbox_broadcast::Column::TxHash).do_nothing().to_owned())
        .exec_without_returning(&txn)
        .await?;
    txn.commit().await?;
    Ok(if n == 1 { Broadcast::Accepted } else { Broadcast::AlreadyKnown })
}

/// Transfers read per statement by [`Chain::statuses`].
const LOOKS_PER_READ: usize = 500;

/// What the chain says of each look, in one read of the transfers (by hash, within the gate)
/// per [`LOOKS_PER_READ`] and one of the tip. A reversed transfer is gone.
async fn look_up(chain: &SandboxChain, looks: &[Look<'_>]) -> Result<Vec<TxStatus>, ChainError> {
    let mut on_chain: HashMap<(String, i64), i64> = HashMap::with_capacity(looks.len());
    for part in looks.chunks(LOOKS_PER_READ) {
        let hashes: HashSet<&str> = part.iter().map(|l| l.tx_hash).collect();
        let rows = sandbox_transfer::Entity::find()
            .filter(sandbox_transfer::Column::GateId.eq(chain.gate().id))
            .filter(sandbox_transfer::Column::TxHash.is_in(hashes))
            .filter(sandbox_transfer::Column::ReversedAt.is_null())
            .all(chain.db())
            .await?;
        on_chain.extend(rows.into_iter().map(|t| ((t.tx_hash, t.output_index), t.block_height)));
    }
    let tip = chain.tip().await? as i64;
    Ok(looks
        .iter()
        .map(|l| match on_chain.get(&(l.tx_hash.to_owned(), l.output_index)) {
            None => TxStatus::Gone,
            Some(&h) => TxStatus::Confirmations(if h > tip { 0 } else { (tip - h + 1) as u64 }),
        })
        .collect())
}

#[async_trait::async_trait]
impl Chain for SandboxChain {
    fn gate(&self) -> &'static Gate {
        self.gate()
    }

    async fn tip(&self) -> Result<u64, ChainError> {
        Ok(self.advance(self.db(), 0).await? as u64)
    }

    async fn transfers(&self, from: u64, to: u64) -> Result<Vec<Transfer>, ChainError> {
        let rows = sandbox_transfer::Entity::find()
            .filter(sandbox_transfer::Column::GateId.eq(self.gate().id))
            .filter(sandbox_transfer::Column::BlockHeight.between(from as i64, to as i64))
            .filter(sandbox_transfer::Column::ReversedAt.is_null())
            .order_by_asc(sandbox_transfer::Column::BlockHeight)
            .order_by_asc(sandbox_transfer::Column::Id)
            .all(self.db())
            .await?;
        Ok(rows
            .into_iter()
            .map(|t| Transfer {
                tx_hash: t.tx_hash,
                output_index: t.output_index,
                address_key: t.address_key,
                amount: t.amount.0,
                block_height: t.block_height as u64,
            })
            .collect())
    }

    async fn status(&self, tx_hash: &str, output_index: i64, seen_at: Option<u64>) -> Result<TxStatus, ChainError> {
        let mut one = look_up(self, &[Look { tx_hash, output_index, seen_at }]).await?;
        Ok(one.pop().unwrap_or(TxStatus::Gone))
    }

    /// One read of the batch's transfers (by hash, within the gate) and one of the tip.
    async fn statuses(&self, looks: &[Look<'_>]) -> Vec<Result<TxStatus, ChainError>> {
        match look_up(self, looks).await {
            Ok(all) => all.into_iter().map(Ok).collect(),
            Err(e) => {
                let why = e.to_string();
                looks.iter().map(|_| Err(ChainError::Unavailable(why.clone()))).collect()
            }
        }
    }

    /// A sandbox chain keeps transfers, not holdings per address: an address holds the sum of
    /// the transfers to it (under any tag) in blocks up to the tip and not reversed. Payouts
    /// (`sandbox_broadcasts`) leave from the sandbox signer, which has no address on the chain,
    /// and are not counted as arriving anywhere.
    async fn balance(&self, address: &str) -> Result<Decimal, ChainError> {
        let prefix = address_key(self.gate().family, address, None);
        let tip = i64::try_from(Chain::tip(self).await?).unwrap_or(i64::MAX);
        let rows = sandbox_transfer::Entity::find()
            .filter(sandbox_transfer::Column::GateId.eq(self.gate().id))
            .filter(sandbox_transfer::Column::AddressKey.starts_with(&prefix))
            .filter(sandbox_transfer::Column::ReversedAt.is_null())
            .filter(sandbox_transfer::Column::BlockHeight.lte(tip))
            .all(self.db())
            .await?;
        rows.iter()
            .filter(|t| t.address_key.starts_with(&prefix))
            .try_fold(Decimal::ZERO, |sum, t| sum.checked_add(t.amount.0))
            .map(|d| d.normalize())
            .ok_or_else(|| ChainError::Unavailable(format!("balance of {address} overflows")))
    }

    async fn next_block_at(&self) -> Option<chrono::DateTime<Utc>> {
        SandboxChain::next_block_at(self).await.ok().flatten()
    }

    /// A sandbox transfer is gone only when it was reversed on purpose (`reversed_at` is set in
    /// the database every process reads): nothing to wait for.
    fn gone_is_final(&self) -> bool {
        true
    }

    async fn broadcast(&self, tx: &SignedTx) -> Result<Broadcast, ChainError> {
        send(self, tx).await
    }

    async fn outgoing(&self, tx: &SignedTx) -> Result<Outgoing, ChainError> {
        let tx_hash = tx.tx_hash.as_str();
        let Some(b) = sandbox_broadcast::Entity::find_by_id(tx_hash).one(self.db()).await? else {
            return Ok(Outgoing::Unknown);
        };
        let tip = self.tip().await? as i64;
        let confirmations = if b.block_height > tip { 0 } else { (tip - b.block_height + 1) as u64 };
        Ok(Outgoing::Confirmations { confirmations, fee: Some(b.fee.0) })
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[tokio::test]
    async fn an_address_holds_its_confirmed_transfers_not_reversed_ones_nor_the_next_blocks() {
        let fresh = testkit::Db::fresh().await;
        let db = sea_orm::Database::connect(&fresh.url).await.unwrap();
        domain::db::migrate(&db).await.unwrap();
        let gate = domain::gates::find("ethereum").unwrap();
        let chain = SandboxChain::new(db.clone(), gate, 0);
        let (a, b) = ("0x00000000000000000000000000000000000000Aa", "0x00000000000000000000000000000000000000bb");
        let key = |addr: &str, tag: Option<&str>| address_key(gate.family, addr, tag);
        assert_eq!(chain.balance(a).await.unwrap(), Decimal::ZERO, "never paid");
        chain.deposit(&key(a, None), d("1.25"), None).await.unwrap();
        chain.deposit(&key(a, Some("7")), d("0.5"), None).await.unwrap();
        let gone = chain.deposit(&key(a, None), d("3"), None).await.unwrap();
        chain.deposit(&key(b, None), d("2"), None).await.unwrap();
        // The key of an address that only starts like `a` is not `a`'s.
        chain.deposit(&key(&format!("{a}1"), None), d("100"), None).await.unwrap();
        let other = SandboxChain::new(db.clone(), domain::gates::find("ethereum_usdt").unwrap(), 0);
        other.deposit(&key(a, None), d("40"), None).await.unwrap();
        assert_eq!(chain.balance(a).await.unwrap(), Decimal::ZERO, "in the next block: not confirmed yet");
        chain.mine(1).await.unwrap();
        chain.reverse(gone.id.into()).await.unwrap();
        assert_eq!(chain.balance(a).await.unwrap(), d("1.75"), "every tag, reversed and other gates left out");
        let upper = a.to_ascii_uppercase().replacen("0X", "0x", 1);
        let got: Vec<Decimal> = chain
            .balances(&[b, &upper, "0x00000000000000000000000000000000000000cc"])
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, vec![d("2"), d("1.75"), Decimal::ZERO], "each in its place; EVM case ignored");
    }
}
