//! API keys managed through the API (`/v1/api_keys`, permissions `keys:read`/`keys:write`): a
//! key made with some of the caller's permissions works at once and is shown once; a key never
//! grants a permission it lacks; a revoked key stops; a rolled key keeps working for its overlap
//! while the new one works; everything stays in the key's merchant and environment and is in
//! the audit log.

use api::auth::Permission;
use entity::Environment;
use serde_json::json;
use testkit::TestApp;

fn id(r: &testkit::Resp) -> String {
    r.data()["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_key_made_through_the_api_works_once_shown_and_never_grants_more_than_its_maker() {
    let (app, merchant, admin) = TestApp::with_test_key().await;
    let body = json!({"permissions": ["invoices:read", "invoices:write"], "label": "shop backend"});
    let r = app.post("/v1/api_keys", Some(&admin), &body).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    let key = r.data()["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("sk_test_"), "{key}");
    assert_eq!(r.data()["permissions"], json!(["invoices:read", "invoices:write"]));
    assert_eq!((r.data()["environment"].as_str(), r.data()["active"].as_bool()), (Some("test"), Some(true)));
    // It works at once, within its permissions only.
    let inv = app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.01"})).await;
    assert_eq!(inv.status.as_u16(), 201, "{}", inv.body);
    app.get("/v1/balances", Some(&key)).await.assert_error(403, "forbidden", None);
    // Listed without the key itself.
    let list = app.get("/v1/api_keys", Some(&admin)).await;
    assert_eq!(list.status.as_u16(), 200, "{}", list.body);
    assert_eq!(list.data().as_array().unwrap().len(), 2);
    assert!(!list.body.to_string().contains(&key[8..]), "the key is never shown again");

    // The new key cannot make a key beyond itself (nor any key: it lacks keys:write).
    app.post("/v1/api_keys", Some(&key), &json!({"permissions": ["invoices:read"]})).await.assert_error(
        403,
        "forbidden",
        None,
    );
    let maker = app.key(merchant, Environment::Test, &[Permission::KeysWrite, Permission::InvoicesRead]).await;
    let wider =
        app.post("/v1/api_keys", Some(&maker), &json!({"permissions": ["invoices:read", "payouts:write"]})).await;
    wider.assert_error(403, "forbidden", Some("permissions"));
    assert!(wider.body["error"]["message"].as_str().unwrap().contains("payouts:write"), "{}", wider.body);
    let narrower = app.post("/v1/api_keys", Some(&maker), &json!({"permissions": ["invoices:read"]})).await;
    assert_eq!(narrower.status.as_u16(), 201, "{}", narrower.body);
    app.post("/v1/api_keys", Some(&admin), &json!({"permissions": ["invoices:admin"]})).await.assert_error(
        400,
        "validation_error",
        Some("permissions[0]"),
    );
    app.post("/v1/api_keys", Some(&admin), &json!({"permissions": []})).await.assert_error(
        400,
        "validation_error",
        Some("permissions"),
    );
    assert_eq!(app.get("/v1/api_keys", Some(&admin)).await.data().as_array().unwrap().len(), 4, "nothing else made");

    // The audit log names the maker.
    let filter = domain::audit::Filter { merchant_id: Some(merchant), limit: 20, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &filter).await.unwrap();
    assert_eq!(entries.iter().filter(|e| e.action == "api_key.create").count(), 2);
    assert!(entries.iter().all(|e| e.actor.starts_with("api_key:")), "{entries:?}");
}

#[tokio::test]
async fn revoked_keys_stop_and_rolled_keys_overlap_then_stop() {
    let (app, merchant, admin) = TestApp::with_test_key().await;
    let made = app.post("/v1/api_keys", Some(&admin), &json!({"permissions": ["invoices:read"]})).await;
    let key = made.data()["key"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.status.as_u16(), 200);
    let r = app.post(&format!("/v1/api_keys/{}/revoke", id(&made)), Some(&admin), &json!({})).await;
    assert_eq!((r.status.as_u16(), r.data()["active"].as_bool()), (200, Some(false)), "{}", r.body);
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.status.as_u16(), 401, "stopped at once on this process");
    // A revoked key is not rolled.
    let again = app.post(&format!("/v1/api_keys/{}/roll", id(&made)), Some(&admin), &json!({})).await;
    again.assert_error(409, "api_key_revoked", None);

    // Rolled with an overlap: both work; the old one stops when revoked now.
    let made = app.post("/v1/api_keys", Some(&admin), &json!({"permissions": ["invoices:read"], "label": "ci"})).await;
    let old = made.data()["key"].as_str().unwrap().to_owned();
    let rolled =
        app.post(&format!("/v1/api_keys/{}/roll", id(&made)), Some(&admin), &json!({"overlap_secs": 600})).await;
    assert_eq!(rolled.status.as_u16(), 201, "{}", rolled.body);
    let new = rolled.data()["key"].as_str().unwrap().to_owned();
    assert_eq!(
        (rolled.data()["label"].as_str(), rolled.data()["permissions"].clone()),
        (Some("ci"), json!(["invoices:read"]))
    );
    assert_eq!(rolled.data()["replaces"]["active"], true, "in its overlap");
    assert!(rolled.data()["replaces"]["revoked_at"].is_string());
    for k in [&old, &new] {
        assert_eq!(app.get("/v1/invoices", Some(k)).await.status.as_u16(), 200);
    }
    app.post(&format!("/v1/api_keys/{}/roll", id(&made)), Some(&admin), &json!({})).await.assert_error(
        409,
        "api_key_revoked",
        None,
    );
    app.post(&format!("/v1/api_keys/{}/roll", id(&made)), Some(&admin), &json!({"overlap_secs": 604801}))
        .await
        .assert_error(400, "validation_error", Some("overlap_secs"));
    app.post(&format!("/v1/api_keys/{}/revoke", id(&made)), Some(&admin), &json!({})).await;
    assert_eq!(app.get("/v1/invoices", Some(&old)).await.status.as_u16(), 401);
    assert_eq!(app.get("/v1/invoices", Some(&new)).await.status.as_u16(), 200);
    // Rolled with no overlap: the old key stops at once.
    let rolled_now = app
        .post(
            &format!("/v1/api_keys/{}/roll", rolled.data()["id"].as_str().unwrap()),
            Some(&admin),
            &json!({"overlap_secs": 0}),
        )
        .await;
    assert_eq!(rolled_now.status.as_u16(), 201, "{}", rolled_now.body);
    assert_eq!(app.get("/v1/invoices", Some(&new)).await.status.as_u16(), 401);

    // Another merchant's key, or this merchant's live key, is not found from here.
    let (_, stranger) = app.test_key().await;
    app.post(
        &format!("/v1/api_keys/{}/revoke", rolled_now.data()["id"].as_str().unwrap()),
        Some(&stranger),
        &json!({}),
    )
    .await
    .assert_error(404, "not_found", None);
    let live = app.key(merchant, Environment::Live, &[]).await;
    assert_eq!(app.get("/v1/api_keys", Some(&live)).await.data().as_array().unwrap().len(), 1, "its own environment");
    let reader = app.key(merchant, Environment::Test, &[Permission::KeysRead]).await;
    app.post("/v1/api_keys", Some(&reader), &json!({"permissions": ["keys:read"]})).await.assert_error(
        403,
        "forbidden",
        None,
    );
}
