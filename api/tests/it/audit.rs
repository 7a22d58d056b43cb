//! Operational hardening: the operator audit log (`domain::audit`). A row commits or rolls back with the change
//! it describes; on PostgreSQL it can be neither updated nor deleted.

use domain::audit::{Entry, Filter, record};
use entity::Environment;
use rust_decimal::Decimal;
use sea_orm::{EntityTrait, PaginatorTrait};
use testkit::TestApp;

async fn adjust_with_audit(app: &TestApp, merchant: uuid::Uuid, commit: bool) {
    let txn = domain::db::begin_write(&app.state.db).await.unwrap();
    let bitcoin = domain::gates::find("bitcoin").unwrap();
    domain::ledger::adjust(&txn, merchant.into(), Environment::Test, bitcoin, Decimal::ONE, "funding").await.unwrap();
    let entry = Entry::new("alice", "ledger.adjust", "balance", "bitcoin")
        .merchant(merchant.into(), Some(Environment::Test))
        .reason(Some("funding"));
    record(&txn, entry).await.unwrap();
    if commit {
        txn.commit().await.unwrap();
    } else {
        txn.rollback().await.unwrap();
    }
}

async fn available(app: &TestApp, merchant: uuid::Uuid) -> Decimal {
    entity::balance::Entity::find()
        .all(&app.state.db)
        .await
        .unwrap()
        .into_iter()
        .filter(|b| b.merchant_id == merchant && b.gate_id == "bitcoin")
        .map(|b| b.available.value())
        .sum()
}

#[tokio::test]
async fn audit_row_commits_and_rolls_back_with_the_change_it_records() {
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    adjust_with_audit(&app, merchant, false).await;
    assert_eq!(entity::audit_log::Entity::find().count(&app.state.db).await.unwrap(), 0);
    assert_eq!(available(&app, merchant).await, Decimal::ZERO);

    adjust_with_audit(&app, merchant, true).await;
    let rows = domain::audit::list(&app.state.db, &Filter { limit: 10, ..Default::default() }).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].actor.as_str(), rows[0].action.as_str()), ("alice", "ledger.adjust"));
    assert_eq!((rows[0].merchant_id, rows[0].reason.as_deref()), (Some(merchant), Some("funding")));
    assert_eq!(available(&app, merchant).await, Decimal::ONE);
}

#[cfg(feature = "pg-tests")]
#[tokio::test]
async fn audit_log_is_append_only_on_postgres() {
    use sea_orm::ConnectionTrait;
    let app = TestApp::spawn().await;
    let merchant = app.merchant().await;
    adjust_with_audit(&app, merchant, true).await;
    let db = &app.state.db;
    for sql in ["UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log"] {
        let err = db.execute_unprepared(sql).await.expect_err(sql);
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let rows = entity::audit_log::Entity::find().all(db).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].actor, "alice");
}
