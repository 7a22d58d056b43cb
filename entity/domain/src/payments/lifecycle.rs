//! A payment's status moves, written once. The rules are `entity::PaymentStatus::on`, an
//! exhaustive table; each move here is one guarded update (`… WHERE status = <from>`), so of two
//! writers racing on one payment (two trackers, the tracker and the converter, a scan and the
//! tracker) only one applies it, and each returns the rows it moved. The credit stamp
//! (`credit`) is guarded on `credited_at IS NULL`: a payment is credited exactly once.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use entity::{Amount, Environment, PaymentId, PaymentStatus, PaymentTrigger, payment};
use rust_decimal::Decimal;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::fiat::{self, FiatAtCredit};

/// How a confirmation credits: at once in the paid asset (`Now`), or later by the settlement
/// converter (`Later`: the invoice asks for a conversion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credit {
    /// Stamped credited with the paid gate and amount in the same update.
    Now,
    /// Left uncredited for the settlement converter.
    Later,
}

/// What a confirmation writes on its payments besides the move.
#[derive(Debug, Clone, Copy)]
pub struct Confirmation<'a> {
    /// The depth the chain shows them at.
    pub confirmations: i32,
    pub credit: Credit,
    /// When the tracker looks at them next (none: never), with no job chain (the scan of the
    /// block that completes their next milestone hands them over, the sweeper should that be
    /// lost): the tracker's schedule, written by the same update rather than a second one.
    pub next_check_at: Option<DateTime<Utc>>,
    /// With `Credit::Now`: each credit's fiat value (`fiat::values`), by payment id.
    pub fiat: &'a HashMap<Uuid, FiatAtCredit>,
}

