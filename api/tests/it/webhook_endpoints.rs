//! A merchant's own webhook endpoints through the API (`/v1/webhook_endpoints`, permissions
//! `webhooks:read`/`webhooks:write`): several per environment, each with its filter; the secret
//! shown once at creation and at rotation and stored sealed; a `test` event to one endpoint;
//! deletion stops the endpoint's open deliveries; another merchant or environment sees nothing
//! (404); the failed deliveries of a time range redelivered, bounded; every change audited with
//! the key, never a secret. Also the migration to endpoints with ids, on a database holding an
//! endpoint and deliveries from before it.

use api::auth::Permission;
use chrono::{Duration, Utc};
use entity::{DeliveryStatus, Environment, webhook_delivery, webhook_endpoint};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;

const KEY: &str = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100";

async fn app() -> TestApp {
    TestApp::spawn_with(|c| {
        c.webhooks.secret_key = Some(domain::config::Redacted(KEY.into()));
        c.webhooks.allow_insecure_targets = true;
    })
    .await
}

fn sbox() -> domain::webhooks::secrets::SecretBox {
    domain::webhooks::secrets::SecretBox::new(domain::webhooks::secrets::SecretBox::parse_key(KEY).unwrap())
}

async fn delete(app: &TestApp, path: &str, key: &str) -> testkit::Resp {
    app.send(app.http.delete(app.url(path)).header("X-API-Key", key)).await
}

fn id(r: &testkit::Resp) -> String {
    r.data()["id"].as_str().unwrap().to_owned()
}

async fn create(app: &TestApp, key: &str, body: Value) -> testkit::Resp {
    let r = app.post("/v1/webhook_endpoints", Some(key), &body).await;
    assert_eq!(r.status.as_u16(), 201, "{}", r.body);
    r
}

