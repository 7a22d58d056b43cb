//! A refund follows its payout: every payout transition (the API's cancel, the operator's
//! commands, the executor) mirrors the new status onto the payout's refund, if it has one, and
//! with it what the merchant was charged (spec 2.6: the refund amount, the refund fee and the
//! actual network fee, which the payout knows once it completed).

use chrono::Utc;
use entity::{Amount, RefundStatus, invoice_credit, payout, refund};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

/// Brings a refund in line with its payout as the transition left it (`p` is the payout row
/// after the transition), in the payout transition's transaction (after that transaction posted
/// to the gate's balance, so the balance lock is held): its status, and its
/// `merchant_debit_amount`, which completion settles from the estimate to what the ledger
/// charged (amount + refund fee + the real network fee). A failed or cancelled refund gives its
/// amount back to the invoice's refundable credit. Does nothing for a payout that is not a
/// refund's.
pub async fn mirror_payout<C: ConnectionTrait>(txn: &C, p: &payout::Model) -> Result<(), sea_orm::DbErr> {
    let Some(r) = refund::Entity::find().filter(refund::Column::PayoutId.eq(p.id)).one(txn).await? else {
        return Ok(());
    };
    let next = RefundStatus::mirroring(p.status);
    if next == r.status && p.merchant_debit_amount == r.merchant_debit_amount {
        return Ok(());
    }
    let now = Utc::now();
    let moved = refund::Entity::update_many()
        .col_expr(refund::Column::Status, Expr::value(next.as_str()))
        .col_expr(refund::Column::MerchantDebitAmount, Expr::value(p.merchant_debit_amount))
        .col_expr(refund::Column::UpdatedAt, Expr::value(now))
        .filter(refund::Column::Id.eq(r.id))
        .filter(refund::Column::Status.eq(r.status))
        .exec(txn)
        .await?;
    if moved.rows_affected == 1 && r.status.counts_against_credit() && !next.counts_against_credit() {
        let key = (r.invoice_id, r.gate_id.clone());
        let credit = invoice_credit::Entity::find_by_id(key)
            .one(txn)
            .await?
            .ok_or_else(|| sea_orm::DbErr::RecordNotFound("invoice credit of a refund".into()))?;
        let left = credit.refunded.0.checked_sub(r.amount.0).filter(|d| *d >= Decimal::ZERO).ok_or_else(|| {
            sea_orm::DbErr::Custom(format!("refund {} releases more than its invoice's refunded total", r.id))
        })?;
        let mut row: invoice_credit::ActiveModel = credit.into();
        row.refunded = Set(Amount::new(left));
        row.updated_at = Set(now);
        row.update(txn).await?;
    }
    Ok(())
}
