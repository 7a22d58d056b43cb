//! Migration `m20261125_000016_event_refs` on a database holding rows from before it: existing
//! events get their invoice and payout ids from the payload (so `GET /v1/events?invoice_id=`
//! finds history), and existing keys that read invoices are granted `events:read`.

use entity::{api_key, event};
use migration::MigratorTrait;
use sea_orm::sea_query::{Alias, Query};
use sea_orm::{ConnectionTrait, Database, EntityTrait};
use serde_json::json;
use uuid::Uuid;

#[tokio::test]
async fn existing_events_and_keys_are_filled_in() {
    let db = Database::connect("sqlite::memory:").await.unwrap();
    migration::Migrator::up(&db, Some(15)).await.unwrap();
    let merchant = Uuid::now_v7();
    let now = chrono::Utc::now();
    db.execute(
        Query::insert()
            .into_table(Alias::new("merchants"))
            .columns(
                [
                    "id",
                    "name",
                    "base_currency",
                    "invoice_lifetime_secs",
                    "underpayment_tolerance_percent",
                    "created_at",
                    "updated_at",
                ]
                .map(Alias::new),
            )
            .values_panic([
                merchant.into(),
                "M".into(),
                "USD".into(),
                3600i64.into(),
                rust_decimal::Decimal::ZERO.into(),
                now.into(),
                now.into(),
            ]),
    )
    .await
    .unwrap();
    let (invoice, payout) = (Uuid::now_v7(), Uuid::now_v7());
    let events = [
        (Uuid::now_v7(), json!({"invoice_id": invoice, "status": "paid"})),
        (Uuid::now_v7(), json!({"payout_id": payout, "status": "completed"})),
        (Uuid::now_v7(), json!({"n": 1})),
    ];
    for (i, (id, payload)) in events.iter().enumerate() {
        db.execute(
            Query::insert()
                .into_table(Alias::new("events"))
                .columns(
                    ["id", "merchant_id", "environment", "event_type", "dedupe_key", "payload", "created_at"]
                        .map(Alias::new),
                )
                .values_panic([
                    (*id).into(),
                    merchant.into(),
                    "test".into(),
                    "invoice.paid".into(),
                    format!("k{i}").into(),
                    payload.clone().into(),
                    now.into(),
                ]),
        )
        .await
        .unwrap();
    }
    let keys = [(Uuid::now_v7(), json!(["invoices:read", "payouts:read"])), (Uuid::now_v7(), json!(["payouts:read"]))];
    for (i, (id, perms)) in keys.iter().enumerate() {
        db.execute(
            Query::insert()
                .into_table(Alias::new("api_keys"))
                .columns(
                    ["id", "merchant_id", "environment", "key_hash", "key_prefix", "permissions", "created_at"]
                        .map(Alias::new),
                )
                .values_panic([
                    (*id).into(),
                    merchant.into(),
                    "test".into(),
                    format!("{i:064}").into(),
                    format!("sk_test_{i}").into(),
                    perms.clone().into(),
                    now.into(),
                ]),
        )
        .await
        .unwrap();
    }

    migration::Migrator::up(&db, None).await.unwrap();

    let got = |id: Uuid| {
        let db = &db;
        async move { event::Entity::find_by_id(id).one(db).await.unwrap().unwrap() }
    };
    let e = got(events[0].0).await;
    assert_eq!((e.invoice_id, e.payout_id), (Some(invoice), None));
    let e = got(events[1].0).await;
    assert_eq!((e.invoice_id, e.payout_id), (None, Some(payout)));
    let e = got(events[2].0).await;
    assert_eq!((e.invoice_id, e.payout_id), (None, None));
    let perms = |id: Uuid| {
        let db = &db;
        async move { api_key::Entity::find_by_id(id).one(db).await.unwrap().unwrap().permissions }
    };
    assert_eq!(perms(keys[0].0).await, json!(["invoices:read", "payouts:read", "events:read"]));
    assert_eq!(perms(keys[1].0).await, json!(["payouts:read"]), "no invoices:read, no events:read");
}
