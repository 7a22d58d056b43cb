//! A list's total (`meta.pagination.total`) from the counters the database keeps
//! (`list_counts` and the deltas its triggers append; the migration's module doc explains the
//! scheme), so that it costs the same for a merchant a year in as on day one. A list asks for its
//! total through [`crate::owned::total`]; a filter the counters hold ([`Tally`]) is summed here,
//! any other is counted row by row.

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query, SelectStatement, UnionType};
use sea_orm::{ConnectionTrait, DatabaseBackend, DbErr, TransactionTrait};

use crate::keys::Principal;

/// The counted lists (`migration::list_counts::COUNTED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Invoices,
    Payouts,
    Refunds,
    StaticAddresses,
    Events,
    WebhookDeliveries,
    Ledger,
}

impl List {
    pub const ALL: [List; 7] = [
        List::Invoices,
        List::Payouts,
        List::Refunds,
        List::StaticAddresses,
        List::Events,
        List::WebhookDeliveries,
        List::Ledger,
    ];

    pub fn name(self) -> &'static str {
        match self {
            List::Invoices => "invoices",
            List::Payouts => "payouts",
            List::Refunds => "refunds",
            List::StaticAddresses => "static_addresses",
            List::Events => "events",
            List::WebhookDeliveries => "webhook_deliveries",
            List::Ledger => "ledger",
        }
    }
}

/// The counter columns a filter fixes (`None`: any value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Key {
    pub status: Option<String>,
    pub gate_id: Option<String>,
    pub currency: Option<String>,
    pub network: Option<String>,
    /// An event's or a delivery's type, a ledger entry's type.
    pub kind: Option<String>,
}

/// A filter the counters can answer: its list, the columns it fixes and, for the events, a
/// creation window (`created_at >= lo`, `< hi`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub list: List,
    pub key: Key,
    pub window: (Option<DateTime<Utc>>, Option<DateTime<Utc>>),
}

impl Tally {
    pub fn new(list: List, key: Key) -> Tally {
        Tally { list, key, window: (None, None) }
    }
}

/// Which counters a sum reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Days {
    /// The all-time counters.
    Whole,
    /// The per-day counters of the UTC days from the first (inclusive) to the second (exclusive);
    /// `None`: unbounded on that side.
    Range(Option<NaiveDate>, Option<NaiveDate>),
}

/// How a creation window `[lo, hi)` is counted: whole UTC days by their counters, the partial
/// first and last day row by row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub days: Days,
    /// The rows of the partial first day: those created before this instant (and at or after
    /// `lo`, which the list's own filter says).
    pub head_before: Option<DateTime<Utc>>,
    /// The rows of the partial last day: those created at or after this instant (and before `hi`).
    pub tail_from: Option<DateTime<Utc>>,
}

fn midnight(d: NaiveDate) -> DateTime<Utc> {
    d.and_time(NaiveTime::MIN).and_utc()
}

/// The split of the window `[lo, hi)` (at least one bound given), or `None` when it holds no
/// whole day: then its rows are counted, at most two days of them.
pub fn split(lo: Option<DateTime<Utc>>, hi: Option<DateTime<Utc>>) -> Option<Split> {
    let at_midnight = |t: &DateTime<Utc>| *t == midnight(t.date_naive());
    let first = lo.map(|t| if at_midnight(&t) { t.date_naive() } else { t.date_naive() + chrono::Days::new(1) });
    let until = hi.map(|t| t.date_naive());
    if let (Some(a), Some(b)) = (first, until)
        && a >= b
    {
        return None;
    }
    Some(Split {
        days: Days::Range(first, until),
        head_before: lo.filter(|t| !at_midnight(t)).and(first).map(midnight),
        tail_from: hi.filter(|t| !at_midnight(t)).map(|t| midnight(t.date_naive())),
    })
}

const COUNTS: &str = "list_counts";
const DELTAS: &str = "list_count_deltas";

fn col(name: &str) -> Expr {
    Expr::col(Alias::new(name))
}

/// A value written into the statement's text instead of bound: only for the few fixed values
/// of the environment, the list's name and the all-time counter's empty day.
fn text(v: &str) -> Expr {
    Expr::Constant(v.into())
}