#[tokio::test]
async fn webhook_endpoints_are_managed_with_the_secret_shown_once_and_every_change_audited() {
    let app = app().await;
    let (merchant, key) = app.test_key().await;
    let made = create(
        &app,
        &key,
        json!({"url": "http://127.0.0.1:9/paid", "description": "paid only", "enabled_events": ["invoice.paid"]}),
    )
    .await;
    let secret = made.data()["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(made.data()["enabled_events"], json!(["invoice.paid"]));
    assert_eq!((made.data()["environment"].as_str(), made.data()["disabled"].as_bool()), (Some("test"), Some(false)));
    let all = create(&app, &key, json!({"url": "http://127.0.0.1:9/all"})).await;
    assert_eq!(all.data()["enabled_events"], json!([]), "no filter: every event");
    let (paid_id, all_id) = (id(&made), id(&all));

    // Sealed in the database, opened with the operator's key, and never shown again.
    let row = webhook_endpoint::Entity::find_by_id(paid_id.parse::<Uuid>().unwrap())
        .one(&app.state.db)
        .await
        .unwrap()
        .unwrap();
    assert!(!row.secret_ciphertext.contains(&secret["whsec_".len()..]));
    assert_eq!(domain::webhooks::endpoints::signing_secrets(&sbox(), &row, Utc::now()).unwrap(), vec![secret.clone()]);
    let list = app.get("/v1/webhook_endpoints", Some(&key)).await;
    assert_eq!(list.status.as_u16(), 200, "{}", list.body);
    let ids: Vec<&str> = list.data().as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [paid_id.as_str(), all_id.as_str()], "oldest first");
    assert!(!list.body.to_string().contains(&secret[6..]) && list.data()[0].get("secret").is_none());
    let one = app.get(&format!("/v1/webhook_endpoints/{paid_id}"), Some(&key)).await;
    assert_eq!((one.status.as_u16(), one.data()["description"].as_str()), (200, Some("paid only")));

    // Change: URL, filter, description cleared, disabled; the secret stays.
    let path = format!("/v1/webhook_endpoints/{paid_id}");
    let body = json!({"url": "http://127.0.0.1:9/v2", "enabled_events": ["invoice.paid", "payout.failed"], "description": null, "disabled": true});
    let changed = app.patch(&path, Some(&key), &body).await;
    assert_eq!(changed.status.as_u16(), 200, "{}", changed.body);
    assert_eq!(changed.data()["url"], "http://127.0.0.1:9/v2");
    assert_eq!(changed.data()["enabled_events"], json!(["invoice.paid", "payout.failed"]));
    assert_eq!((changed.data()["description"].is_null(), changed.data()["disabled"].as_bool()), (true, Some(true)));
    let again = app.patch(&path, Some(&key), &json!({"disabled": false})).await;
    assert_eq!(again.data()["url"], "http://127.0.0.1:9/v2", "absent fields stay");

    // Rotation: a new secret once; the previous one keeps signing during the overlap.
    let rotated = app.post(&format!("{path}/rotate_secret"), Some(&key), &json!({})).await;
    assert_eq!(rotated.status.as_u16(), 200, "{}", rotated.body);
    let new = rotated.data()["secret"].as_str().unwrap().to_owned();
    assert!(new.starts_with("whsec_") && new != secret);
    assert!(rotated.data()["previous_secret_expires_at"].is_string(), "{}", rotated.body);
    let row = webhook_endpoint::Entity::find_by_id(paid_id.parse::<Uuid>().unwrap())
        .one(&app.state.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        domain::webhooks::endpoints::signing_secrets(&sbox(), &row, Utc::now()).unwrap(),
        vec![new.clone(), secret.clone()]
    );

    // A test event to this endpoint only.
    let test = app.post(&format!("{path}/test"), Some(&key), &json!({})).await;
    assert_eq!(test.status.as_u16(), 201, "{}", test.body);
    let deliveries = webhook_delivery::Entity::find().all(&app.state.db).await.unwrap();
    assert_eq!(deliveries.len(), 1, "one delivery, to the named endpoint only");
    assert_eq!(deliveries[0].endpoint_id.map(|e| e.to_string()), Some(paid_id.clone()));
    assert_eq!(deliveries[0].event_type, "test");
    assert_eq!(test.data()["delivery_id"].as_str(), Some(deliveries[0].id.to_string().as_str()));
    let listed = app.get(&format!("/v1/webhook_deliveries?endpoint_id={paid_id}"), Some(&key)).await;
    assert_eq!(listed.data().as_array().unwrap().len(), 1, "{}", listed.body);
    assert_eq!(listed.data()[0]["endpoint_id"].as_str(), Some(paid_id.as_str()));
    let none = app.get(&format!("/v1/webhook_deliveries?endpoint_id={all_id}"), Some(&key)).await;
    assert_eq!(none.data().as_array().unwrap().len(), 0, "{}", none.body);

    // Deletion: gone, and its open delivery stopped (dead), never sent elsewhere.
    let gone = delete(&app, &path, &key).await;
    assert_eq!(gone.status.as_u16(), 200, "{}", gone.body);
    assert_eq!(gone.data()["deliveries_stopped"], 1);
    app.get(&path, Some(&key)).await.assert_error(404, "not_found", None);
    delete(&app, &path, &key).await.assert_error(404, "not_found", None);
    let d = webhook_delivery::Entity::find_by_id(deliveries[0].id).one(&app.state.db).await.unwrap().unwrap();
    assert_eq!((d.status, d.endpoint_id), (DeliveryStatus::Dead, deliveries[0].endpoint_id));
    assert_eq!(d.last_error.as_deref(), Some(domain::webhooks::endpoints::REMOVED));

    // Audited with the key; no secret anywhere in the log.
    let filter = domain::audit::Filter { merchant_id: Some(merchant), limit: 50, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &filter).await.unwrap();
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    for a in [
        "webhook_endpoint.create",
        "webhook_endpoint.update",
        "webhook_endpoint.rotate_secret",
        "webhook_endpoint.test",
        "webhook_endpoint.delete",
    ] {
        assert!(actions.contains(&a), "{a} missing from {actions:?}");
    }
    assert!(entries.iter().all(|e| e.actor.starts_with("api_key:")), "{entries:?}");
    let text = format!("{entries:?}");
    for s in [&secret, &new] {
        assert!(!text.contains(&s["whsec_".len()..]), "a secret was audited");
    }
}

