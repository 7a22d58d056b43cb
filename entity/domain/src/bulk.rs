//! Many rows of one table in as few statements as the backend allows.
//!
//! On PostgreSQL a batch is one `INSERT … SELECT … FROM UNNEST($1, …, $n)` with one array bound
//! per column, whatever the number of rows: the statement's text does not change with the
//! batch's size, so PostgreSQL parses and plans it once per connection, and the writer builds
//! and binds one value per column instead of a placeholder and a value per cell (a 10,000-row
//! batch of a 25-column table was 250,000 placeholders, written, cloned and bound one by one,
//! in 500-row statements each parsed afresh). On SQLite (no arrays) a batch is the ORM's
//! multi-row `INSERT`, in statements of [`SQLITE_ROWS`] rows.
//!
//! Both are the same write: every column of every row as the model holds it, `ON CONFLICT
//! (<skip_on>) DO NOTHING` when a key is given (`ON CONFLICT (<skip_on>) WHERE <column> IS NOT
//! NULL DO NOTHING` for a partial unique index), and what a caller asks back (`RETURNING`) for the
//! rows inserted only.

use sea_orm::IdenStatic;
use sea_orm::sea_query::{ArrayType, Expr, ExprTrait, OnConflict, Value};
use sea_orm::{
    ActiveModelTrait, ActiveValue, ConnectionTrait, DbBackend, DbErr, EntityTrait, ExecResult, IntoActiveModel,
    Iterable, QueryResult, QueryTrait, Statement, TryGetable,
};

/// Rows per multi-row `INSERT` on SQLite: its bound parameters (32,766) allow 500 rows of up to
/// 65 columns.
pub const SQLITE_ROWS: usize = 500;

/// Rows per `UNNEST` statement on PostgreSQL: the bound arrays have no limit of their own; this
/// bounds one message's size (an event's payload is a few kilobytes).
pub const POSTGRES_ROWS: usize = 5_000;

/// Inserts `rows`, each one skipped when a row with the same `skip_on` key is there already
/// (none: no conflict clause); returns how many were inserted.
pub async fn insert<E, C>(db: &C, rows: Vec<E::Model>, skip_on: &[E::Column]) -> Result<u64, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
    C: ConnectionTrait,
{
    let mut inserted = 0;
    for stmt in statements::<E>(db.get_database_backend(), rows, Key::full(skip_on), None)? {
        let done: ExecResult = db.execute_raw(stmt).await?;
        inserted += done.rows_affected();
    }
    Ok(inserted)
}

/// As [`insert`], returning `returning` of each row inserted (rows skipped on their key return
/// nothing), read by position.
pub async fn insert_returning<E, C, T>(
    db: &C,
    rows: Vec<E::Model>,
    skip_on: &[E::Column],
    returning: E::Column,
) -> Result<Vec<T>, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
    C: ConnectionTrait,
    T: TryGetable,
{
    returning_rows::<E, C, T>(db, rows, Key::full(skip_on), returning).await
}

/// As [`insert_returning`], skipped on a partial unique index: `skip_on`'s columns over the rows
/// whose `set` column is not NULL (the index's predicate; a row without it is never skipped).
pub async fn insert_returning_partial<E, C, T>(
    db: &C,
    rows: Vec<E::Model>,
    skip_on: &[E::Column],
    set: E::Column,
    returning: E::Column,
) -> Result<Vec<T>, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
    C: ConnectionTrait,
    T: TryGetable,
{
    returning_rows::<E, C, T>(db, rows, Key { columns: skip_on, set: Some(set) }, returning).await
}

async fn returning_rows<E, C, T>(
    db: &C,
    rows: Vec<E::Model>,
    key: Key<'_, E::Column>,
    returning: E::Column,
) -> Result<Vec<T>, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
    C: ConnectionTrait,
    T: TryGetable,
{
    let mut out = Vec::with_capacity(rows.len());
    for stmt in statements::<E>(db.get_database_backend(), rows, key, Some(returning))? {
        let found: Vec<QueryResult> = db.query_all_raw(stmt).await?;
        for row in found {
            out.push(row.try_get_by_index::<T>(0)?);
        }
    }
    Ok(out)
}

