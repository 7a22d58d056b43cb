//! Retention (`[retention]`, `domain::retention`): webhook response excerpts past their age are
//! cleared in batches (the attempt rows stay), ended dashboard sessions and unaccepted
//! invitations past theirs are deleted, nothing else is touched, and a second run finds nothing.

use chrono::{Duration, Utc};
use domain::config::RetentionConfig;
use domain::retention::{Pruned, prune};
use entity::{Environment, Role, dashboard_invitation, dashboard_session, ledger_entry, webhook_attempt};
use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel, PaginatorTrait};
use testkit::TestApp;
use uuid::Uuid;

fn attempt(days_ago: i64, body: Option<&str>) -> webhook_attempt::Model {
    webhook_attempt::Model {
        id: Uuid::now_v7(),
        delivery_id: Uuid::now_v7(),
        attempt_no: 1,
        url: "https://shop.example/hooks".into(),
        started_at: Utc::now() - Duration::days(days_ago),
        latency_ms: 42,
        status_code: Some(200),
        error: None,
        response_body: body.map(str::to_owned),
        succeeded: true,
    }
}

fn session(merchant: Uuid, expired_days_ago: i64, revoked_days_ago: Option<i64>) -> dashboard_session::Model {
    let now = Utc::now();
    dashboard_session::Model {
        id: Uuid::now_v7(),
        token_hash: Uuid::new_v4().simple().to_string(),
        user_id: Uuid::now_v7(),
        merchant_id: merchant,
        environment: Environment::Test,
        csrf_token: "csrf".into(),
        created_at: now - Duration::days(expired_days_ago + 1),
        last_seen_at: now - Duration::days(expired_days_ago + 1),
        expires_at: now - Duration::days(expired_days_ago),
        revoked_at: revoked_days_ago.map(|d| now - Duration::days(d)),
    }
}

fn invitation(merchant: Uuid, expired_days_ago: i64, accepted: bool) -> dashboard_invitation::Model {
    let now = Utc::now();
    dashboard_invitation::Model {
        id: Uuid::now_v7(),
        merchant_id: merchant,
        email: format!("{}@shop.example", Uuid::new_v4().simple()),
        role: Role::Viewer,
        token_hash: Uuid::new_v4().simple().to_string(),
        invited_by: "operator".into(),
        created_at: now - Duration::days(expired_days_ago + 7),
        expires_at: now - Duration::days(expired_days_ago),
        accepted_at: accepted.then(|| now - Duration::days(expired_days_ago + 1)),
        revoked_at: None,
    }
}

#[tokio::test]
async fn retention_prunes_what_is_past_its_age_in_batches_and_nothing_else() {
    let (app, merchant, _) = TestApp::with_test_key().await;
    let db = &app.state.db;
    testkit::fund(db, merchant, Environment::Test, "tron_usdt", "10").await;
    let ledger = ledger_entry::Entity::find().count(db).await.unwrap();

    let old: Vec<_> = (0..5).map(|_| attempt(100, Some("{\"ok\":true}"))).collect();
    let recent = [attempt(10, Some("recent")), attempt(89, Some("recent"))];
    let old_without_body = attempt(200, None);
    for a in old.iter().chain(&recent).chain([&old_without_body]) {
        a.clone().into_active_model().insert(db).await.unwrap();
    }
    let ended = [session(merchant, 40, None), session(merchant, 1, Some(31))];
    let kept = [session(merchant, 10, None), session(merchant, -1, None)];
    for s in ended.iter().chain(&kept) {
        s.clone().into_active_model().insert(db).await.unwrap();
    }
    let lapsed = invitation(merchant, 40, false);
    let accepted = invitation(merchant, 40, true);
    let pending = invitation(merchant, -3, false);
    for i in [&lapsed, &accepted, &pending] {
        i.clone().into_active_model().insert(db).await.unwrap();
    }

    // Batches of two: the five old excerpts take three.
    let cfg = RetentionConfig { batch_size: 2, ..RetentionConfig::default() };
    let done = prune(db, &cfg, Utc::now()).await.unwrap();
    assert_eq!(done, Pruned { attempt_bodies: 5, sessions: 2, invitations: 1 });

    let attempts = webhook_attempt::Entity::find().all(db).await.unwrap();
    assert_eq!(attempts.len(), 8, "attempt rows stay");
    for a in &attempts {
        let want_body = recent.iter().any(|r| r.id == a.id);
        assert_eq!(a.response_body.is_some(), want_body, "{a:?}");
        assert_eq!((a.status_code, a.latency_ms), (Some(200), 42), "the attempt's facts stay");
    }
    let sessions: Vec<Uuid> = dashboard_session::Entity::find().all(db).await.unwrap().iter().map(|s| s.id).collect();
    assert_eq!(sessions.len(), 2);
    assert!(kept.iter().all(|k| sessions.contains(&k.id)));
    let invitations: Vec<Uuid> =
        dashboard_invitation::Entity::find().all(db).await.unwrap().iter().map(|i| i.id).collect();
    assert!(!invitations.contains(&lapsed.id));
    assert!(invitations.contains(&accepted.id) && invitations.contains(&pending.id));
    assert_eq!(ledger_entry::Entity::find().count(db).await.unwrap(), ledger, "the ledger is never pruned");

    // Nothing left; and 0 days keeps everything.
    assert_eq!(prune(db, &cfg, Utc::now()).await.unwrap(), Pruned::default());
    let keep_all = RetentionConfig { attempt_bodies_days: 0, ended_sessions_days: 0, ..cfg };
    let far = Utc::now() + Duration::days(3650);
    assert_eq!(prune(db, &keep_all, far).await.unwrap(), Pruned::default());
}