#[tokio::test]
async fn webhook_endpoint_requests_are_refused_naming_the_field() {
    let app = app().await;
    let (merchant, key) = app.test_key().await;
    let post = |body: Value| {
        let (app, key) = (&app, &key);
        async move { app.post("/v1/webhook_endpoints", Some(key), &body).await }
    };
    post(json!({"url": "not a url"})).await.assert_error(400, "validation_error", Some("url"));
    post(json!({"url": "ftp://127.0.0.1/x"})).await.assert_error(400, "validation_error", Some("url"));
    post(json!({"url": "http://127.0.0.1:9/h", "enabled_events": ["invoice.paid", "invoice.payed"]}))
        .await
        .assert_error(400, "validation_error", Some("enabled_events[1]"));
    post(json!({"url": "http://127.0.0.1:9/h", "description": "x".repeat(513)})).await.assert_error(
        400,
        "validation_error",
        Some("description"),
    );
    post(json!({"url": "http://127.0.0.1:9/h", "secret": "whsec_mine"})).await.assert_error(
        400,
        "validation_error",
        None,
    );
    post(json!({})).await.assert_error(400, "validation_error", None);
    assert_eq!(webhook_endpoint::Entity::find().count(&app.state.db).await.unwrap(), 0, "nothing saved");

    let made = create(&app, &key, json!({"url": "http://127.0.0.1:9/h"})).await;
    let path = format!("/v1/webhook_endpoints/{}", id(&made));
    app.patch(&path, Some(&key), &json!({"enabled_events": ["nope"]})).await.assert_error(
        400,
        "validation_error",
        Some("enabled_events[0]"),
    );
    app.patch(&path, Some(&key), &json!({"url": "ftp://shop.example/h"})).await.assert_error(
        400,
        "validation_error",
        Some("url"),
    );
    app.get("/v1/webhook_endpoints/not-a-uuid", Some(&key)).await.assert_error(400, "validation_error", None);

    // Permissions: reading needs webhooks:read, changing webhooks:write.
    let reader = app.key(merchant, Environment::Test, &[Permission::WebhooksRead]).await;
    assert_eq!(app.get("/v1/webhook_endpoints", Some(&reader)).await.status.as_u16(), 200);
    app.post("/v1/webhook_endpoints", Some(&reader), &json!({"url": "http://127.0.0.1:9/h"})).await.assert_error(
        403,
        "forbidden",
        None,
    );
    delete(&app, &path, &reader).await.assert_error(403, "forbidden", None);
    let other = app.key(merchant, Environment::Test, &[Permission::InvoicesRead]).await;
    app.get("/v1/webhook_endpoints", Some(&other)).await.assert_error(403, "forbidden", None);

    // At most 16 per merchant and environment.
    for i in 1..domain::webhooks::endpoints::MAX_PER_ENV {
        create(&app, &key, json!({"url": format!("http://127.0.0.1:9/h{i}")})).await;
    }
    post(json!({"url": "http://127.0.0.1:9/one-too-many"})).await.assert_error(409, "webhook_endpoint_limit", None);
}

