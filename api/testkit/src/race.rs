//! Requests raced against each other: sent at once, each on its own task, their answers
//! collected in the order the requests were given.

use std::collections::HashSet;

use serde_json::Value;
use uuid::Uuid;

use crate::TestApp;

/// Requests in flight together.
pub struct InFlight(Vec<tokio::task::JoinHandle<(u16, Value)>>);

/// Sends every request at once, each on its own task.
pub fn send_all(requests: impl IntoIterator<Item = reqwest::RequestBuilder>) -> InFlight {
    InFlight(
        requests
            .into_iter()
            .map(|rb| {
                tokio::spawn(async move {
                    let r = rb.send().await.expect("request");
                    (r.status().as_u16(), r.json::<Value>().await.expect("a JSON body"))
                })
            })
            .collect(),
    )
}

impl InFlight {
    /// Every answer's status and JSON body, in the order the requests were given.
    pub async fn answers(self) -> Vec<(u16, Value)> {
        let mut answers = Vec::with_capacity(self.0.len());
        for task in self.0 {
            answers.push(task.await.expect("request task"));
        }
        answers
    }
}

/// The number of `201 Created` answers and of refusals (`status` with error `code`); any other
/// answer fails the test.
#[track_caller]
pub fn tally<'a>(answers: impl IntoIterator<Item = &'a (u16, Value)>, status: u16, code: &str) -> (usize, usize) {
    let (mut created, mut refused) = (0, 0);
    for (s, body) in answers {
        match *s {
            201 => created += 1,
            s if s == status => {
                assert_eq!(body["error"]["code"], code, "{body}");
                refused += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    (created, refused)
}

/// The `data.id` of every answer, each of which must be `201 Created`.
#[track_caller]
pub fn created_ids(answers: &[(u16, Value)]) -> HashSet<String> {
    answers
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 201, "{body}");
            body["data"]["id"].as_str().expect("an id").to_owned()
        })
        .collect()
}

impl TestApp {
    /// An app for races of hundreds of requests, with a merchant and its test key: no fees on
    /// tron USDT, and 16 database connections.
    pub async fn spawn_for_races() -> (TestApp, Uuid, String) {
        let app = TestApp::spawn_with(|c| {
            c.fees.insert("tron_usdt".into(), domain::config::GateFees::default());
            c.db.max_connections = 16;
        })
        .await;
        let (merchant, key) = app.test_key().await;
        (app, merchant, key)
    }

    /// `POST path` with `body` and the test key, ready to be raced.
    pub fn post_request(&self, path: &str, key: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http.post(self.url(path)).header("X-API-Key", key).json(body)
    }

    /// Sends every request while `merchant`'s balances are locked, so that they are provably in
    /// flight together: released once `blocked` of them wait behind the lock. Their answers.
    pub async fn send_all_held(
        &self,
        merchant: Uuid,
        blocked: usize,
        requests: impl IntoIterator<Item = reqwest::RequestBuilder>,
    ) -> Vec<(u16, Value)> {
        let block = self.block_balance_writes(merchant).await;
        let in_flight = send_all(requests);
        self.wait_blocked_writers(blocked).await;
        block.release().await;
        in_flight.answers().await
    }
}

/// A merchant's balances held locked by a transaction of the test's own (PostgreSQL: the
/// balance rows; SQLite: the database write lock), so requests that reserve a balance queue up
/// behind it and are provably in flight together. Released on `release` (or drop).
pub struct BalanceWriteBlock {
    txn: sea_orm::DatabaseTransaction,
    _conn: sea_orm::DatabaseConnection,
}

impl BalanceWriteBlock {
    pub async fn release(self) {
        self.txn.rollback().await.expect("release the balance lock");
    }
}

impl TestApp {
    /// Locks `merchant`'s balances on a separate connection (see [`BalanceWriteBlock`]).
    pub async fn block_balance_writes(&self, merchant: Uuid) -> BalanceWriteBlock {
        use sea_orm::sea_query::Expr;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let conn = sea_orm::Database::connect(&self.db.url).await.expect("second connection");
        let txn = domain::db::begin_write(&conn).await.expect("begin");
        entity::balance::Entity::update_many()
            .col_expr(entity::balance::Column::UpdatedAt, Expr::col(entity::balance::Column::UpdatedAt))
            .filter(entity::balance::Column::MerchantId.eq(merchant))
            .exec(&txn)
            .await
            .expect("lock the balances");
        BalanceWriteBlock { txn, _conn: conn }
    }

    /// Waits (polling, 30 s deadline) until at least `n` of the app's database connections are
    /// stuck behind a lock: on PostgreSQL, sessions waiting on a lock; on SQLite, every pooled
    /// connection checked out (reads never wait in WAL mode, so a connection that stays out is
    /// one waiting for the write lock).
    pub async fn wait_blocked_writers(&self, n: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // Probed on a connection of its own: the app's pool may be all taken by the waiters.
        let probe = sea_orm::Database::connect(&self.db.url).await.expect("probe connection");
        loop {
            let blocked = self.blocked_writers(&probe).await;
            if blocked >= n {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "only {blocked} of {n} writers got blocked");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[cfg(feature = "pg")]
    async fn blocked_writers(&self, probe: &sea_orm::DatabaseConnection) -> usize {
        use sea_orm::{ConnectionTrait, Statement};
        let sql = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
                   AND wait_event_type = 'Lock'";
        let row = probe
            .query_one_raw(Statement::from_string(sea_orm::DatabaseBackend::Postgres, sql))
            .await
            .expect("pg_stat_activity")
            .expect("a row");
        row.try_get::<i64>("", "n").expect("count") as usize
    }

    #[cfg(not(feature = "pg"))]
    async fn blocked_writers(&self, _probe: &sea_orm::DatabaseConnection) -> usize {
        let pool = self.state.db.get_sqlite_connection_pool();
        let max = self.state.config.db.max_connections.min(8) as usize;
        if pool.size() as usize == max { max - pool.num_idle() } else { 0 }
    }
}
