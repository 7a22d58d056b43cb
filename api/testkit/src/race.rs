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
