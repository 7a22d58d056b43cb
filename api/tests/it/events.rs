//! The event log (`GET /v1/events`, `GET /v1/events/{id}`, permission `events:read`): newest
//! first, filtered by type, time, invoice and payout, each event with exactly the body its
//! webhooks carry, and confined to the key's merchant and environment.

use api::auth::Permission;
use domain::events::{self, EventKind};
use entity::{Environment, event, invoice, payout};
use sea_orm::{EntityTrait, QueryOrder};
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;

fn id(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

async fn invoice_model(app: &TestApp, inv: &Value) -> invoice::Model {
    invoice::Entity::find_by_id(id(inv)).one(&app.state.db).await.unwrap().unwrap()
}

/// For one merchant's test key: an invoice with `invoice.confirming` then `invoice.paid` and a
/// `balance.credited`, and a payout with `payout.completed`. Returns (invoice, payout id).
async fn history(app: &TestApp, merchant: Uuid, key: &str) -> (Value, Uuid) {
    let db = &app.state.db;
    let inv = app.create_invoice(key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let m = invoice_model(app, &inv).await;
    events::emit_invoice(db, EventKind::InvoiceConfirming, &m, None).await.unwrap();
    let paid = invoice::Model { status: entity::InvoiceStatus::Paid, ..m.clone() };
    events::emit(
        db,
        merchant.into(),
        Environment::Test,
        EventKind::InvoicePaid,
        format!("paid:{}", m.id),
        events::invoice_data(&paid, None),
    )
    .await
    .unwrap();
    let credited = json!({"invoice_id": m.id, "payment_id": Uuid::now_v7(), "outcome": "target_credited",
                          "credited_amount": "0.01", "credited_currency": "BTC"});
    events::emit(
        db,
        merchant.into(),
        Environment::Test,
        EventKind::BalanceCredited,
        format!("credit:{}", m.id),
        credited,
    )
    .await
    .unwrap();
    let p = payout::Model::blank(Uuid::now_v7(), merchant, Environment::Test, chrono::Utc::now());
    events::emit_payout(db, EventKind::PayoutCompleted, &p).await.unwrap();
    (inv, p.id)
}

fn types(page: &Value) -> Vec<String> {
    page.as_array().unwrap().iter().map(|e| e["event"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn events_are_listed_newest_first_with_exactly_their_webhook_bodies() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let (inv, _) = history(&app, merchant, &key).await;
    let page = app.get("/v1/events", Some(&key)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(types(page.data()), ["payout.completed", "balance.credited", "invoice.paid", "invoice.confirming"]);
    assert_eq!(page.body["meta"]["pagination"]["total"], 4, "{}", page.body);

    // Each one, listed or fetched, is the webhook body plus its id.
    let rows = event::Entity::find().order_by_desc(event::Column::Id).all(&app.state.db).await.unwrap();
    for (listed, row) in page.data().as_array().unwrap().iter().zip(&rows) {
        let mut body: Value = serde_json::from_str(&domain::webhooks::dispatch::body(row)).unwrap();
        body["id"] = json!(row.id);
        assert_eq!(listed, &body);
        let one = app.get(&format!("/v1/events/{}", row.id), Some(&key)).await;
        assert_eq!(one.status, 200);
        assert_eq!(one.data(), &body);
    }
    let credited = &page.data()[1];
    assert_eq!(credited["event_id"], credited["id"], "balance.credited keeps its stable event_id");
    assert!(page.data()[2].get("event_id").is_none(), "invoice events have none, as in webhooks");
    assert_eq!(page.data()[2]["data"]["invoice_id"], inv["id"]);
}

#[tokio::test]
async fn filters_by_type_invoice_payout_and_time() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let (inv, payout_id) = history(&app, merchant, &key).await;
    let (other, _) = history(&app, merchant, &key).await;
    let get = |q: String| {
        let (app, key) = (&app, &key);
        async move {
            let r = app.get(&format!("/v1/events?{q}"), Some(key)).await;
            assert_eq!(r.status, 200, "{q}: {}", r.body);
            types(r.data())
        }
    };
    assert_eq!(get("type=invoice.paid".into()).await, ["invoice.paid", "invoice.paid"]);
    assert_eq!(
        get(format!("invoice_id={}", inv["id"].as_str().unwrap())).await,
        ["balance.credited", "invoice.paid", "invoice.confirming"]
    );
    assert_eq!(get(format!("payout_id={payout_id}")).await, ["payout.completed"]);
    assert_eq!(get(format!("invoice_id={}&type=balance.credited", other["id"].as_str().unwrap())).await.len(), 1);
    // Time bounds are strict: after the newest, nothing; before the oldest, nothing.
    let all = app.get("/v1/events?limit=100", Some(&key)).await;
    let newest = all.data()[0]["created_at"].as_str().unwrap().to_owned();
    let oldest = all.data()[7]["created_at"].as_str().unwrap().to_owned();
    let enc = |t: &str| t.replace('+', "%2B");
    assert!(get(format!("created_after={}", enc(&newest))).await.is_empty());
    assert!(get(format!("created_before={}", enc(&oldest))).await.is_empty());
    assert_eq!(get("created_after=2020-01-01T00:00:00Z&limit=3".into()).await.len(), 3);

    // Bad values name their parameter.
    for (q, field) in [
        ("type=invoice.nope", "type"),
        ("type=", "type"),
        ("invoice_id=", "invoice_id"),
        ("created_after=yesterday", "created_after"),
        ("created_before=2026-13-01T00:00:00Z", "created_before"),
        ("invoice_id=42", "invoice_id"),
        ("payout_id=x", "payout_id"),
        ("limit=0", "limit"),
    ] {
        app.get(&format!("/v1/events?{q}"), Some(&key)).await.assert_error(400, "validation_error", Some(field));
    }
}

#[tokio::test]
async fn events_stay_with_their_merchant_and_environment_and_need_events_read() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    history(&app, merchant, &key).await;
    let mine = app.get("/v1/events", Some(&key)).await;
    let first = mine.data()[0]["id"].as_str().unwrap().to_owned();

    // Another merchant, and the same merchant's live key, see none of them.
    let (_, stranger) = app.test_key().await;
    let live = app.key(merchant, Environment::Live, &[]).await;
    for k in [&stranger, &live] {
        let r = app.get("/v1/events", Some(k)).await;
        assert_eq!((r.status.as_u16(), r.data().as_array().unwrap().len()), (200, 0), "{}", r.body);
        app.get(&format!("/v1/events/{first}"), Some(k)).await.assert_error(404, "not_found", None);
    }
    // Without events:read: 403; with only it: 200.
    let no_events = app.key(merchant, Environment::Test, &[Permission::InvoicesRead]).await;
    app.get("/v1/events", Some(&no_events)).await.assert_error(403, "forbidden", None);
    let only_events = app.key(merchant, Environment::Test, &[Permission::EventsRead]).await;
    assert_eq!(app.get(&format!("/v1/events/{first}"), Some(&only_events)).await.status, 200);
    app.get("/v1/events", None).await.assert_error(401, "unauthorized", None);
}