/// The `n` of one of the two tables' rows that `key` and `days` select.
///
/// The environment, the list and the all-time day are in the statement's text, the merchant and
/// the key's values bound. With all of them bound PostgreSQL's plan for an average merchant was
/// estimated at twice the cost of one made for a large merchant's values (the environment and
/// the list are few and skewed), so it planned the statement afresh at every call: as long as
/// the sum's execution on the grown benchmark database. With them in the text the cached plan
/// is reused.
fn part(table: &str, who: &Principal, list: List, key: &Key, days: Days) -> SelectStatement {
    let mut q = Query::select();
    q.column(Alias::new("n"))
        .from(Alias::new(table))
        .and_where(col("merchant_id").eq(who.merchant_id))
        .and_where(col("environment").eq(text(who.environment.as_str())))
        .and_where(col("list").eq(text(list.name())));
    let fixed = [
        ("status", &key.status),
        ("gate_id", &key.gate_id),
        ("currency", &key.currency),
        ("network", &key.network),
        ("kind", &key.kind),
    ];
    for (c, v) in fixed {
        if let Some(v) = v {
            q.and_where(col(c).eq(v.as_str()));
        }
    }
    match days {
        // A delta carries its row's day; the fold adds it to the all-time counter as well.
        Days::Whole if table == COUNTS => {
            q.and_where(col("day").eq(text("")));
        }
        Days::Whole => {}
        Days::Range(from, until) => {
            q.and_where(col("day").ne(""));
            if let Some(d) = from {
                q.and_where(col("day").gte(d.format("%Y-%m-%d").to_string()));
            }
            if let Some(d) = until {
                q.and_where(col("day").lt(d.format("%Y-%m-%d").to_string()));
            }
        }
    }
    q
}

/// The rows of `list` that `who` holds with `key`, on `days`: the folded counters and the
/// deltas not folded yet, summed in one statement (one snapshot, so a fold running meanwhile
/// moves a delta either wholly before or wholly after it).
pub async fn sum(db: &impl ConnectionTrait, who: &Principal, list: List, key: &Key, days: Days) -> Result<u64, DbErr> {
    total_of(db, &statement(who, list, key, days)).await
}

/// The statement [`sum`] runs.
pub fn statement(who: &Principal, list: List, key: &Key, days: Days) -> SelectStatement {
    let mut both = part(COUNTS, who, list, key, days);
    both.union(UnionType::All, part(DELTAS, who, list, key, days));
    Query::select()
        .expr(Expr::cust("CAST(COALESCE(SUM(n), 0) AS BIGINT)"))
        .from_subquery(both, Alias::new("rows_of_list"))
        .to_owned()
}

/// Runs a [`statement`].
pub async fn total_of(db: &impl ConnectionTrait, statement: &SelectStatement) -> Result<u64, DbErr> {
    let n: i64 = match db.query_one(statement).await? {
        Some(r) => r.try_get_by_index(0)?,
        None => 0,
    };
    u64::try_from(n).map_err(|_| DbErr::Custom(format!("a list count went negative: {n}")))
}

/// Deltas folded into the counters per statement.
pub const FOLD_BATCH: u64 = 10_000;

const KEY: &str = "merchant_id, environment, list, status, gate_id, currency, network, kind, day";
const UNDATED: &str = "merchant_id, environment, list, status, gate_id, currency, network, kind, ''";

/// Moves up to `batch` deltas, oldest first, into the counters (each into its day's counter
/// and, if it has a day, into the all-time one too), in one transaction; returns how many.
/// Safe to run from several processes at once: on PostgreSQL only one folds at a time (an
/// advisory lock; the others return 0), and the deltas are taken by `DELETE … RETURNING`, so a
/// delta is added by the transaction that deleted it and by no other.
pub async fn fold_once<C>(db: &C, batch: u64) -> Result<u64, DbErr>
where
    C: ConnectionTrait + TransactionTrait<Transaction = sea_orm::DatabaseTransaction>,
{
    let backend = db.get_database_backend();
    let txn = crate::db::begin_write(db).await?;
    let upsert = |source: &str| {
        format!(
            "INSERT INTO {COUNTS} ({KEY}, n) \
             SELECT {KEY}, SUM(n) FROM (SELECT {KEY}, n FROM {source} UNION ALL SELECT {UNDATED}, n FROM {source} WHERE day <> '') AS keyed \
             WHERE true GROUP BY {KEY} ORDER BY {KEY} \
             ON CONFLICT ({KEY}) DO UPDATE SET n = {COUNTS}.n + excluded.n"
        )
    };
    let moved = match backend {
        DatabaseBackend::Postgres => {
            let locked = txn
                .query_one_raw(sea_orm::Statement::from_string(
                    backend,
                    "SELECT pg_try_advisory_xact_lock(hashtext('list_count_fold'))",
                ))
                .await?
                .map(|r| r.try_get_by_index::<bool>(0))
                .transpose()?
                .unwrap_or(false);
            if !locked {
                return Ok(0);
            }
            let sql = format!(
                "WITH moved AS (DELETE FROM {DELTAS} WHERE id IN (SELECT id FROM {DELTAS} ORDER BY id LIMIT {batch}) \
                 RETURNING {KEY}, n), folded AS ({}) SELECT COUNT(*) FROM moved",
                upsert("moved")
            );
            let row = txn.query_one_raw(sea_orm::Statement::from_string(backend, sql)).await?;
            row.map(|r| r.try_get_by_index::<i64>(0)).transpose()?.unwrap_or(0)
        }
        _ => {
            // One writer at a time (the write transaction), so the deltas up to `last` are
            // exactly the ones read, added and deleted here.
            let sql =
                format!("SELECT MAX(id), COUNT(*) FROM (SELECT id FROM {DELTAS} ORDER BY id LIMIT {batch}) AS oldest");
            let row = txn.query_one_raw(sea_orm::Statement::from_string(backend, sql)).await?;
            let (last, n) = match row {
                Some(r) => (r.try_get_by_index::<Option<i64>>(0)?, r.try_get_by_index::<i64>(1)?),
                None => (None, 0),
            };
            let Some(last) = last else { return Ok(0) };
            let source = format!("(SELECT * FROM {DELTAS} WHERE id <= {last})");
            txn.execute_unprepared(&upsert(&source)).await?;
            txn.execute_unprepared(&format!("DELETE FROM {DELTAS} WHERE id <= {last}")).await?;
            n
        }
    };
    txn.commit().await?;
    Ok(u64::try_from(moved).unwrap_or(0))
}