/// `confirming` → `confirmed` for the payments `ids`, with `Credit::Now` also stamped credited
/// in their paid gate and amount and their fiat values recorded, and their next look scheduled:
/// one row version per payment (`fiat::PAYMENTS_PER_STATEMENT` a statement where fiat values
/// are written, their `CASE` growing with the statement). Returns those it moved (another
/// tracker, or a replay, moved the others first).
pub async fn confirm_many<C: ConnectionTrait>(
    txn: &C,
    ids: &[PaymentId],
    how: Confirmation<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<payment::Model>, DbErr> {
    let from = PaymentStatus::Confirming;
    let Some(next) = from.on(PaymentTrigger::Confirm) else { return Ok(Vec::new()) };
    let per_statement = if how.fiat.is_empty() { ids.len().max(1) } else { fiat::PAYMENTS_PER_STATEMENT };
    let mut moved = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(per_statement) {
        let mut update = payment::Entity::update_many()
            .col_expr(payment::Column::Status, Expr::value(next.as_str()))
            .col_expr(payment::Column::ConfirmedAt, Expr::value(now))
            .col_expr(payment::Column::Confirmations, Expr::value(how.confirmations))
            .col_expr(payment::Column::CheckedAt, Expr::value(now))
            .col_expr(payment::Column::TrackToken, Expr::value(Option::<Uuid>::None))
            .col_expr(payment::Column::NextCheckAt, Expr::value(how.next_check_at));
        match how.credit {
            Credit::Now => {
                update = update
                    .col_expr(payment::Column::CreditedAt, Expr::value(now))
                    .col_expr(payment::Column::CreditedGateId, Expr::col(payment::Column::GateId))
                    .col_expr(payment::Column::CreditedAmount, Expr::col(payment::Column::Amount));
                let values: Vec<(Uuid, &FiatAtCredit)> = chunk
                    .iter()
                    .map(|id| Uuid::from(*id))
                    .filter_map(|id| how.fiat.get(&id).map(|v| (id, v)))
                    .collect();
                if !values.is_empty() {
                    for (col, expr) in fiat::columns(values) {
                        update = update.col_expr(col, expr);
                    }
                }
            }
            Credit::Later => {}
        }
        moved.extend(
            update
                .filter(payment::Column::Id.is_in(chunk.iter().copied()))
                .filter(payment::Column::Status.eq(from))
                .filter(payment::Column::CreditedAt.is_null())
                .exec_with_returning(txn)
                .await?,
        );
    }
    Ok(moved)
}

/// Stamps a confirmed, uncredited payment credited in `gate` with `amount` (the paid asset, or
/// a settlement conversion's target) and returns it; `None` when it was credited before or is
/// not confirmed (reversed meanwhile). The caller posts the credit in the same transaction.
pub async fn credit<C: ConnectionTrait>(
    txn: &C,
    id: PaymentId,
    gate: &str,
    amount: Decimal,
    now: DateTime<Utc>,
) -> Result<Option<payment::Model>, DbErr> {
    let stamped = payment::Entity::update_many()
        .col_expr(payment::Column::CreditedAt, Expr::value(now))
        .col_expr(payment::Column::CreditedGateId, Expr::value(gate))
        .col_expr(payment::Column::CreditedAmount, Expr::value(Amount::new(amount)))
        .filter(payment::Column::Id.eq(id))
        .filter(payment::Column::Status.eq(PaymentStatus::Confirmed))
        .filter(payment::Column::CreditedAt.is_null())
        .exec_with_returning(txn)
        .await?;
    Ok(stamped.into_iter().next())
}

/// Takes the row lock of a live (not reversed), uncredited payment, so that what the caller
/// writes next in `txn` cannot race a reversal or a credit (they take this lock first too).
/// `false`: the payment was reversed or credited meanwhile.
pub async fn lock_uncredited<C: ConnectionTrait>(txn: &C, id: PaymentId) -> Result<bool, DbErr> {
    let live = payment::Entity::update_many()
        .col_expr(payment::Column::Status, Expr::col(payment::Column::Status))
        .filter(payment::Column::Id.eq(id))
        .filter(payment::Column::Status.ne(PaymentStatus::Reversed))
        .filter(payment::Column::CreditedAt.is_null())
        .exec(txn)
        .await?;
    Ok(live.rows_affected == 1)
}

/// The chain no longer shows `p`'s transfer: `p.status` → `reversed`, guarded on the status the
/// caller read. Returns the row as reversed (whether it was credited is read from it, not from
/// the caller's copy), or `None` when another writer moved it first.
pub async fn reverse<C: ConnectionTrait>(
    txn: &C,
    p: &payment::Model,
    now: DateTime<Utc>,
) -> Result<Option<payment::Model>, DbErr> {
    let Some(next) = p.status.on(PaymentTrigger::Reverse) else { return Ok(None) };
    let moved = payment::Entity::update_many()
        .col_expr(payment::Column::Status, Expr::value(next.as_str()))
        .col_expr(payment::Column::ReversedAt, Expr::value(now))
        .filter(payment::Column::Id.eq(p.id))
        .filter(payment::Column::Status.eq(p.status))
        .exec_with_returning(txn)
        .await?;
    Ok(moved.into_iter().next())
}

/// Where a revived transfer was seen: its block (none: in the mempool) and its depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenAt {
    pub block_height: Option<i64>,
    pub confirmations: i32,
}

