//! Cursor pagination (add-only to spec section 8): `starting_after` and `ending_before` page
//! every list by the id of one of its rows, giving exactly the rows offsets give, in the same
//! order, ties on `created_at` included; both cursors give the rows between them, `offset` skips
//! from the cursor; a cursor that is not one of the caller's rows is 404 naming the parameter.

use chrono::Utc;
use entity::{Environment, invoice};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;

fn ids(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

/// Every id of `path` (with its own query, no `?`), paged by offset.
async fn by_offset(app: &TestApp, key: &str, path: &str, limit: u64) -> Vec<String> {
    let mut all = Vec::new();
    loop {
        let r = app.get(&format!("{path}?limit={limit}&offset={}", all.len()), Some(key)).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        all.extend(ids(&r.body));
        if r.body["meta"]["pagination"]["has_more"] == false {
            return all;
        }
    }
}

/// Every id of `path`, paged forwards by `starting_after`, then backwards by `ending_before`
/// from the last page; both walks must see the same rows.
async fn by_cursor(app: &TestApp, key: &str, path: &str, limit: u64, total: u64) -> Vec<String> {
    let first = app.get(&format!("{path}?limit={limit}"), Some(key)).await;
    assert_eq!(first.status.as_u16(), 200, "{}", first.body);
    let mut pages = vec![ids(&first.body)];
    let mut more = first.body["meta"]["pagination"]["has_more"] == true;
    while more {
        let last = pages.last().unwrap().last().unwrap().clone();
        let r = app.get(&format!("{path}?limit={limit}&starting_after={last}"), Some(key)).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        more = r.body["meta"]["pagination"]["has_more"] == true;
        r.assert_page(total, limit, 0, more);
        pages.push(ids(&r.body));
    }
    let forwards: Vec<String> = pages.concat();
    // Backwards: each page ends right before the first row of the one after it.
    let mut back = pages.last().unwrap().clone();
    let mut first_id = back[0].clone();
    loop {
        let r = app.get(&format!("{path}?limit={limit}&ending_before={first_id}"), Some(key)).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        let page = ids(&r.body);
        let more = r.body["meta"]["pagination"]["has_more"] == true;
        r.assert_page(total, limit, 0, more);
        if page.is_empty() {
            break;
        }
        first_id = page[0].clone();
        back = [page, back].concat();
        if !more {
            break;
        }
    }
    assert_eq!(back, forwards, "backwards by ending_before sees what forwards saw");
    forwards
}

#[tokio::test]
async fn cursors_page_invoices_exactly_as_offsets_do_ties_included() {
    let (app, _, key) = TestApp::with_test_key().await;
    let mut created = Vec::new();
    for i in 0..11 {
        created.push(app.create_invoice_id(&key, json!({"currency": "BTC", "amount": format!("0.00{}", i + 1)})).await);
    }
    // Five of them share one instant: the id breaks the tie, in both walks.
    let same = Utc::now() - chrono::Duration::minutes(5);
    invoice::Entity::update_many()
        .col_expr(invoice::Column::CreatedAt, Expr::value(same))
        .filter(invoice::Column::Id.is_in(created[3..8].to_vec()))
        .exec(&app.state.db)
        .await
        .unwrap();
    for limit in [1, 3, 4, 20] {
        let offsets = by_offset(&app, &key, "/v1/invoices", limit).await;
        assert_eq!(offsets.len(), 11);
        assert_eq!(by_cursor(&app, &key, "/v1/invoices", limit, 11).await, offsets, "limit {limit}");
    }
    // A filter applies as with offsets; the cursor may be any of the caller's invoices.
    let cancel = app.post(&format!("/v1/invoices/{}/cancel", created[5]), Some(&key), &json!({})).await;
    assert_eq!(cancel.status.as_u16(), 200, "{}", cancel.body);
    let pending = by_offset(&app, &key, "/v1/invoices?status=pending&x=1", 2).await;
    let r = app.get(&format!("/v1/invoices?status=pending&limit=20&starting_after={}", created[10]), Some(&key)).await;
    let after_newest: Vec<String> = pending.iter().filter(|id| **id != created[10].to_string()).cloned().collect();
    assert_eq!(ids(&r.body), after_newest);
    let r = app.get(&format!("/v1/invoices?status=pending&starting_after={}", created[5]), Some(&key)).await;
    assert_eq!(r.status.as_u16(), 200, "a cursor outside the filter still places the page: {}", r.body);
    assert!(!ids(&r.body).contains(&created[5].to_string()));
    // The last page after the oldest: empty, nothing more.
    let oldest = by_offset(&app, &key, "/v1/invoices", 20).await.last().unwrap().clone();
    let r = app.get(&format!("/v1/invoices?starting_after={oldest}"), Some(&key)).await;
    assert!(ids(&r.body).is_empty());
    r.assert_page(11, 20, 0, false);
}

#[tokio::test]
async fn the_ledger_events_and_payouts_page_by_cursor_too() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    for i in 0..5 {
        testkit::adjust(&app.state.db, merchant, Environment::Test, "tron_usdt", &format!("{}", i + 1), "fund").await;
    }
    let ledger = "/v1/balances/tron_usdt/ledger";
    let offsets = by_offset(&app, &key, ledger, 2).await;
    assert_eq!(offsets.len(), 5);
    assert_eq!(by_cursor(&app, &key, ledger, 2, 5).await, offsets);
    // Events.
    for i in 0..4 {
        let kind = domain::events::EventKind::Test;
        let payload = json!({"n": i});
        domain::events::emit(&app.state.db, merchant.into(), Environment::Test, kind, format!("cursor-{i}"), payload)
            .await
            .unwrap();
    }
    let events = by_offset(&app, &key, "/v1/events", 2).await;
    assert_eq!(events.len(), 4);
    assert_eq!(by_cursor(&app, &key, "/v1/events", 2, 4).await, events);
    // Payouts (the funded 15 USDT pays three of 4).
    for _ in 0..3 {
        let body = json!({"currency": "USDT", "network": "tron", "amount": "4", "destination": testkit::TRON_DEST});
        let r = app.post("/v1/payouts", Some(&key), &body).await;
        assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    }
    let payouts = by_offset(&app, &key, "/v1/payouts", 2).await;
    assert_eq!(payouts.len(), 3);
    assert_eq!(by_cursor(&app, &key, "/v1/payouts", 2, 3).await, payouts);
    // A ledger cursor is an entry of that ledger: another currency's is 404.
    let r = app.get(&format!("/v1/balances/bitcoin/ledger?starting_after={}", offsets[0]), Some(&key)).await;
    assert_eq!(r.status.as_u16(), 404, "{}", r.body);
    assert!(r.body["error"]["details"][0].as_str().unwrap().starts_with("starting_after"), "{}", r.body);
}

