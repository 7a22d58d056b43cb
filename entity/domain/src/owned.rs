//! What every merchant-facing read has in common: an API key sees only its own merchant's rows
//! in its own environment (anyone else's row is "not found", never "forbidden"), and a list is
//! one page, newest first, with the total its filter matches (spec section 8), found by offset or
//! (add-only) by a cursor: the id of the row the page starts after or ends before.

use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter, Select};
use uuid::Uuid;

use crate::db::{Listed, PageRequest, Position, newest_first};
use crate::domain_error::{DomainError, DomainResult};
use crate::keys::Principal;
use crate::list_counts::{self, Days, Tally};

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

    /// The same filter as the list counters hold it, if they do (`None`: its rows are counted).
    fn tally(&self) -> Option<Tally> {
        None
    }
}

/// How many of the rows of `E` that `who` may see `f` selects: the list's total. From the
/// counters when they hold the filter (a few rows read, at any size of the list; a window's
/// partial first and last day counted row by row), else by counting the rows.
pub async fn total<E: Owned>(db: &impl ConnectionTrait, who: &Principal, f: &impl Filter<E>) -> Result<u64, DbErr> {
    let mut n = 0;
    for part in total_parts(who, f) {
        n += match part {
            TotalPart::Counters(s) => list_counts::total_of(db, &s).await?,
            TotalPart::Rows(q) => q.count(db).await?,
        };
    }
    Ok(n)
}

/// One statement of a list's total: a sum of counters, or rows counted.
pub enum TotalPart<E: EntityTrait> {
    Counters(sea_orm::sea_query::SelectStatement),
    Rows(Select<E>),
}

/// The statements whose results add up to the total [`total`] returns.
pub fn total_parts<E: Owned>(who: &Principal, f: &impl Filter<E>) -> Vec<TotalPart<E>> {
    let rows = || f.apply(who.rows());
    let Some(Tally { list, key, window }) = f.tally() else { return vec![TotalPart::Rows(rows())] };
    let split = match window {
        (None, None) => return vec![TotalPart::Counters(list_counts::statement(who, list, &key, Days::Whole))],
        (lo, hi) => list_counts::split(lo, hi),
    };
    let Some(split) = split else { return vec![TotalPart::Rows(rows())] };
    let mut parts = vec![TotalPart::Counters(list_counts::statement(who, list, &key, split.days))];
    if let Some(t) = split.head_before {
        parts.push(TotalPart::Rows(rows().filter(E::CREATED_AT.lt(t))));
    }
    if let Some(t) = split.tail_from {
        parts.push(TotalPart::Rows(rows().filter(E::CREATED_AT.gte(t))));
    }
    parts
}

/// The counter key of the list filter `currency=…` ([`currency_is`]): `(gate_id, currency)`.
pub fn currency_key(given: &str) -> (Option<String>, Option<String>) {
    match crate::gates::find(given) {
        Some(g) => (Some(g.id.to_owned()), None),
        None => (None, Some(given.to_ascii_uppercase())),
    }
}

/// The list filter `currency=…`: a gate id (`tron_usdt`) selects that gate's rows, anything else
/// the rows of that asset code (`usdt` as `USDT`, on every network).
pub fn currency_is<C: ColumnTrait>(gate_id: C, currency: C, given: &str) -> sea_orm::sea_query::SimpleExpr {
    match currency_key(given) {
        (Some(g), _) => gate_id.eq(g),
        (None, c) => currency.eq(c),
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
    let total = total(db, who, f).await?;
    let at = Position::offset(offset);
    let listed = newest_first(db, f.apply(who.rows()), (E::CREATED_AT, E::ID), limit, at, total).await?;
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
    let total = total(db, who, f).await?;
    Ok(newest_first(db, f.apply(who.rows()), (E::CREATED_AT, E::ID), page.limit, at, total).await?)
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