/// The unique key a row is skipped on: its columns (none: no conflict clause) and, for a partial
/// unique index, the column its predicate requires to be set.
#[derive(Clone, Copy)]
struct Key<'a, C> {
    columns: &'a [C],
    set: Option<C>,
}

impl<'a, C> Key<'a, C> {
    fn full(columns: &'a [C]) -> Self {
        Key { columns, set: None }
    }
}

/// The statements that write `rows`, in order.
fn statements<E>(
    backend: DbBackend,
    rows: Vec<E::Model>,
    key: Key<'_, E::Column>,
    returning: Option<E::Column>,
) -> Result<Vec<Statement>, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
{
    let mut rows = rows;
    let mut out = Vec::new();
    match backend {
        DbBackend::Postgres => {
            while !rows.is_empty() {
                let rest = rows.split_off(rows.len().min(POSTGRES_ROWS));
                out.push(unnest::<E>(rows, key, returning)?);
                rows = rest;
            }
        }
        _ => {
            while !rows.is_empty() {
                let rest = rows.split_off(rows.len().min(SQLITE_ROWS));
                let mut insert = E::insert_many(rows.into_iter().map(IntoActiveModel::into_active_model));
                if !key.columns.is_empty() {
                    let mut conflict = OnConflict::columns(key.columns.iter().copied());
                    if let Some(set) = key.set {
                        conflict.target_and_where(Expr::col(set).is_not_null());
                    }
                    insert = insert.on_conflict(conflict.do_nothing().to_owned());
                }
                let mut query = insert.into_query();
                if let Some(col) = returning {
                    query.returning_col(col);
                }
                out.push(backend.build(&query));
                rows = rest;
            }
        }
    }
    Ok(out)
}

/// How one column's values are bound in an `UNNEST` statement.
#[derive(Debug, PartialEq, Eq)]
enum Nulls {
    /// Every value is there: the array as it is.
    None,
    /// No value is there: a NULL array, which `UNNEST` pads with NULLs to the batch's length.
    All,
    /// Some are missing: the array holds another value of the column in their place (arrays
    /// bound here cannot hold NULLs), and a second array of booleans marks them.
    Some,
}

/// One `INSERT … SELECT … FROM UNNEST(…)` for `rows` (PostgreSQL).
fn unnest<E>(rows: Vec<E::Model>, key: Key<'_, E::Column>, returning: Option<E::Column>) -> Result<Statement, DbErr>
where
    E: EntityTrait,
    E::Model: IntoActiveModel<E::ActiveModel>,
{
    let columns: Vec<E::Column> = E::Column::iter().collect();
    let mut cells: Vec<Vec<Value>> = columns.iter().map(|_| Vec::with_capacity(rows.len())).collect();
    for row in rows {
        let mut row = row.into_active_model();
        for (col, cells) in columns.iter().zip(cells.iter_mut()) {
            match row.take(*col) {
                ActiveValue::Set(v) | ActiveValue::Unchanged(v) => cells.push(v),
                ActiveValue::NotSet => {
                    return Err(DbErr::Custom(format!("bulk insert: column {} not set", col.as_str())));
                }
            }
        }
    }
    let mut values = Vec::with_capacity(columns.len() + 4);
    let (mut targets, mut selected, mut aliases) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (col, cells)) in columns.iter().zip(cells).enumerate() {
        targets.push(quoted(col.as_str()));
        let (array, nulls, json) = column_array(cells);
        let mut expr = format!("\"c{i}\"");
        if json {
            expr.push_str("::json");
        }
        values.push(array);
        aliases.push(format!("\"c{i}\""));
        if let Some(mask) = nulls {
            values.push(mask);
            aliases.push(format!("\"n{i}\""));
            expr = format!("CASE WHEN \"n{i}\" THEN NULL ELSE {expr} END");
        }
        selected.push(expr);
    }
    let params: Vec<String> = (1..=values.len()).map(|n| format!("${n}")).collect();
    let mut sql = format!(
        "INSERT INTO {} ({}) SELECT {} FROM UNNEST({}) AS \"u\"({})",
        quoted(E::default().table_name()),
        targets.join(", "),
        selected.join(", "),
        params.join(", "),
        aliases.join(", "),
    );
    if !key.columns.is_empty() {
        let columns: Vec<String> = key.columns.iter().map(|c| quoted(c.as_str())).collect();
        sql.push_str(&format!(" ON CONFLICT ({})", columns.join(", ")));
        if let Some(set) = key.set {
            sql.push_str(&format!(" WHERE {} IS NOT NULL", quoted(set.as_str())));
        }
        sql.push_str(" DO NOTHING");
    }
    if let Some(col) = returning {
        sql.push_str(&format!(" RETURNING {}", quoted(col.as_str())));
    }
    Ok(Statement::from_sql_and_values(DbBackend::Postgres, sql, values))
}