#[tokio::test]
async fn a_cursor_names_one_of_the_callers_rows_and_combines_with_the_others() {
    let app = TestApp::spawn().await;
    let (_, key) = app.test_key().await;
    let (_, other) = app.test_key().await;
    let theirs = app.create_invoice_id(&other, json!({"currency": "BTC", "amount": "0.01"})).await;
    let mut mine = Vec::new();
    for i in 0..6 {
        mine.push(app.create_invoice_id(&key, json!({"currency": "BTC", "amount": format!("0.0{}", i + 1)})).await);
    }
    let all = by_offset(&app, &key, "/v1/invoices", 20).await;
    assert_eq!(all.len(), 6);
    let get = |q: String| {
        let (app, key) = (&app, key.clone());
        async move { app.get(&format!("/v1/invoices?{q}"), Some(&key)).await }
    };
    // Another merchant's invoice and an unknown id name no row of this list: 404 naming the
    // parameter (no other merchant's id is ever confirmed to exist); a non-id is 400.
    for (q, field, status) in [
        (format!("starting_after={theirs}"), "starting_after", 404),
        (format!("ending_before={}", Uuid::now_v7()), "ending_before", 404),
        ("starting_after=not-an-id".to_owned(), "starting_after", 400),
    ] {
        let r = get(q.clone()).await;
        assert_eq!(r.status.as_u16(), status, "{q}: {}", r.body);
        let detail = r.body["error"]["details"][0].as_str().unwrap().to_owned();
        assert!(detail.starts_with(field), "{q}: {detail}");
    }
    // Both cursors: the rows between them, newest first; `offset` skips from the cursor.
    let r = get(format!("starting_after={}&ending_before={}", all[0], all[5])).await;
    assert_eq!(ids(&r.body), all[1..5].to_vec());
    r.assert_page(6, 20, 0, false);
    let r = get(format!("starting_after={}&ending_before={}&limit=2", all[0], all[5])).await;
    assert_eq!(ids(&r.body), all[1..3].to_vec());
    r.assert_page(6, 2, 0, true);
    let r = get(format!("starting_after={}&offset=2&limit=2", all[0])).await;
    assert_eq!(ids(&r.body), all[3..5].to_vec());
    r.assert_page(6, 2, 2, true);
    let r = get(format!("ending_before={}&offset=1&limit=2", all[5])).await;
    assert_eq!(ids(&r.body), all[2..4].to_vec(), "towards newer rows, skipping the nearest one");
    r.assert_page(6, 2, 1, true);
    let r = get(format!("starting_after={}&ending_before={}", all[3], all[2])).await;
    assert!(ids(&r.body).is_empty(), "nothing lies between crossed cursors");
    // Nothing of theirs shows on either side of a cursor of mine.
    for q in [format!("starting_after={}", all[0]), format!("ending_before={}", all[5])] {
        let r = get(q.clone()).await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        assert!(!ids(&r.body).contains(&theirs.to_string()), "{q}: {}", r.body);
    }
    // The OpenAPI document declares both cursors on the lists, and the 404.
    let doc = app.get("/openapi.json", None).await;
    let get_op = &doc.body["paths"]["/v1/invoices"]["get"];
    let params = get_op["parameters"].as_array().unwrap().clone();
    for name in ["starting_after", "ending_before", "offset", "limit"] {
        let p = params.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name} not declared"));
        assert_eq!(p["in"], "query");
    }
    assert!(get_op["responses"].get("404").is_some());
}