/// A reversed payment whose transfer (`tx_hash`, `output_index` on the gate) is on the chain
/// again: `reversed` → `confirming`, recorded again as if new where it was seen (nothing
/// credited, no tracker state, one more revival). `None` when no reversed payment holds that
/// transfer (it is live: nothing to do).
pub async fn revive<C: ConnectionTrait>(
    txn: &C,
    env: Environment,
    gate_id: &str,
    (tx_hash, output_index): (&str, i64),
    seen: SeenAt,
    now: DateTime<Utc>,
) -> Result<Option<payment::Model>, DbErr> {
    let from = PaymentStatus::Reversed;
    let Some(next) = from.on(PaymentTrigger::Revive) else { return Ok(None) };
    let null = || Expr::cust("NULL");
    let revived = payment::Entity::update_many()
        .col_expr(payment::Column::Status, Expr::value(next.as_str()))
        .col_expr(payment::Column::BlockHeight, Expr::value(seen.block_height))
        .col_expr(payment::Column::Confirmations, Expr::value(seen.confirmations))
        .col_expr(payment::Column::DetectedAt, Expr::value(now))
        .col_expr(payment::Column::CheckedAt, Expr::value(now))
        .col_expr(payment::Column::ConfirmedAt, null())
        .col_expr(payment::Column::CreditedAt, null())
        .col_expr(payment::Column::CreditedGateId, null())
        .col_expr(payment::Column::CreditedAmount, null())
        .col_expr(payment::Column::ReversedAt, null())
        .col_expr(payment::Column::MissingSinceHeight, null())
        .col_expr(payment::Column::MissingLastHeight, null())
        .col_expr(payment::Column::MissingChecks, Expr::value(0))
        .col_expr(payment::Column::NextCheckAt, null())
        .col_expr(payment::Column::TrackToken, null())
        .col_expr(payment::Column::Revivals, Expr::col(payment::Column::Revivals).add(1))
        .filter(payment::Column::Environment.eq(env))
        .filter(payment::Column::GateId.eq(gate_id))
        .filter(payment::Column::TxHash.eq(tx_hash))
        .filter(payment::Column::OutputIndex.eq(output_index))
        .filter(payment::Column::Status.eq(from))
        .exec_with_returning(txn)
        .await?;
    Ok(revived.into_iter().next())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use entity::Amount;
    use entity::payment::Model as Payment;
    use migration::MigratorTrait;
    use sea_orm::{ActiveModelTrait, Database, DatabaseConnection, IntoActiveModel};

    /// A confirmation at `confirmations` with no fiat value and no next look.
    fn depth(confirmations: i32, credit: Credit, no_fiat: &HashMap<Uuid, FiatAtCredit>) -> Confirmation<'_> {
        Confirmation { confirmations, credit, next_check_at: None, fiat: no_fiat }
    }

    /// A migrated in-memory database holding `p` alone (no invoice row: these moves are the
    /// payment's own).
    pub(in crate::payments) async fn holding(p: &payment::Model) -> DatabaseConnection {
        let db = Database::connect("sqlite::memory:").await.unwrap();
        db.execute_unprepared("PRAGMA foreign_keys = OFF").await.unwrap();
        migration::Migrator::up(&db, None).await.unwrap();
        p.clone().into_active_model().insert(&db).await.unwrap();
        db
    }

    pub(in crate::payments) fn seen() -> payment::Model {
        let amount = Amount::new(Decimal::new(125, 2));
        payment::Model::detected(
            Uuid::now_v7(),
            Environment::Test,
            "bitcoin".into(),
            "tx".into(),
            0,
            amount,
            Utc::now(),
        )
    }

    async fn row(db: &DatabaseConnection, id: Uuid) -> payment::Model {
        payment::Entity::find_by_id(id).one(db).await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn a_confirmation_applies_once_and_credits_in_the_paid_asset_when_asked() {
        let p = seen();
        let db = holding(&p).await;
        let none = HashMap::new();
        let moved = confirm_many(&db, &[p.id.into()], depth(3, Credit::Now, &none), Utc::now()).await.unwrap();
        assert_eq!(moved.len(), 1);
        let c = &moved[0];
        assert_eq!((c.status, c.confirmations), (PaymentStatus::Confirmed, 3));
        assert!(c.credited_at.is_some() && c.confirmed_at.is_some());
        assert_eq!((c.credited_gate_id.as_deref(), c.credited_amount), (Some("bitcoin"), Some(p.amount)));
        assert!(
            confirm_many(&db, &[p.id.into()], depth(4, Credit::Now, &none), Utc::now()).await.unwrap().is_empty(),
            "a replay"
        );
        assert_eq!(row(&db, p.id).await.confirmations, 3);
        assert!(
            credit(&db, p.id.into(), "bitcoin", Decimal::ONE, Utc::now()).await.unwrap().is_none(),
            "credited once"
        );
    }

    #[tokio::test]
    async fn a_confirmation_writes_its_fiat_value_and_next_look_in_the_same_update() {
        let (p, q) = (seen(), Payment { tx_hash: "tx2".into(), ..seen() });
        let db = holding(&p).await;
        q.clone().into_active_model().insert(&db).await.unwrap();
        payment::Entity::update_many()
            .col_expr(payment::Column::TrackToken, Expr::value(Uuid::now_v7()))
            .exec(&db)
            .await
            .unwrap();
        let value = FiatAtCredit {
            currency: "EUR".into(),
            rate: Amount::new(Decimal::new(54_000, 0)),
            value: Amount::fiat(Decimal::new(6_750_000, 2)),
        };
        let fiat = HashMap::from([(p.id, value.clone())]);
        let next = Utc::now() + chrono::Duration::seconds(3);
        let how = Confirmation { confirmations: 2, credit: Credit::Now, next_check_at: Some(next), fiat: &fiat };
        let moved = confirm_many(&db, &[p.id.into(), q.id.into()], how, Utc::now()).await.unwrap();
        assert_eq!(moved.len(), 2);
        let (p, q) = (row(&db, p.id).await, row(&db, q.id).await);
        assert_eq!(fiat::recorded(&p), Some(value), "its own value");
        assert_eq!(fiat::recorded(&q), None, "no value given: none recorded");
        for r in [&p, &q] {
            assert_eq!((r.status, r.track_token), (PaymentStatus::Confirmed, None));
            assert_eq!(r.next_check_at.map(|t| t.timestamp_millis()), Some(next.timestamp_millis()));
        }
    }

    #[tokio::test]
    async fn a_later_credit_is_stamped_once_and_only_on_a_confirmed_payment() {
        let p = seen();
        let db = holding(&p).await;
        let none = HashMap::new();
        assert!(
            credit(&db, p.id.into(), "usdt-eth", Decimal::ONE, Utc::now()).await.unwrap().is_none(),
            "not confirmed"
        );
        let moved = confirm_many(&db, &[p.id.into()], depth(1, Credit::Later, &none), Utc::now()).await.unwrap();
        assert!(moved[0].credited_at.is_none());
        assert!(lock_uncredited(&db, p.id.into()).await.unwrap());
        let stamped = credit(&db, p.id.into(), "usdt-eth", Decimal::ONE, Utc::now()).await.unwrap().expect("stamped");
        assert_eq!(
            (stamped.credited_gate_id.as_deref(), stamped.credited_amount),
            (Some("usdt-eth"), Some(Amount::new(Decimal::ONE)))
        );
        assert!(credit(&db, p.id.into(), "usdt-eth", Decimal::ONE, Utc::now()).await.unwrap().is_none());
        assert!(!lock_uncredited(&db, p.id.into()).await.unwrap(), "credited: no quote may follow");
    }

    #[tokio::test]
    async fn a_reversal_is_guarded_on_the_status_read_and_only_a_reversed_payment_revives() {
        let p = seen();
        let db = holding(&p).await;
        let none = HashMap::new();
        let transfer = (p.tx_hash.as_str(), p.output_index);
        let at = SeenAt { block_height: Some(7), confirmations: 1 };
        assert!(revive(&db, p.environment, &p.gate_id, transfer, at, Utc::now()).await.unwrap().is_none(), "live");
        let confirmed =
            confirm_many(&db, &[p.id.into()], depth(1, Credit::Now, &none), Utc::now()).await.unwrap().remove(0);
        assert!(reverse(&db, &p, Utc::now()).await.unwrap().is_none(), "a stale copy (confirming) moves nothing");
        let reversed = reverse(&db, &confirmed, Utc::now()).await.unwrap().expect("reversed");
        assert_eq!(reversed.status, PaymentStatus::Reversed);
        assert!(reversed.credited_at.is_some(), "the caller reads the credit it must take back from the row");
        assert!(reverse(&db, &reversed, Utc::now()).await.unwrap().is_none());
        assert!(!lock_uncredited(&db, p.id.into()).await.unwrap());
        let revived = revive(&db, p.environment, &p.gate_id, transfer, at, Utc::now()).await.unwrap().expect("revived");
        assert_eq!((revived.status, revived.block_height, revived.revivals), (PaymentStatus::Confirming, Some(7), 1));
        assert!(revived.credited_at.is_none() && revived.reversed_at.is_none() && revived.confirmed_at.is_none());
        assert!(revive(&db, p.environment, &p.gate_id, transfer, at, Utc::now()).await.unwrap().is_none());
    }
}