#[tokio::test]
async fn another_merchant_or_environment_never_sees_or_touches_an_endpoint() {
    let app = app().await;
    let (merchant, key) = app.test_key().await;
    let made = create(&app, &key, json!({"url": "http://127.0.0.1:9/h"})).await;
    let path = format!("/v1/webhook_endpoints/{}", id(&made));
    let (_, stranger) = app.test_key().await;
    let live = app.key(merchant, Environment::Live, &[Permission::WebhooksRead, Permission::WebhooksWrite]).await;
    for k in [&stranger, &live] {
        assert_eq!(app.get("/v1/webhook_endpoints", Some(k)).await.data().as_array().unwrap().len(), 0);
        app.get(&path, Some(k)).await.assert_error(404, "not_found", None);
        app.patch(&path, Some(k), &json!({"url": "https://evil.example/h"})).await.assert_error(404, "not_found", None);
        app.post(&format!("{path}/rotate_secret"), Some(k), &json!({})).await.assert_error(404, "not_found", None);
        app.post(&format!("{path}/test"), Some(k), &json!({})).await.assert_error(404, "not_found", None);
        delete(&app, &path, k).await.assert_error(404, "not_found", None);
    }
    let still = app.get(&path, Some(&key)).await;
    assert_eq!((still.status.as_u16(), still.data()["url"].as_str()), (200, Some("http://127.0.0.1:9/h")));
    assert_eq!(webhook_delivery::Entity::find().count(&app.state.db).await.unwrap(), 0, "no test was sent");
}

/// A failed delivery of the merchant, created at `at`.
async fn delivery(
    app: &TestApp,
    merchant: Uuid,
    env: Environment,
    status: DeliveryStatus,
    at: chrono::DateTime<Utc>,
) -> Uuid {
    let e = entity::event::Model::new(merchant, env, "invoice.paid", format!("k:{}", Uuid::now_v7()), json!({}), at);
    let e = e.into_active_model().insert(&app.state.db).await.unwrap();
    let mut d = domain::webhooks::dispatch::new_delivery(&e, Some(Uuid::now_v7()), at);
    d.status = status;
    d.attempt_count = 7;
    d.retry_step = 7;
    d.enqueued_at = None;
    d.into_active_model().insert(&app.state.db).await.unwrap().id
}

