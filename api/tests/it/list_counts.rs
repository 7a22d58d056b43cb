//! A list's total (`meta.pagination.total`) comes from the counters the database keeps
//! (`domain::list_counts`, kept by triggers): held here to the rows counted one by one, through
//! inserts, status changes and deletes, before, during and after the fold, for each filter the
//! counters answer, and for event windows whose first and last day are partial. On SQLite and,
//! with `pg-tests`, on PostgreSQL.

use chrono::{Duration, DurationRound, TimeDelta, Utc};
use domain::keys::{Permissions, Principal};
use domain::list_counts::{self, List};
use domain::owned::{self, Filter, Owned};
use entity::{Environment, InvoiceStatus, event, invoice};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter, Statement};
use serde_json::json;
use testkit::TestApp;
use uuid::Uuid;

fn principal(merchant: Uuid, environment: Environment) -> Principal {
    Principal {
        key_id: Uuid::nil().into(),
        merchant_id: merchant.into(),
        environment,
        permissions: Permissions::all(),
        user_id: None,
    }
}

/// The total of `f` for `who` equals its rows counted, and it came from the counters.
async fn same<E: Owned>(db: &DatabaseConnection, who: &Principal, f: &impl Filter<E>, what: &str) -> u64 {
    assert!(f.tally().is_some(), "{what}: the counters should answer this filter");
    let counted = f.apply(who.rows()).count(db).await.unwrap();
    let total = owned::total(db, who, f).await.unwrap();
    assert_eq!(total, counted, "{what}: total from the counters against the rows counted");
    total
}

/// Every counter, folded or not, equals its table's rows grouped by the counter's key: per
/// day and all days for the lists counted per day.
async fn counters_match_rows(db: &DatabaseConnection) {
    let backend = db.get_database_backend();
    let key = "merchant_id, environment, list, status, gate_id, currency, network, kind";
    for c in migration::list_counts::COUNTED {
        for dated in if c.day { vec![false, true] } else { vec![false] } {
            let (counts_day, delta_day, day) =
                if dated { ("day <> ''", "day <> ''", "day") } else { ("day = ''", "1 = 1", "''") };
            let sql = format!(
                "SELECT {key}, d, SUM(n) FROM (
                    SELECT {key}, {day} AS d, n FROM ({rows}) AS r
                    UNION ALL SELECT {key}, {day} AS d, -n FROM list_counts WHERE list = '{list}' AND {counts_day}
                    UNION ALL SELECT {key}, {day} AS d, -n FROM list_count_deltas WHERE list = '{list}' AND {delta_day}
                 ) AS diff GROUP BY {key}, d HAVING SUM(n) <> 0",
                rows = c.grouped_sql(backend, dated),
                list = c.list,
            );
            let off = db.query_all_raw(Statement::from_string(backend, sql)).await.unwrap();
            assert!(off.is_empty(), "{} (per day: {dated}): {} counters differ from the rows", c.list, off.len());
        }
    }
}

