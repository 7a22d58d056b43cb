//! A fresh database per test: a temporary SQLite file, or (feature `pg`) a new PostgreSQL
//! database dropped afterwards.

pub struct Db {
    pub url: String,
    #[cfg(feature = "pg")]
    name: String,
    _dir: Option<tempfile::TempDir>,
}

#[cfg(feature = "pg")]
pub fn pg_server() -> String {
    std::env::var("PAYGATE_TEST_PG").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

impl Db {
    pub async fn fresh() -> Db {
        #[cfg(feature = "pg")]
        {
            use sea_orm::ConnectionTrait;
            let server = pg_server();
            let admin = sea_orm::Database::connect(format!("{server}/postgres"))
                .await
                .unwrap_or_else(|e| panic!("pg-tests: PostgreSQL at {server} is unreachable: {e}"));
            let name = format!("paygate_test_{}", uuid::Uuid::new_v4().simple());
            admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await.expect("create test database");
            Db { url: format!("{server}/{name}"), name, _dir: None }
        }
        #[cfg(not(feature = "pg"))]
        {
            let dir = tempfile::tempdir().expect("tempdir");
            let url = format!("sqlite://{}?mode=rwc", dir.path().join("test.db").display());
            Db { url, _dir: Some(dir) }
        }
    }
}

#[cfg(feature = "pg")]
impl Drop for Db {
    fn drop(&mut self) {
        let (server, name) = (pg_server(), self.name.clone());
        let _ = std::thread::spawn(move || {
            use sea_orm::ConnectionTrait;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                if let Ok(admin) = sea_orm::Database::connect(format!("{server}/postgres")).await {
                    let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                }
            });
        })
        .join();
    }
}