#[tokio::test]
async fn failed_webhook_deliveries_of_a_range_are_redelivered_bounded_and_audited() {
    let app = app().await;
    let (merchant, key) = app.test_key().await;
    let now = Utc::now();
    let (from, to) = (now - Duration::hours(2), now - Duration::hours(1));
    let inside = now - Duration::minutes(90);
    let dead = delivery(&app, merchant, Environment::Test, DeliveryStatus::Dead, inside).await;
    let retrying = delivery(&app, merchant, Environment::Test, DeliveryStatus::Retrying, inside).await;
    let succeeded = delivery(&app, merchant, Environment::Test, DeliveryStatus::Succeeded, inside).await;
    let earlier = delivery(&app, merchant, Environment::Test, DeliveryStatus::Dead, from - Duration::minutes(1)).await;
    let live = delivery(&app, merchant, Environment::Live, DeliveryStatus::Dead, inside).await;
    let (stranger, _) = app.test_key().await;
    let theirs = delivery(&app, stranger, Environment::Test, DeliveryStatus::Dead, inside).await;

    let body = json!({"from": from.to_rfc3339(), "to": to.to_rfc3339()});
    let r = app.post("/v1/webhook_deliveries/redeliver", Some(&key), &body).await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!((r.data()["matched"].as_u64(), r.data()["redelivered"].as_u64()), (Some(2), Some(2)), "{}", r.body);
    let status = |id: Uuid| {
        let db = &app.state.db;
        async move { webhook_delivery::Entity::find_by_id(id).one(db).await.unwrap().unwrap() }
    };
    for id in [dead, retrying] {
        let d = status(id).await;
        assert_eq!((d.status, d.retry_step, d.enqueued_at), (DeliveryStatus::Pending, 0, None), "left for the sweep");
    }
    for (id, was) in [
        (succeeded, DeliveryStatus::Succeeded),
        (earlier, DeliveryStatus::Dead),
        (live, DeliveryStatus::Dead),
        (theirs, DeliveryStatus::Dead),
    ] {
        assert_eq!(status(id).await.status, was, "outside the range, status, environment or merchant");
    }
    // With a status: the succeeded one too.
    let body = json!({"from": from.to_rfc3339(), "to": to.to_rfc3339(), "status": "succeeded"});
    let r = app.post("/v1/webhook_deliveries/redeliver", Some(&key), &body).await;
    assert_eq!(r.data()["redelivered"].as_u64(), Some(1), "{}", r.body);
    assert_eq!(status(succeeded).await.status, DeliveryStatus::Pending);

    // Refusals name the field.
    let post = |body: Value| {
        let (app, key) = (&app, &key);
        async move { app.post("/v1/webhook_deliveries/redeliver", Some(key), &body).await }
    };
    post(json!({"from": to.to_rfc3339(), "to": from.to_rfc3339()})).await.assert_error(
        400,
        "validation_error",
        Some("to"),
    );
    post(json!({"from": "yesterday", "to": to.to_rfc3339()})).await.assert_error(400, "validation_error", Some("from"));
    post(json!({"from": from.to_rfc3339(), "to": to.to_rfc3339(), "status": "lost"})).await.assert_error(
        400,
        "validation_error",
        Some("status"),
    );
    // A range holding more than the bound is refused whole.
    let many = now - Duration::minutes(30);
    let rows: Vec<_> = (0..=domain::webhooks::manage::REDELIVER_MAX)
        .map(|i| {
            let e = entity::event::Model::new(
                merchant,
                Environment::Test,
                "invoice.paid",
                format!("m:{i}"),
                json!({}),
                many,
            );
            let mut d = domain::webhooks::dispatch::new_delivery(&e, Some(Uuid::now_v7()), many);
            d.status = DeliveryStatus::Dead;
            d.into_active_model()
        })
        .collect();
    for chunk in rows.chunks(200) {
        webhook_delivery::Entity::insert_many(chunk.to_vec()).exec_without_returning(&app.state.db).await.unwrap();
    }
    let wide = json!({"from": (now - Duration::hours(1)).to_rfc3339(), "to": now.to_rfc3339()});
    let r = post(wide).await;
    r.assert_error(400, "validation_error", Some("to"));
    assert!(r.body.to_string().contains("1001"), "{}", r.body);
    let still_dead = webhook_delivery::Entity::find()
        .filter(webhook_delivery::Column::Status.eq(DeliveryStatus::Dead))
        .filter(webhook_delivery::Column::MerchantId.eq(merchant))
        .count(&app.state.db)
        .await
        .unwrap();
    assert_eq!(still_dead, 1 + 1 + 1001, "earlier, live and the wide range untouched");

    let filter = domain::audit::Filter { merchant_id: Some(merchant), limit: 50, ..Default::default() };
    let entries = domain::audit::list(&app.state.db, &filter).await.unwrap();
    let ranges: Vec<_> = entries.iter().filter(|e| e.action == "webhook_delivery.redeliver_range").collect();
    assert_eq!(ranges.len(), 2, "{entries:?}");
    assert!(ranges.iter().all(|e| e.actor.starts_with("api_key:")));
}