async fn deltas(db: &DatabaseConnection) -> i64 {
    let backend = db.get_database_backend();
    let row = db
        .query_one_raw(Statement::from_string(backend, "SELECT COUNT(*) FROM list_count_deltas"))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

async fn invoice_totals(db: &DatabaseConnection, who: &Principal) -> Vec<u64> {
    use domain::invoices::service::ListFilter;
    let mut out = Vec::new();
    for (what, f) in [
        ("all", ListFilter::default()),
        ("pending", ListFilter { status: Some(InvoiceStatus::Pending), ..Default::default() }),
        ("paid", ListFilter { status: Some(InvoiceStatus::Paid), ..Default::default() }),
        ("BTC", ListFilter { currency: Some("BTC".into()), ..Default::default() }),
        ("usdt (asset code)", ListFilter { currency: Some("usdt".into()), ..Default::default() }),
        ("tron_usdt (gate)", ListFilter { currency: Some("tron_usdt".into()), ..Default::default() }),
        ("network tron", ListFilter { network: Some("tron".into()), ..Default::default() }),
        (
            "paid BTC on bitcoin",
            ListFilter {
                status: Some(InvoiceStatus::Paid),
                currency: Some("BTC".into()),
                network: Some("bitcoin".into()),
                ..Default::default()
            },
        ),
    ] {
        out.push(same(db, who, &f, what).await);
    }
    out
}

#[tokio::test]
async fn invoice_totals_equal_their_rows_through_inserts_changes_deletes_and_folds() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    let who = principal(merchant, Environment::Test);
    // Another merchant's invoices never count.
    let (_, other_key) = app.test_key().await;
    app.create_invoice_id(&other_key, json!({"currency": "BTC", "amount": "0.5"})).await;

    let mut ids = Vec::new();
    for (i, currency) in
        ["BTC", "BTC", "ethereum", "tron_usdt", "tron_usdt", "ethereum_usdt", "BTC", "ethereum"].iter().enumerate()
    {
        let amount = format!("{}.{:02}", i + 1, i);
        ids.push(app.create_invoice_id(&key, json!({"currency": currency, "amount": amount})).await);
    }
    assert!(deltas(db).await > 0, "the inserts appended deltas");
    assert_eq!(invoice_totals(db, &who).await, vec![8, 8, 0, 3, 3, 2, 2, 0]);
    // The API's envelope says the same.
    app.page("/v1/invoices?currency=BTC&limit=2", &key, [3, 2, 0], true).await;

    // Status changes move rows between counters, only when the status changes.
    let set = |status: InvoiceStatus, which: Vec<Uuid>| {
        invoice::Entity::update_many()
            .col_expr(invoice::Column::Status, Expr::value(status.as_str()))
            .filter(invoice::Column::Id.is_in(which))
    };
    let before = deltas(db).await;
    set(InvoiceStatus::Paid, vec![ids[0], ids[1], ids[3]]).exec(db).await.unwrap();
    // Two BTC and one tron_usdt invoice from pending to paid: on PostgreSQL one delta per key
    // and statement (pending BTC -2, pending tron_usdt -1, paid BTC +2, paid tron_usdt +1); on
    // SQLite (row triggers) two per row.
    let per_statement = db.get_database_backend() == sea_orm::DatabaseBackend::Postgres;
    assert_eq!(deltas(db).await - before, if per_statement { 4 } else { 6 });
    let before = deltas(db).await;
    set(InvoiceStatus::Paid, vec![ids[0]]).exec(db).await.unwrap();
    assert_eq!(deltas(db).await, before, "an update that changes no counted column appends nothing");
    set(InvoiceStatus::Expired, vec![ids[2]]).exec(db).await.unwrap();
    assert_eq!(invoice_totals(db, &who).await, vec![8, 4, 3, 3, 3, 2, 2, 2]);
    counters_match_rows(db).await;

    // Part of the deltas folded, then the rest: the totals never move.
    assert_eq!(list_counts::fold_once(db, 3).await.unwrap(), 3);
    assert_eq!(invoice_totals(db, &who).await, vec![8, 4, 3, 3, 3, 2, 2, 2]);
    counters_match_rows(db).await;
    list_counts::fold(db, 100).await.unwrap();
    assert_eq!(deltas(db).await, 0, "everything folded");
    assert_eq!(invoice_totals(db, &who).await, vec![8, 4, 3, 3, 3, 2, 2, 2]);
    counters_match_rows(db).await;

    // A delete (no code path deletes an invoice today; the counter must still follow).
    invoice::Entity::delete_by_id(ids[7]).exec(db).await.unwrap();
    set(InvoiceStatus::Pending, vec![ids[3]]).exec(db).await.unwrap();
    assert_eq!(invoice_totals(db, &who).await, vec![7, 4, 2, 3, 3, 2, 2, 2]);
    list_counts::fold(db, 100).await.unwrap();
    assert_eq!(invoice_totals(db, &who).await, vec![7, 4, 2, 3, 3, 2, 2, 2]);
    counters_match_rows(db).await;
    app.page("/v1/invoices?status=paid&limit=1", &key, [2, 1, 0], true).await;
}

