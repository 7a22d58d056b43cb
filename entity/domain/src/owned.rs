//! What every merchant-facing read has in common: an API key sees only its own merchant's rows
//! in its own environment (anyone else's row is "not found", never "forbidden"), and a list is
//! one page, newest first, with the total its filter matches (spec section 8), found by offset or
//! (add-only) by a cursor: the id of the row the page starts after or ends before.

use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Select};
use uuid::Uuid;

use crate::db::{Listed, PageRequest, Position, newest_first};
use crate::domain_error::{DomainError, DomainResult};
use crate::keys::Principal;

/// A table whose rows each belong to one merchant in one environment.
pub trait Owned: EntityTrait<Model: Sync> {
    /// How a missing row is named in its 404 (`static address not found`).
    const NAME: &'static str;
    /// The typed id of one row (`InvoiceId` for invoices).
    type Id: Into<Uuid> + Copy;
    const ID: Self::Column;
    const MERCHANT_ID: Self::Column;
    const ENVIRONMENT: Self::Column;
    /// The list order: newest first, then by id (descending) so that the order is total.
    const CREATED_AT: Self::Column;
}

macro_rules! owned {
    ($($table:ident($id:ident) => $name:literal),+ $(,)?) => {$(
        impl Owned for entity::$table::Entity {
            const NAME: &'static str = $name;
            type Id = entity::$id;
            const ID: Self::Column = entity::$table::Column::Id;
            const MERCHANT_ID: Self::Column = entity::$table::Column::MerchantId;
            const ENVIRONMENT: Self::Column = entity::$table::Column::Environment;
            const CREATED_AT: Self::Column = entity::$table::Column::CreatedAt;
        }
    )+};
}

owned!(
    invoice(InvoiceId) => "invoice",
    payout(PayoutId) => "payout",
    refund(RefundId) => "refund",
    event(EventId) => "event",
    static_address(StaticAddressId) => "static address",
    webhook_delivery(DeliveryId) => "webhook delivery",
);

/// A list's query parameters beyond the page: which of the caller's rows of `E` it shows.
pub trait Filter<E: EntityTrait> {
    fn apply(&self, q: Select<E>) -> Select<E>;
}

/// The list filter `currency=…`: a gate id (`tron_usdt`) selects that gate's rows, anything else
/// the rows of that asset code (`usdt` as `USDT`, on every network).
pub fn currency_is<C: ColumnTrait>(gate_id: C, currency: C, given: &str) -> sea_orm::sea_query::SimpleExpr {
    match crate::gates::find(given) {
        Some(g) => gate_id.eq(g.id),
        None => currency.eq(given.to_ascii_uppercase()),
    }
}

impl Principal {
    /// Every row of `E` this key may see: its merchant's, in its environment.
    pub fn rows<E: Owned>(&self) -> Select<E> {
        E::find().filter(E::MERCHANT_ID.eq(self.merchant_id)).filter(E::ENVIRONMENT.eq(self.environment))
    }
}

/// The row `id` of `E` if `who` may see it; anything else is `not_found`.
pub async fn get<E: Owned>(db: &impl ConnectionTrait, who: &Principal, id: E::Id) -> DomainResult<E::Model> {
    let id: Uuid = id.into();
    who.rows::<E>().filter(E::ID.eq(id)).one(db).await?.ok_or_else(|| DomainError::not_found(E::NAME))
}

/// One page of the rows of `E` that `who` may see and `f` selects, newest first, and how many
/// there are in all.
pub async fn list<E: Owned>(
    db: &impl ConnectionTrait,
    who: &Principal,
    f: &impl Filter<E>,
    (limit, offset): (u64, u64),
) -> Result<(Vec<E::Model>, u64), DbErr> {
    let listed = newest_first(db, f.apply(who.rows()), (E::CREATED_AT, E::ID), limit, Position::offset(offset)).await?;
    Ok((listed.rows, listed.total))
}

/// The page `page` asks for of the rows of `E` that `who` may see and `f` selects. A cursor
/// names one of those rows (any of the caller's rows of `E`, whatever the filter); another id is
/// 404 naming the parameter, as a missing row is.
pub async fn page<E: Owned>(
    db: &impl ConnectionTrait,
    who: &Principal,
    f: &impl Filter<E>,
    page: PageRequest,
) -> DomainResult<Listed<E::Model>> {
    let after = match page.after {
        Some(id) => Some(cursor::<E>(db, who, "starting_after", id).await?),
        None => None,
    };
    let before = match page.before {
        Some(id) => Some(cursor::<E>(db, who, "ending_before", id).await?),
        None => None,
    };
    let at = Position { offset: page.offset, after, before };
    Ok(newest_first(db, f.apply(who.rows()), (E::CREATED_AT, E::ID), page.limit, at).await?)
}

/// The `(created_at, id)` of the caller's row `id`, the cursor `field` names.
async fn cursor<E: Owned>(
    db: &impl ConnectionTrait,
    who: &Principal,
    field: &str,
    id: Uuid,
) -> DomainResult<(sea_orm::Value, Uuid)> {
    use sea_orm::ModelTrait;
    let row = who.rows::<E>().filter(E::ID.eq(id)).one(db).await?;
    let row = row.ok_or_else(|| cursor_not_found(field, E::NAME, id))?;
    Ok((row.get(E::CREATED_AT), id))
}

/// 404 `not_found` for a cursor that is not one of the caller's rows of the list, naming it.
pub fn cursor_not_found(field: &str, name: &str, id: Uuid) -> DomainError {
    DomainError::not_found_field(field, format!("no {name} with id {id}"))
}