/// The migration to endpoints with ids on a database with an endpoint and deliveries from
/// before it: the endpoint is kept (a new id, every event, the same sealed secret), its
/// deliveries name it, and one event may now have a delivery per endpoint (but one only).
#[tokio::test]
async fn webhook_endpoint_migration_keeps_an_existing_endpoint_and_its_deliveries() {
    use migration::MigratorTrait;
    use sea_orm::ConnectionTrait;
    use sea_orm::sea_query::{Alias, Query};
    let db_file = testkit::Db::fresh().await;
    let db = sea_orm::Database::connect(&db_file.url).await.unwrap();
    // Every migration before the one that gave endpoints their ids.
    let before = migration::Migrator::migrations()
        .iter()
        .position(|m| m.name() == "m20261128_000028_webhook_endpoints")
        .expect("the webhook endpoints migration");
    migration::Migrator::up(&db, Some(u32::try_from(before).unwrap())).await.unwrap();
    let (merchant, now) = (Uuid::now_v7(), Utc::now());
    let insert = |table: &str, cols: &[&str], vals: Vec<sea_orm::Value>| {
        Query::insert()
            .into_table(Alias::new(table))
            .columns(cols.iter().map(|c| Alias::new(*c)))
            .values_panic(vals.into_iter().map(Into::into))
            .to_owned()
    };
    db.execute(&insert(
        "merchants",
        &[
            "id",
            "name",
            "base_currency",
            "invoice_lifetime_secs",
            "underpayment_tolerance_percent",
            "created_at",
            "updated_at",
        ],
        vec![
            merchant.into(),
            "M".into(),
            "USD".into(),
            3600i64.into(),
            rust_decimal::Decimal::ZERO.into(),
            now.into(),
            now.into(),
        ],
    ))
    .await
    .unwrap();
    let sealed = sbox().seal(merchant.into(), Environment::Test, "whsec_kept");
    db.execute(&insert(
        "webhook_endpoints",
        &["merchant_id", "environment", "url", "secret_ciphertext", "created_at", "updated_at"],
        vec![
            merchant.into(),
            "test".into(),
            "https://shop.example/hook".into(),
            sealed.clone().into(),
            now.into(),
            now.into(),
        ],
    ))
    .await
    .unwrap();
    let event = entity::event::Model::new(merchant, Environment::Test, "invoice.paid", "k".into(), json!({}), now);
    let (old_delivery, orphan) = (Uuid::now_v7(), Uuid::now_v7());
    for (id, env, event_id) in [(old_delivery, "test", event.id), (orphan, "live", Uuid::now_v7())] {
        db.execute(&insert(
            "webhook_deliveries",
            &[
                "id",
                "event_id",
                "merchant_id",
                "environment",
                "event_type",
                "body",
                "status",
                "attempt_count",
                "retry_step",
                "next_attempt_at",
                "event_created_at",
                "created_at",
                "updated_at",
            ],
            vec![
                id.into(),
                event_id.into(),
                merchant.into(),
                env.into(),
                "invoice.paid".into(),
                "{}".into(),
                "retrying".into(),
                1i32.into(),
                1i32.into(),
                now.into(),
                now.into(),
                now.into(),
                now.into(),
            ],
        ))
        .await
        .unwrap();
    }

    migration::Migrator::up(&db, None).await.unwrap();

    let kept = webhook_endpoint::Entity::find().all(&db).await.unwrap();
    assert_eq!(kept.len(), 1);
    let e = &kept[0];
    assert_eq!(
        (e.merchant_id, e.environment, e.url.as_str()),
        (merchant, Environment::Test, "https://shop.example/hook")
    );
    assert_eq!((e.enabled_events.as_str(), e.disabled, e.description.as_deref()), ("[]", false, None));
    assert_eq!(e.secret_ciphertext, sealed, "the sealed secret is copied as it is");
    assert_eq!(domain::webhooks::endpoints::signing_secrets(&sbox(), e, now).unwrap(), vec!["whsec_kept".to_owned()]);
    assert!(domain::webhooks::endpoints::receives(e, "payout.failed"), "every event, as before");
    let d = webhook_delivery::Entity::find_by_id(old_delivery).one(&db).await.unwrap().unwrap();
    assert_eq!((d.endpoint_id, d.status), (Some(e.id), DeliveryStatus::Retrying));
    let o = webhook_delivery::Entity::find_by_id(orphan).one(&db).await.unwrap().unwrap();
    assert_eq!(o.endpoint_id, None, "no live endpoint then: the merchant's endpoint when it has one");

    // One delivery of an event per endpoint: another endpoint may have its own, the same one not.
    let mut second = domain::webhooks::dispatch::new_delivery(&event, Some(Uuid::now_v7()), now);
    second.clone().into_active_model().insert(&db).await.unwrap();
    second.id = Uuid::now_v7();
    assert!(second.into_active_model().insert(&db).await.is_err(), "(event, endpoint) is unique");
}
