//! The deposit scanner's state as a test sets or reads it: its cursor and the unclaimed
//! deposits it recorded.

use entity::Environment;

/// Every unclaimed deposit the scanner recorded (money that reached an address of ours but
/// credits no invoice), as (gate, tx hash, amount, reason, address key), by gate and tx hash.
pub async fn unclaimed_deposits(
    db: &sea_orm::DatabaseConnection,
) -> Vec<(String, String, rust_decimal::Decimal, entity::UnclaimedReason, String)> {
    use entity::unclaimed_deposit as u;
    use sea_orm::{EntityTrait, QueryOrder};
    let rows = u::Entity::find()
        .order_by_asc(u::Column::GateId)
        .order_by_asc(u::Column::TxHash)
        .order_by_asc(u::Column::OutputIndex)
        .all(db)
        .await
        .expect("unclaimed deposits");
    rows.into_iter().map(|r| (r.gate_id, r.tx_hash, r.amount.0, r.reason, r.address_key)).collect()
}

/// Moves `gate`'s scan cursor back to `height`: the next scan reads those blocks again, as a
/// scanner replaying a range would.
pub async fn rescan_from(db: &sea_orm::DatabaseConnection, env: Environment, gate: &str, height: i64) {
    use entity::scan_cursor as c;
    use sea_orm::sea_query::Expr;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let moved = c::Entity::update_many()
        .col_expr(c::Column::NextHeight, Expr::value(height))
        .filter(c::Column::Environment.eq(env))
        .filter(c::Column::GateId.eq(gate))
        .exec(db)
        .await
        .expect("scan cursor");
    assert_eq!(moved.rows_affected, 1, "no scan cursor for {gate}");
}