#[tokio::test]
async fn event_windows_sum_whole_days_and_count_their_partial_first_and_last_day() {
    use domain::events::query::ListFilter;
    let (app, merchant, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    let who = principal(merchant, Environment::Test);
    // Events over six days, three a day at 01:00, 11:00 and 21:00, two types.
    let today = Utc::now().duration_trunc(TimeDelta::days(1)).unwrap();
    let start = today - Duration::days(5);
    let mut rows = Vec::new();
    for d in 0..6 {
        for (h, kind) in [(1, "invoice.paid"), (11, "invoice.expired"), (21, "invoice.paid")] {
            let at = start + Duration::days(d) + Duration::hours(h);
            let e = event::Model::new(merchant, Environment::Test, kind, Uuid::new_v4().to_string(), json!({}), at);
            rows.push(event::ActiveModel::from(e));
        }
    }
    event::Entity::insert_many(rows).exec_without_returning(db).await.unwrap();
    let day = |d: i64, h: i64| start + Duration::days(d) + Duration::hours(h);
    let windows = [
        ("no window", None, None),
        ("partial first and last day", Some(day(1, 5)), Some(day(4, 12))),
        ("whole days", Some(day(1, 0)), Some(day(4, 0))),
        ("within one day", Some(day(2, 5)), Some(day(2, 22))),
        ("across one midnight", Some(day(2, 12)), Some(day(3, 12))),
        ("open start", None, Some(day(3, 12))),
        ("open end", Some(day(3, 12)), None),
        ("bounds on an event", Some(day(1, 1)), Some(day(4, 21))),
    ];
    let check = || async {
        let mut out = Vec::new();
        for (what, after, before) in windows {
            for kind in [None, Some("invoice.paid")] {
                let f =
                    ListFilter { event_type: kind, created_after: after, created_before: before, ..Default::default() };
                out.push(same(db, &who, &f, &format!("{what}, type {kind:?}")).await);
            }
        }
        out
    };
    // created_after is strict, created_before too: "bounds on an event" leaves both out.
    let expected = vec![18, 12, 10, 6, 9, 6, 2, 1, 3, 2, 11, 7, 7, 5, 10, 6];
    assert_eq!(check().await, expected);
    list_counts::fold(db, 100).await.unwrap();
    assert_eq!(check().await, expected);
    counters_match_rows(db).await;
    // A filter the counters do not hold is counted.
    let f = ListFilter { invoice_id: Some(Uuid::new_v4()), ..Default::default() };
    assert!(Filter::<event::Entity>::tally(&f).is_none());
    assert_eq!(owned::total(db, &who, &f).await.unwrap(), 0);
    app.page("/v1/events?type=invoice.paid&limit=5", &key, [12, 5, 0], true).await;
}

#[tokio::test]
async fn ledger_totals_follow_every_posting() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let db = &app.state.db;
    for amount in ["1", "2", "-0.5"] {
        testkit::adjust(db, merchant, Environment::Test, "bitcoin", amount, "fund").await;
    }
    testkit::adjust(db, merchant, Environment::Test, "ethereum", "3", "fund").await;
    let who = principal(merchant, Environment::Test);
    let key_of = |gate: &str| list_counts::Key { gate_id: Some(gate.into()), ..Default::default() };
    let counted = |gate: &'static str| async move {
        entity::ledger_entry::Entity::find()
            .filter(entity::ledger_entry::Column::MerchantId.eq(merchant))
            .filter(entity::ledger_entry::Column::Environment.eq(Environment::Test))
            .filter(entity::ledger_entry::Column::GateId.eq(gate))
            .count(db)
            .await
            .unwrap()
    };
    let btc = list_counts::sum(db, &who, List::Ledger, &key_of("bitcoin"), list_counts::Days::Whole).await.unwrap();
    assert_eq!(btc, counted("bitcoin").await);
    assert!(btc >= 3);
    list_counts::fold(db, 100).await.unwrap();
    let after = list_counts::sum(db, &who, List::Ledger, &key_of("bitcoin"), list_counts::Days::Whole).await.unwrap();
    assert_eq!(after, btc);
    app.page("/v1/balances/BTC/ledger?limit=1", &key, [btc, 1, 0], true).await;
    counters_match_rows(db).await;
}