/// A column's values as one array to bind, the mask of its missing values if it needs one, and
/// whether they are JSON (bound as their text, cast back in the statement: a JSON value bound
/// as such is copied whole once more on the way, its text is one string).
fn column_array(cells: Vec<Value>) -> (Value, Option<Value>, bool) {
    let json = cells.iter().any(|v| matches!(v, Value::Json(_)));
    let cells: Vec<Value> = if json {
        cells
            .into_iter()
            .map(|v| match v {
                Value::Json(j) => Value::String(j.map(|j| j.to_string())),
                other => other,
            })
            .collect()
    } else {
        cells
    };
    let ty = cells.first().map_or(ArrayType::String, Value::array_type);
    match nulls_of(&cells) {
        Nulls::None => (Value::Array(ty, Some(Box::new(cells))), None, json),
        Nulls::All => (Value::Array(ty, None), None, json),
        Nulls::Some => {
            let stand_in = cells.iter().find(|v| v.is_some()).cloned().unwrap_or_else(|| cells[0].clone());
            let mask: Vec<Value> = cells.iter().map(|v| Value::Bool(Some(!v.is_some()))).collect();
            let filled: Vec<Value> =
                cells.into_iter().map(|v| if v.is_some() { v } else { stand_in.clone() }).collect();
            (Value::Array(ty, Some(Box::new(filled))), Some(Value::Array(ArrayType::Bool, Some(Box::new(mask)))), json)
        }
    }
}

fn nulls_of(cells: &[Value]) -> Nulls {
    let missing = cells.iter().filter(|v| !v.is_some()).count();
    if missing == 0 {
        Nulls::None
    } else if missing == cells.len() {
        Nulls::All
    } else {
        Nulls::Some
    }
}

