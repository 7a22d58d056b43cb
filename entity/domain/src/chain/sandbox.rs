//! The sandbox chain of the test environment, persisted in the database so every process
//! (API, scanner, tracker, `ops`) sees the same blocks. This is its write side (blocks, deposits,
//! reversals: the test helpers and `ops sandbox`); the scanner and tracker read it through
//! `workers::chain::sandbox`.
//!
//! The tip advances lazily: whoever reads it adds one block per configured interval elapsed
//! since `advanced_at`, with a guarded update. A deposit is included in the block after the tip,
//! and it is written while holding the chain row's lock, which every advance also takes: a
//! transfer can therefore never land in a block the scanner has already read.

use chrono::{DateTime, Duration, Utc};
use entity::{Amount, SandboxTransferId, sandbox_chain, sandbox_transfer};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder,
};
use uuid::Uuid;

use sea_orm::DbErr;

use super::address::AddressFamily;
use crate::gates::Gate;

pub struct SandboxChain {
    db: DatabaseConnection,
    gate: &'static Gate,
    interval_ms: u64,
}

/// Blocks due since `advanced_at`, and the new `advanced_at` once they are added.
fn due(interval_ms: u64, advanced_at: DateTime<Utc>, now: DateTime<Utc>) -> (i64, DateTime<Utc>) {
    if interval_ms == 0 {
        return (0, advanced_at);
    }
    let elapsed = (now - advanced_at).num_milliseconds().max(0);
    let blocks = elapsed / interval_ms as i64;
    (blocks, advanced_at + Duration::milliseconds(blocks * interval_ms as i64))
}

impl SandboxChain {
    pub fn new(db: DatabaseConnection, gate: &'static Gate, interval_ms: u64) -> Self {
        SandboxChain { db, gate, interval_ms }
    }

    pub fn gate(&self) -> &'static Gate {
        self.gate
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The chain row, created at height 1 on first use.
    async fn row<C: ConnectionTrait>(&self, db: &C) -> Result<sandbox_chain::Model, sea_orm::DbErr> {
        if let Some(r) = sandbox_chain::Entity::find_by_id(self.gate.id).one(db).await? {
            return Ok(r);
        }
        let fresh = sandbox_chain::ActiveModel {
            gate_id: Set(self.gate.id.into()),
            height: Set(1),
            advanced_at: Set(Utc::now()),
        };
        sandbox_chain::Entity::insert(fresh)
            .on_conflict(OnConflict::column(sandbox_chain::Column::GateId).do_nothing().to_owned())
            .exec_without_returning(db)
            .await?;
        sandbox_chain::Entity::find_by_id(self.gate.id)
            .one(db)
            .await?
            .ok_or_else(|| sea_orm::DbErr::RecordNotFound("sandbox chain".into()))
    }

    /// When the block after the current tip is due (`None`: blocks are made by hand only).
    pub async fn next_block_at(&self) -> Result<Option<DateTime<Utc>>, sea_orm::DbErr> {
        if self.interval_ms == 0 {
            return Ok(None);
        }
        let r = self.row(&self.db).await?;
        let (_, advanced_at) = due(self.interval_ms, r.advanced_at, Utc::now());
        Ok(Some(advanced_at + Duration::milliseconds(self.interval_ms as i64)))
    }

    /// Adds `extra` blocks plus the ones due by time, with a guarded update; returns the height.
    pub async fn advance<C: ConnectionTrait>(&self, db: &C, extra: i64) -> Result<i64, sea_orm::DbErr> {
        loop {
            let r = self.row(db).await?;
            let (blocks, advanced_at) = due(self.interval_ms, r.advanced_at, Utc::now());
            if blocks + extra == 0 {
                return Ok(r.height);
            }
            let height = r.height + blocks + extra;
            let res = sandbox_chain::Entity::update_many()
                .col_expr(sandbox_chain::Column::Height, Expr::value(height))
                .col_expr(sandbox_chain::Column::AdvancedAt, Expr::value(advanced_at))
                .filter(sandbox_chain::Column::GateId.eq(self.gate.id))
                .filter(sandbox_chain::Column::Height.eq(r.height))
                .exec(db)
                .await?;
            if res.rows_affected == 1 {
                return Ok(height);
            }
        }
    }

    /// Takes the chain row's lock (also creating it) and returns the tip: no advance can commit
    /// between this and the caller's commit, so what it writes into block tip + 1 can never land
    /// in a block a scanner has already read.
    pub async fn locked_tip(&self, txn: &sea_orm::DatabaseTransaction) -> Result<i64, sea_orm::DbErr> {
        self.row(txn).await?;
        sandbox_chain::Entity::update_many()
            .col_expr(sandbox_chain::Column::Height, Expr::col(sandbox_chain::Column::Height))
            .filter(sandbox_chain::Column::GateId.eq(self.gate.id))
            .exec(txn)
            .await?;
        self.advance(txn, 0).await
    }

    /// Mines `count` blocks at once (test helpers, `ops sandbox mine`); returns the new tip.
    pub async fn mine(&self, count: u64) -> Result<u64, DbErr> {
        let count = i64::try_from(count).map_err(|_| DbErr::Custom("too many blocks".into()))?;
        Ok(self.advance(&self.db, count).await? as u64)
    }

