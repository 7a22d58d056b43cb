//! The hot wallets' bookkeeping rows, written in the transaction that stores a signed payout:
//! the nonce counter of an account-based chain, and the outputs a UTXO wallet's transactions
//! spend.

use chrono::Utc;
use entity::{PayoutStatus, payout};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;

use super::ExecError;

/// `funding` less the outputs another payout's signed transaction spends. An output spent by a
/// `failed` payout is free again (a payout fails only once its transaction can never be mined):
/// its row is dropped here, in the transaction that may record the output for a new payout.
pub(super) async fn unspent<C: sea_orm::ConnectionTrait>(
    txn: &C,
    funding: &crate::chain::signer::Funding,
) -> Result<crate::chain::signer::Funding, ExecError> {
    use entity::wallet_spend;
    let outpoints = funding.outputs.iter().map(|o| o.outpoint.as_str());
    let taken = wallet_spend::Entity::find()
        .filter(wallet_spend::Column::Scope.eq(funding.scope.as_str()))
        .filter(wallet_spend::Column::Outpoint.is_in(outpoints))
        .all(txn)
        .await?;
    let payouts: std::collections::HashSet<Uuid> = taken.iter().map(|t| t.payout_id).collect();
    let failed: std::collections::HashSet<Uuid> = payout::Entity::find()
        .filter(payout::Column::Id.is_in(payouts))
        .filter(payout::Column::Status.eq(PayoutStatus::Failed))
        .all(txn)
        .await?
        .into_iter()
        .map(|p| p.id)
        .collect();
    let mut busy = std::collections::HashSet::new();
    for t in taken {
        if failed.contains(&t.payout_id) {
            wallet_spend::Entity::delete_by_id((t.scope.clone(), t.outpoint.clone())).exec(txn).await?;
        } else {
            busy.insert(t.outpoint);
        }
    }
    let mut free = funding.clone();
    free.outputs.retain(|o| !busy.contains(&o.outpoint));
    Ok(free)
}

/// Records that payout `id`'s signed transaction spends `outpoints` of the wallet `scope`;
/// false if another payout recorded one of them first (the caller rolls back).
pub(super) async fn take_outputs<C: sea_orm::ConnectionTrait>(
    txn: &C,
    scope: &str,
    id: Uuid,
    outpoints: &[String],
) -> Result<bool, ExecError> {
    use entity::wallet_spend;
    use sea_orm::sea_query::OnConflict;
    if outpoints.is_empty() {
        return Ok(true);
    }
    let now = Utc::now();
    let rows = outpoints.iter().map(|o| {
        wallet_spend::ActiveModel::from(wallet_spend::Model {
            scope: scope.to_owned(),
            outpoint: o.clone(),
            payout_id: id,
            created_at: now,
        })
    });
    let inserted = wallet_spend::Entity::insert_many(rows)
        .on_conflict(
            OnConflict::columns([wallet_spend::Column::Scope, wallet_spend::Column::Outpoint]).do_nothing().to_owned(),
        )
        .exec_without_returning(txn)
        .await?;
    Ok(inserted == outpoints.len() as u64)
}

/// Takes the row lock of `account`'s nonce counter (creating it at the chain's next nonce) and
/// returns the nonce to use: the counter, or the chain's if someone else used the account.
pub(crate) async fn lock_nonce<C: sea_orm::ConnectionTrait>(
    txn: &C,
    account: &crate::chain::signer::NonceAccount,
) -> Result<u64, ExecError> {
    use entity::nonce_account;
    use sea_orm::sea_query::OnConflict;
    let now = Utc::now();
    let fresh =
        nonce_account::Model { scope: account.scope.clone(), next_nonce: account.chain_next as i64, updated_at: now };
    nonce_account::Entity::insert(nonce_account::ActiveModel::from(fresh))
        .on_conflict(OnConflict::column(nonce_account::Column::Scope).do_nothing().to_owned())
        .exec_without_returning(txn)
        .await?;
    let row = nonce_account::Entity::update_many()
        .col_expr(nonce_account::Column::UpdatedAt, Expr::value(now))
        .filter(nonce_account::Column::Scope.eq(account.scope.as_str()))
        .exec_with_returning(txn)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ExecError::Other(format!("nonce counter {} missing", account.scope)))?;
    Ok(u64::try_from(row.next_nonce).unwrap_or(0).max(account.chain_next))
}

/// Advances `account`'s counter past `used`, in the transaction that stored what was signed
/// with it (under the row lock [`lock_nonce`] took).
pub(crate) async fn advance_nonce<C: sea_orm::ConnectionTrait>(
    txn: &C,
    account: &crate::chain::signer::NonceAccount,
    used: u64,
) -> Result<(), sea_orm::DbErr> {
    use entity::nonce_account;
    nonce_account::Entity::update_many()
        .col_expr(nonce_account::Column::NextNonce, Expr::value(used as i64 + 1))
        .col_expr(nonce_account::Column::UpdatedAt, Expr::value(Utc::now()))
        .filter(nonce_account::Column::Scope.eq(account.scope.as_str()))
        .exec(txn)
        .await?;
    Ok(())
}