/// An identifier in double quotes (the entities' own table and column names).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use entity::{Environment, event};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn event(dispatched: bool) -> event::Model {
        let mut e = event::Model::new(
            Uuid::now_v7(),
            Environment::Test,
            "invoice.paid",
            Uuid::new_v4().to_string(),
            json!({"invoice_id": Uuid::now_v7().to_string()}),
            Utc::now(),
        );
        if dispatched {
            e.dispatched_at = Some(Utc::now());
        }
        e
    }

    #[test]
    fn a_postgres_batch_is_one_statement_of_one_array_per_column_whatever_its_size() {
        let one = statements::<event::Entity>(
            DbBackend::Postgres,
            vec![event(false)],
            Key::full(&[event::Column::DedupeKey]),
            None,
        )
        .unwrap();
        let many = statements::<event::Entity>(
            DbBackend::Postgres,
            (0..1200).map(|_| event(false)).collect(),
            Key::full(&[event::Column::DedupeKey]),
            None,
        )
        .unwrap();
        assert_eq!((one.len(), many.len()), (1, 1));
        assert_eq!(one[0].sql, many[0].sql, "the text does not change with the batch's size");
        let sql = &many[0].sql;
        assert!(sql.starts_with("INSERT INTO \"events\" (\"id\", \"merchant_id\""), "{sql}");
        assert!(sql.contains("\"c5\"::json"), "the payload is bound as text and cast: {sql}");
        assert!(sql.ends_with("ON CONFLICT (\"dedupe_key\") DO NOTHING"), "{sql}");
        let values = many[0].values.as_ref().unwrap();
        assert_eq!(values.0.len(), 10, "one array per column");
        match &values.0[0] {
            Value::Array(ArrayType::Uuid, Some(ids)) => assert_eq!(ids.len(), 1200),
            other => panic!("ids: {other:?}"),
        }
    }

    #[test]
    fn missing_values_are_a_null_array_when_all_are_missing_and_a_mask_when_some_are() {
        let none =
            statements::<event::Entity>(DbBackend::Postgres, vec![event(false), event(false)], Key::full(&[]), None)
                .unwrap();
        let values = &none[0].values.as_ref().unwrap().0;
        // dispatched_at, the eighth column: never set in this batch.
        assert_eq!(values[7], Value::Array(ArrayType::ChronoDateTimeUtc, None));
        assert!(!none[0].sql.contains("CASE"), "{}", none[0].sql);

        let mixed =
            statements::<event::Entity>(DbBackend::Postgres, vec![event(false), event(true)], Key::full(&[]), None)
                .unwrap();
        let sql = &mixed[0].sql;
        assert!(sql.contains("CASE WHEN \"n7\" THEN NULL ELSE \"c7\" END"), "{sql}");
        let values = &mixed[0].values.as_ref().unwrap().0;
        assert_eq!(values.len(), 11, "the mask is one more array");
        assert_eq!(
            values[8],
            Value::Array(ArrayType::Bool, Some(Box::new(vec![Value::Bool(Some(true)), Value::Bool(Some(false))])))
        );
    }

    #[test]
    fn sqlite_keeps_multi_row_inserts_of_at_most_its_parameter_bound() {
        let stmts = statements::<event::Entity>(
            DbBackend::Sqlite,
            (0..1200).map(|_| event(false)).collect(),
            Key::full(&[event::Column::DedupeKey]),
            Some(event::Column::Id),
        )
        .unwrap();
        assert_eq!(stmts.len(), 3);
        assert!(stmts[0].sql.contains("ON CONFLICT (\"dedupe_key\") DO NOTHING"), "{}", stmts[0].sql);
        assert!(stmts[0].sql.ends_with("RETURNING \"id\""), "{}", stmts[0].sql);
        assert_eq!(stmts[2].values.as_ref().unwrap().0.len(), 200 * 10);
    }

    #[test]
    fn a_partial_unique_key_names_its_predicate_on_both_backends() {
        // The invoices' idempotency index: unique over (merchant, environment, key) where a key is set.
        let key = Key {
            columns: &[event::Column::MerchantId, event::Column::DedupeKey][..],
            set: Some(event::Column::DedupeKey),
        };
        let conflict = "ON CONFLICT (\"merchant_id\", \"dedupe_key\") WHERE \"dedupe_key\" IS NOT NULL DO NOTHING";
        for backend in [DbBackend::Postgres, DbBackend::Sqlite] {
            let stmts = statements::<event::Entity>(backend, vec![event(false)], key, Some(event::Column::Id)).unwrap();
            assert!(stmts[0].sql.contains(conflict), "{backend:?}: {}", stmts[0].sql);
            assert!(stmts[0].sql.ends_with("RETURNING \"id\""), "{backend:?}: {}", stmts[0].sql);
        }
    }

    #[test]
    fn no_rows_is_no_statement() {
        for backend in [DbBackend::Postgres, DbBackend::Sqlite] {
            assert!(statements::<event::Entity>(backend, Vec::new(), Key::full(&[]), None).unwrap().is_empty());
        }
    }
}