    /// Puts a transfer of `amount` to `address_key` into the next block. A `tx_hash` already on
    /// this chain gets the transaction's next output index. Returns the stored transfer.
    pub async fn deposit(
        &self,
        address_key: &str,
        amount: Decimal,
        tx_hash: Option<&str>,
    ) -> Result<sandbox_transfer::Model, DbErr> {
        let txn = crate::db::begin_write(&self.db).await?;
        let tip = self.locked_tip(&txn).await?;
        let tx_hash = match tx_hash {
            Some(h) => h.to_owned(),
            None => random_tx_hash(),
        };
        let output_index = sandbox_transfer::Entity::find()
            .filter(sandbox_transfer::Column::GateId.eq(self.gate.id))
            .filter(sandbox_transfer::Column::TxHash.eq(&tx_hash))
            .order_by_desc(sandbox_transfer::Column::OutputIndex)
            .one(&txn)
            .await?
            .map_or(0, |t| t.output_index + 1);
        let t = self.transfer(tx_hash, output_index, address_key, amount, tip + 1).insert(&txn).await?;
        txn.commit().await?;
        Ok(t)
    }

    /// Puts one transfer (a fresh transaction each) of each `(address_key, amount)` into the
    /// next block, in one transaction: a load generator's many payers at once
    /// (`ops bench-pipeline --sustained`). Returns that block's height.
    pub async fn deposit_many(&self, payments: &[(String, Decimal)]) -> Result<i64, DbErr> {
        let txn = crate::db::begin_write(&self.db).await?;
        let block = self.locked_tip(&txn).await? + 1;
        // 9 columns a row: well below the databases' bound-parameter limits.
        for chunk in payments.chunks(1000) {
            let rows = chunk.iter().map(|(key, amount)| self.transfer(random_tx_hash(), 0, key, *amount, block));
            sandbox_transfer::Entity::insert_many(rows).exec_without_returning(&txn).await?;
        }
        txn.commit().await?;
        Ok(block)
    }

    fn transfer(
        &self,
        tx_hash: String,
        output_index: i64,
        address_key: &str,
        amount: Decimal,
        block_height: i64,
    ) -> sandbox_transfer::ActiveModel {
        sandbox_transfer::ActiveModel {
            id: Set(Uuid::now_v7()),
            gate_id: Set(self.gate.id.into()),
            tx_hash: Set(tx_hash),
            output_index: Set(output_index),
            address_key: Set(address_key.into()),
            amount: Set(Amount::new(amount)),
            block_height: Set(block_height),
            reversed_at: Set(None),
            created_at: Set(Utc::now()),
        }
    }

    /// Takes a transfer off the chain (as a reorg or double spend would). Idempotent.
    pub async fn reverse(&self, transfer_id: SandboxTransferId) -> Result<Option<sandbox_transfer::Model>, DbErr> {
        sandbox_transfer::Entity::update_many()
            .col_expr(sandbox_transfer::Column::ReversedAt, Expr::value(Utc::now()))
            .filter(sandbox_transfer::Column::Id.eq(transfer_id))
            .filter(sandbox_transfer::Column::GateId.eq(self.gate.id))
            .filter(sandbox_transfer::Column::ReversedAt.is_null())
            .exec(&self.db)
            .await?;
        sandbox_transfer::Entity::find_by_id(transfer_id).one(&self.db).await
    }
}

/// The destination a sandbox payout is refused at: the all-zero address of the gate's family
/// (documented in api-decisions.md), so merchants can test a failed payout.
pub fn failure_destination(family: AddressFamily) -> String {
    match family {
        AddressFamily::Bitcoin => {
            let program = bitcoin::WitnessProgram::new(bitcoin::WitnessVersion::V0, &[0u8; 20])
                .expect("a 20-byte v0 witness program");
            bitcoin::Address::from_witness_program(program, bitcoin::KnownHrp::Testnets).to_string()
        }
        AddressFamily::Evm => format!("0x{}", "0".repeat(40)),
        AddressFamily::Tron => {
            let mut payload = [0u8; 21];
            payload[0] = 0x41;
            bs58::encode(payload).with_check().into_string()
        }
        AddressFamily::Xrp => "rrrrrrrrrrrrrrrrrrrrrhoLvTp".to_owned(),
        AddressFamily::Solana => "11111111111111111111111111111111".to_owned(),
    }
}

/// The fee a sandbox transaction pays: 90 % of its `max_fee`, in the gate's decimals (so the
/// settled network fee visibly differs from the configured estimate).
pub fn sandbox_fee(gate: &Gate, max_fee: Decimal) -> Decimal {
    (max_fee * Decimal::new(9, 1)).round_dp_with_strategy(gate.decimals, rust_decimal::RoundingStrategy::ToZero)
}

fn random_tx_hash() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_destinations_are_valid_addresses_of_their_family() {
        use crate::chain::address::{ChainNet, validate_address};
        for family in
            [AddressFamily::Bitcoin, AddressFamily::Evm, AddressFamily::Tron, AddressFamily::Xrp, AddressFamily::Solana]
        {
            let a = failure_destination(family);
            assert!(validate_address(family, ChainNet::Testnet, &a, None).is_ok(), "{family:?}: {a}");
        }
        assert_eq!(failure_destination(AddressFamily::Bitcoin), "tb1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq0l98cr");
    }

    #[test]
    fn sandbox_fee_is_ninety_percent_rounded_down() {
        let btc = crate::gates::find("bitcoin").unwrap();
        assert_eq!(sandbox_fee(btc, Decimal::new(15, 5)), Decimal::new(135, 6));
        assert_eq!(sandbox_fee(btc, Decimal::new(1, 8)), Decimal::ZERO);
    }

    #[test]
    fn blocks_due_by_time() {
        let t0 = Utc::now();
        assert_eq!(due(0, t0, t0 + Duration::seconds(100)), (0, t0));
        assert_eq!(due(1000, t0, t0 + Duration::milliseconds(999)), (0, t0));
        assert_eq!(due(1000, t0, t0 + Duration::milliseconds(2500)), (2, t0 + Duration::seconds(2)));
        // A clock step backwards never removes blocks.
        assert_eq!(due(1000, t0, t0 - Duration::seconds(5)), (0, t0));
    }
}
