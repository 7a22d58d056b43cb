//! Fault test (production shape: PostgreSQL + Redis, so it runs with `--features
//! redis-tests,pg-tests`): while 500 invoices are being paid, the scanner and tracker processes
//! are SIGKILLed at random points and restarted, and Redis loses every queued job once. The
//! database is the source of truth: afterwards every payment is credited exactly once and every
//! expected event exists exactly once.
#![cfg(feature = "redis-tests")]

use testkit::fleet;

use std::time::{Duration, Instant};

use entity::{Bucket, EntryType, InvoiceStatus, PaymentStatus};
use fleet::{Deployment, Proc, wait_ready};
use rust_decimal::Decimal;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

const INVOICES: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_and_a_redis_flush_lose_and_duplicate_nothing() {
    // `_db` keeps the database until the test ends.
    let Deployment { db: _db, conn, fleet, api, merchant, key, http } =
        Deployment::start("Fault", entity::Environment::Test, &[]).await;
    let scanner_bin = env!("CARGO_BIN_EXE_deposit-scanner");
    let tracker_bin = env!("CARGO_BIN_EXE_confirmation-tracker");
    let mut workers: Vec<(&str, Proc)> = vec![
        (scanner_bin, fleet.worker(scanner_bin)),
        (tracker_bin, fleet.worker(tracker_bin)),
        (tracker_bin, fleet.worker(tracker_bin)),
    ];
    for (_, w) in &workers {
        wait_ready(&http, w).await;
    }

    // 500 invoices and their deposits, created concurrently while the workers run.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..INVOICES {
        let (http, base, key) = (http.clone(), api.url.clone(), key.clone());
        set.spawn(async move {
            let post = |path: String, body: Value| {
                http.post(format!("{base}{path}")).header("X-API-Key", &key).json(&body).send()
            };
            let r = post("/v1/invoices".into(), json!({"currency": "BTC", "amount": "0.001"})).await.unwrap();
            assert_eq!(r.status(), 201);
            let id = r.json::<Value>().await.unwrap()["data"]["id"].as_str().unwrap().to_owned();
            let r = post("/v1/test/deposits".into(), json!({"invoice_id": id, "amount": "0.001"})).await.unwrap();
            assert_eq!(r.status(), 201);
        });
        if set.len() >= 16 {
            set.join_next().await.unwrap().unwrap();
        }
    }
    // Chaos while they are paid: SIGKILL a random worker every 150-600 ms and start a new one;
    // once, midway, every queued job disappears from Redis.
    let chaos_until = Instant::now() + Duration::from_secs(8);
    let mut flushed = false;
    let mut kills = 0;
    while Instant::now() < chaos_until || !set.is_empty() {
        if let Some(done) = set.try_join_next() {
            done.unwrap();
        }
        if Instant::now() < chaos_until {
            let i = rand::random_range(0..workers.len());
            let bin = workers[i].0;
            workers[i].1.kill();
            workers[i].1 = fleet.worker(bin);
            kills += 1;
            if !flushed && kills == 6 {
                fleet.flush_redis().await;
                flushed = true;
            }
        }
        tokio::time::sleep(Duration::from_millis(rand::random_range(150..600))).await;
    }
    assert!(flushed && kills >= 10, "{kills} kills");

    // Recovery: every invoice ends paid.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let paid = entity::invoice::Entity::find()
            .filter(entity::invoice::Column::Status.eq(InvoiceStatus::Paid))
            .count(&conn)
            .await
            .unwrap();
        if paid as usize == INVOICES {
            break;
        }
        if Instant::now() > deadline {
            let stuck = entity::invoice::Entity::find()
                .filter(entity::invoice::Column::Status.ne(InvoiceStatus::Paid))
                .all(&conn)
                .await
                .unwrap();
            for inv in stuck.iter().take(5) {
                let ps = entity::payment::Entity::find()
                    .filter(entity::payment::Column::InvoiceId.eq(inv.id))
                    .all(&conn)
                    .await
                    .unwrap();
                let t = entity::sandbox_transfer::Entity::find()
                    .filter(
                        entity::sandbox_transfer::Column::AddressKey.eq(inv.address_key.clone().unwrap_or_default()),
                    )
                    .all(&conn)
                    .await
                    .unwrap();
                eprintln!("STUCK {} {:?} payments {:?} transfers {:?}", inv.id, inv.status, ps, t);
            }
            let cursors = entity::scan_cursor::Entity::find().all(&conn).await.unwrap();
            eprintln!("CURSORS {cursors:?}");
            panic!("only {paid} of {INVOICES} invoices paid after recovery");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Exactly once: one payment per invoice, each credited once, each event once.
    let payments = entity::payment::Entity::find().all(&conn).await.unwrap();
    assert_eq!(payments.len(), INVOICES);
    assert!(payments.iter().all(|p| p.status == PaymentStatus::Confirmed && p.credited_at.is_some()));
    let credits = entity::ledger_entry::Entity::find()
        .filter(entity::ledger_entry::Column::EntryType.eq(EntryType::InvoiceCredit))
        .filter(entity::ledger_entry::Column::Bucket.eq(Bucket::Available))
        .all(&conn)
        .await
        .unwrap();
    assert_eq!(credits.len(), INVOICES);
    let mut referenced: Vec<_> = credits.iter().map(|e| e.reference_id.unwrap()).collect();
    referenced.sort();
    referenced.dedup();
    assert_eq!(referenced.len(), INVOICES, "a payment was credited twice");
    let events = entity::event::Entity::find().all(&conn).await.unwrap();
    for kind in ["invoice.confirming", "invoice.paid", "balance.credited"] {
        let n = events.iter().filter(|e| e.event_type == kind).count();
        assert_eq!(n, INVOICES, "{kind}");
    }
    assert_eq!(events.len(), 3 * INVOICES, "no other events");
    let b = entity::balance::Entity::find()
        .filter(entity::balance::Column::MerchantId.eq(merchant))
        .filter(entity::balance::Column::GateId.eq("bitcoin"))
        .one(&conn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.available.0, Decimal::new(5, 1));
    assert_eq!(b.pending.0, Decimal::ZERO);
}
