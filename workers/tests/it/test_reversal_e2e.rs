//! Test-helper reliability: the test helper `POST /v1/test/deposits/{id}/reverse` never answers 200 and then
//! does nothing. Tried as a new user would, on the production shape (the `api`,
//! `deposit-scanner` and `confirmation-tracker` binaries as separate processes): a test invoice
//! is paid and credited, its payment sinks deeper than the tracker's watch (twice its
//! confirmations), and the reversal still reaches the invoice, the payment and the balance.

use std::time::{Duration, Instant};

use entity::{PaymentStatus, payment};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::fleet::{Deployment, wait_ready};
use uuid::Uuid;

async fn call(d: &Deployment, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = d.http.request(method, format!("{}{path}", d.api.url)).header("X-API-Key", &d.key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Polls `GET /v1/invoices/{id}` until `done` holds for its data (60 s at most).
async fn wait_invoice(d: &Deployment, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = call(d, reqwest::Method::GET, &format!("/v1/invoices/{id}"), None).await;
        if done(&body["data"]) {
            return body["data"].clone();
        }
        assert!(Instant::now() < deadline, "invoice never {what}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reversal_reaches_a_paid_invoice_whatever_the_depth_of_its_payment() {
    let d = Deployment::start("reversal", entity::Environment::Test, &[]).await;
    let scanner = d.fleet.worker(env!("CARGO_BIN_EXE_deposit-scanner"));
    let tracker = d.fleet.worker(env!("CARGO_BIN_EXE_confirmation-tracker"));
    wait_ready(&d.http, &scanner).await;
    wait_ready(&d.http, &tracker).await;

    let (status, inv) =
        call(&d, reqwest::Method::POST, "/v1/invoices", Some(json!({"currency": "BTC", "amount": "0.01"}))).await;
    assert_eq!(status, 201, "{inv}");
    let id = inv["data"]["id"].as_str().unwrap().to_owned();
    let (status, dep) =
        call(&d, reqwest::Method::POST, "/v1/test/deposits", Some(json!({"invoice_id": id, "amount": "0.01"}))).await;
    assert_eq!(status, 201, "{dep}");
    wait_invoice(&d, &id, "paid", |i| i["status"] == "paid").await;

    // The sandbox chain keeps mining (a block every 100 ms): wait until the tracker stopped
    // watching the payment (past twice its 3 confirmations, no check scheduled).
    let invoice_id: Uuid = id.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = payment::Entity::find()
            .filter(payment::Column::InvoiceId.eq(invoice_id))
            .one(&d.conn)
            .await
            .unwrap()
            .expect("the payment");
        if p.confirmations >= 2 * p.required_confirmations && p.next_check_at.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "the tracker kept watching: {p:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let dep_id = dep["data"]["id"].as_str().unwrap();
    let (status, body) =
        call(&d, reqwest::Method::POST, &format!("/v1/test/deposits/{dep_id}/reverse"), Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["reversed"], true);

    let inv = wait_invoice(&d, &id, "invalid after the reversal", |i| i["status"] == "invalid").await;
    assert_eq!(inv["payments"][0]["status"], "reversed", "{inv}");
    let (_, balances) = call(&d, reqwest::Method::GET, "/v1/balances", None).await;
    let btc = balances["data"].as_array().unwrap().iter().find(|b| b["gate_id"] == "bitcoin").unwrap().clone();
    assert_eq!((btc["available"].as_str(), btc["pending"].as_str()), (Some("0"), Some("0")), "{btc}");
    let p = payment::Entity::find().filter(payment::Column::InvoiceId.eq(invoice_id)).one(&d.conn).await.unwrap();
    assert_eq!(p.map(|p| p.status), Some(PaymentStatus::Reversed));

    // Reversing again changes nothing and still answers 200.
    let (status, _) =
        call(&d, reqwest::Method::POST, &format!("/v1/test/deposits/{dep_id}/reverse"), Some(json!({}))).await;
    assert_eq!(status, 200);
    let (_, events) = call(&d, reqwest::Method::GET, &format!("/v1/invoices/{id}"), None).await;
    assert_eq!(events["data"]["status"], "invalid");
}