/// Folds batch after batch until fewer than a full batch was left, at most `max_batches`
/// (writers may keep appending); returns the deltas folded.
pub async fn fold<C>(db: &C, max_batches: u32) -> Result<u64, DbErr>
where
    C: ConnectionTrait + TransactionTrait<Transaction = sea_orm::DatabaseTransaction>,
{
    let mut total = 0;
    for _ in 0..max_batches {
        let n = fold_once(db, FOLD_BATCH).await?;
        total += n;
        if n < FOLD_BATCH {
            break;
        }
        tokio::task::yield_now().await;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).single().expect("valid")
    }
    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, d).expect("valid")
    }

    #[test]
    fn the_counted_lists_are_the_migrations() {
        let names: Vec<&str> = migration::list_counts::COUNTED.iter().map(|c| c.list).collect();
        assert_eq!(List::ALL.map(List::name).to_vec(), names);
    }

    #[test]
    fn a_window_is_whole_days_by_counter_and_its_partial_days_by_rows() {
        // Partial on both sides: 2 March from 10:00, 3-4 March whole, 5 March until 06:30.
        let s = split(Some(at(2, 10, 0)), Some(at(5, 6, 30))).expect("has whole days");
        assert_eq!(s.days, Days::Range(Some(day(3)), Some(day(5))));
        assert_eq!(s.head_before, Some(at(3, 0, 0)));
        assert_eq!(s.tail_from, Some(at(5, 0, 0)));
        // Bounds at midnight: whole days only.
        let s = split(Some(at(2, 0, 0)), Some(at(5, 0, 0))).expect("has whole days");
        assert_eq!(s, Split { days: Days::Range(Some(day(2)), Some(day(5))), head_before: None, tail_from: None });
        // One side open.
        let s = split(None, Some(at(5, 6, 30))).expect("open start");
        assert_eq!(s, Split { days: Days::Range(None, Some(day(5))), head_before: None, tail_from: Some(at(5, 0, 0)) });
        let s = split(Some(at(2, 10, 0)), None).expect("open end");
        assert_eq!(s, Split { days: Days::Range(Some(day(3)), None), head_before: Some(at(3, 0, 0)), tail_from: None });
    }

    #[test]
    fn a_window_without_a_whole_day_is_counted_row_by_row() {
        assert_eq!(split(Some(at(2, 10, 0)), Some(at(3, 6, 0))), None);
        assert_eq!(split(Some(at(2, 10, 0)), Some(at(2, 11, 0))), None);
        assert_eq!(split(Some(at(2, 10, 0)), Some(at(3, 0, 0))), None);
        assert_eq!(split(Some(at(2, 0, 0)), Some(at(2, 0, 0))), None);
        // Exactly one whole day.
        let s = split(Some(at(2, 0, 0)), Some(at(3, 0, 0))).expect("one whole day");
        assert_eq!(s.days, Days::Range(Some(day(2)), Some(day(3))));
    }

    #[test]
    fn a_sum_binds_the_merchant_and_the_key_and_writes_the_fixed_values_into_its_text() {
        let merchant = uuid::Uuid::now_v7();
        let who = Principal {
            key_id: uuid::Uuid::now_v7().into(),
            merchant_id: merchant.into(),
            environment: entity::Environment::Live,
            permissions: crate::keys::Permissions::default(),
            user_id: None,
        };
        let key = Key { gate_id: Some("tron_usdt".into()), ..Key::default() };
        let (sql, values) =
            statement(&who, List::Ledger, &key, Days::Whole).build(sea_orm::sea_query::PostgresQueryBuilder);
        for fixed in [r#""environment" = 'live'"#, r#""list" = 'ledger'"#, r#""day" = ''"#] {
            assert!(sql.contains(fixed), "{fixed} in {sql}");
        }
        // The merchant and the gate, once for the counters and once for the deltas.
        let gate = sea_orm::Value::from("tron_usdt");
        assert_eq!(values.0, [merchant.into(), gate.clone(), merchant.into(), gate]);
    }
}
