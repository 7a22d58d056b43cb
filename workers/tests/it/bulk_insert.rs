//! `domain::bulk`: a batch written in one `UNNEST` statement (PostgreSQL, feature `pg-tests`) or
//! multi-row inserts (SQLite) reads back exactly as the models held it, missing values included
//! (a column missing in every row, in some rows, in none), JSON as JSON; rows whose key is there
//! already are skipped and not returned.

use chrono::{SubsecRound, Utc};
use entity::{Amount, Environment, event, payment};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde_json::json;
use testkit::TestApp;
use uuid::Uuid;

fn event(merchant: Uuid, n: u32, dispatched: bool, payout: bool) -> event::Model {
    let now = Utc::now().trunc_subsecs(6);
    let mut data = json!({"invoice_id": Uuid::now_v7().to_string(), "n": n, "nested": {"list": [1, "two", null]}});
    if payout {
        data["payout_id"] = json!(Uuid::now_v7().to_string());
    }
    let mut e = event::Model::new(
        merchant,
        Environment::Test,
        "invoice.paid",
        format!("bulk-{n}-{}", Uuid::new_v4()),
        data,
        now,
    );
    e.dispatched_at = dispatched.then_some(now);
    e
}

#[tokio::test]
async fn a_batch_reads_back_as_written_and_rows_already_there_are_skipped() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let db = &app.state.db;

    // Events: dispatched_at missing in some rows, payout_id missing in all but one.
    let first: Vec<event::Model> = (0..3).map(|n| event(merchant, n, n == 1, n == 2)).collect();
    let ids: Vec<Uuid> = domain::bulk::insert_returning::<event::Entity, _, _>(
        db,
        first.clone(),
        &[event::Column::DedupeKey],
        event::Column::Id,
    )
    .await
    .unwrap();
    let mut want: Vec<Uuid> = first.iter().map(|e| e.id).collect();
    let mut got = ids.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "every new row returned");
    let read = event::Entity::find()
        .filter(event::Column::Id.is_in(want.clone()))
        .order_by_asc(event::Column::Id)
        .all(db)
        .await
        .unwrap();
    let mut first_sorted = first.clone();
    first_sorted.sort_by_key(|e| e.id);
    assert_eq!(read, first_sorted, "read back as written");

    // The same three (fresh ids, same dedupe keys) and one new: only the new one is written.
    let mut again: Vec<event::Model> = first.iter().map(|e| event::Model { id: Uuid::now_v7(), ..e.clone() }).collect();
    let fresh = event(merchant, 9, false, false);
    again.push(fresh.clone());
    let ids: Vec<Uuid> = domain::bulk::insert_returning::<event::Entity, _, _>(
        db,
        again,
        &[event::Column::DedupeKey],
        event::Column::Id,
    )
    .await
    .unwrap();
    assert_eq!(ids, vec![fresh.id], "rows whose key is there are skipped and not returned");
    let count =
        domain::bulk::insert::<event::Entity, _>(db, vec![fresh.clone()], &[event::Column::DedupeKey]).await.unwrap();
    assert_eq!(count, 0);
    assert_eq!(domain::bulk::insert::<event::Entity, _>(db, Vec::new(), &[]).await.unwrap(), 0);

    // Payments: numbers, decimals and nullable columns of other types, some missing.
    let invoice = app.create_invoice_id(&key, json!({"currency": "BTC", "amount": "0.5"})).await;
    let now = Utc::now().trunc_subsecs(6);
    let pay = |n: i64| payment::Model {
        block_height: (n % 2 == 0).then_some(800_000 + n),
        credited_amount: (n == 1).then(|| Amount::new(Decimal::new(12_345_678_901, 8))),
        credited_gate_id: (n == 1).then(|| "bitcoin".to_owned()),
        confirmations: n as i32,
        ..payment::Model::detected(
            invoice,
            Environment::Test,
            "bitcoin".into(),
            format!("{:064x}", n + 1),
            n,
            Amount::new(Decimal::new(5 + n, 1)),
            now,
        )
    };
    let payments: Vec<payment::Model> = (0..4).map(pay).collect();
    let written = domain::bulk::insert::<payment::Entity, _>(db, payments.clone(), &[]).await.unwrap();
    assert_eq!(written, 4);
    let read = payment::Entity::find()
        .filter(payment::Column::InvoiceId.eq(invoice))
        .order_by_asc(payment::Column::OutputIndex)
        .all(db)
        .await
        .unwrap();
    assert_eq!(read.len(), 4);
    for (r, w) in read.iter().zip(&payments) {
        assert_eq!(r.amount.0.normalize(), w.amount.0.normalize());
        assert_eq!(r.credited_amount.map(|a| a.0.normalize()), w.credited_amount.map(|a| a.0.normalize()));
        assert_eq!(
            payment::Model { amount: w.amount, credited_amount: w.credited_amount, ..r.clone() },
            w.clone(),
            "read back as written"
        );
    }
}
