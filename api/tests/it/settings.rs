//! The merchant's own settings (`GET`/`PATCH /v1/settings`, permissions `settings:read` and
//! `settings:write`): a change applies to new invoices, is all or nothing with every bad field
//! named, is recorded in the audit log with the key that made it, and touches no other merchant.

use api::auth::Permission;
use entity::Environment;
use serde_json::json;
use testkit::TestApp;

#[tokio::test]
async fn settings_are_read_changed_for_new_invoices_and_audited() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let r = app.get("/v1/settings", Some(&key)).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(
        (r.data()["base_currency"].as_str(), r.data()["invoice_lifetime_secs"].as_i64()),
        (Some("USD"), Some(3600))
    );
    assert_eq!(r.data()["underpayment_tolerance_percent"], "0");

    let r = app
        .patch(
            "/v1/settings",
            Some(&key),
            &json!({"invoice_lifetime_secs": 900, "underpayment_tolerance_percent": "2.5"}),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(
        (r.data()["invoice_lifetime_secs"].as_i64(), r.data()["base_currency"].as_str()),
        (Some(900), Some("USD"))
    );
    assert_eq!(r.data()["underpayment_tolerance_percent"], "2.5");
    // New invoices take the new lifetime.
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let created = chrono::DateTime::parse_from_rfc3339(inv["created_at"].as_str().unwrap()).unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(inv["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!((expires - created).num_seconds(), 900, "{inv}");

    // The audit log names the key, with the settings before and after.
    let filter = domain::audit::Filter { merchant_id: Some(merchant), limit: 10, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &filter).await.unwrap();
    let entry = entries.iter().find(|e| e.action == "merchant.settings").expect("audited");
    assert!(entry.actor.starts_with("api_key:"), "{entry:?}");
    assert_eq!(entry.merchant_id, Some(merchant));
    assert_eq!(entry.before.as_ref().unwrap()["invoice_lifetime_secs"], 3600);
    assert_eq!(entry.after.as_ref().unwrap()["invoice_lifetime_secs"], 900);
}

#[tokio::test]
async fn a_bad_change_names_every_field_and_writes_nothing() {
    let (app, _, key) = TestApp::with_test_key().await;
    let bad = json!({"base_currency": "usd", "invoice_lifetime_secs": 30, "underpayment_tolerance_percent": "51"});
    let r = app.patch("/v1/settings", Some(&key), &bad).await;
    r.assert_error(400, "validation_error", Some("base_currency"));
    r.assert_error(400, "validation_error", Some("invoice_lifetime_secs"));
    r.assert_error(400, "validation_error", Some("underpayment_tolerance_percent"));
    // One good field with a bad one: nothing is written.
    let r = app.patch("/v1/settings", Some(&key), &json!({"base_currency": "EUR", "invoice_lifetime_secs": 30})).await;
    r.assert_error(400, "validation_error", Some("invoice_lifetime_secs"));
    let r = app.patch("/v1/settings", Some(&key), &json!({"payout_auto_approve": true})).await;
    r.assert_error(400, "validation_error", Some("payout_auto_approve"));
    let now = app.get("/v1/settings", Some(&key)).await;
    assert_eq!(
        (now.data()["base_currency"].as_str(), now.data()["invoice_lifetime_secs"].as_i64()),
        (Some("USD"), Some(3600))
    );
}

#[tokio::test]
async fn settings_need_their_permissions_and_stay_with_their_merchant() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let reader = app.key(merchant, Environment::Test, &[Permission::SettingsRead]).await;
    let invoices_only = app.key(merchant, Environment::Test, &[Permission::InvoicesWrite]).await;
    assert_eq!(app.get("/v1/settings", Some(&reader)).await.status.as_u16(), 200);
    app.patch("/v1/settings", Some(&reader), &json!({"base_currency": "EUR"})).await.assert_error(
        403,
        "forbidden",
        None,
    );
    app.get("/v1/settings", Some(&invoices_only)).await.assert_error(403, "forbidden", None);
    app.get("/v1/settings", None).await.assert_error(401, "unauthorized", None);

    // A live key of the same merchant sees the same settings; another merchant's do not move.
    let (_, other) = app.test_key().await;
    let r = app.patch("/v1/settings", Some(&key), &json!({"base_currency": "EUR"})).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    let live = app.key(merchant, Environment::Live, &[Permission::SettingsRead]).await;
    assert_eq!(app.get("/v1/settings", Some(&live)).await.data()["base_currency"], "EUR");
    assert_eq!(app.get("/v1/settings", Some(&other)).await.data()["base_currency"], "USD");
}

#[tokio::test]
async fn the_payer_reply_to_address_is_set_checked_and_removed() {
    let (app, _, key) = TestApp::with_test_key().await;
    assert!(app.get("/v1/settings", Some(&key)).await.data()["payer_reply_to"].is_null());
    let r = app.patch("/v1/settings", Some(&key), &json!({"payer_reply_to": "support@shop.example"})).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(r.data()["payer_reply_to"], "support@shop.example");
    let r = app
        .patch("/v1/settings", Some(&key), &json!({"payer_reply_to": "support", "invoice_lifetime_secs": 900}))
        .await;
    r.assert_error(400, "validation_error", Some("payer_reply_to"));
    assert_eq!(app.get("/v1/settings", Some(&key)).await.data()["invoice_lifetime_secs"], 3600, "nothing written");
    let r = app.patch("/v1/settings", Some(&key), &json!({"payer_reply_to": ""})).await;
    assert!(r.data()["payer_reply_to"].is_null(), "{}", r.body);
}
