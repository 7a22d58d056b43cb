//! Payer e-mail on the production shape: the `webhook-deliverer` binary with `[email]`
//! pointed at a real SMTP server the test runs (`support::smtp_sink`), over the database the
//! API's own invoice service writes to. An invoice with `payer_email` gets one message (plain
//! text and HTML, from the configured sender, with the amount, the merchant's name and the
//! checkout link); then `sent_at` is set and `invoice.sent` emitted once. Invoices without an
//! address, or no longer awaiting payment, get none.

use std::time::{Duration, Instant};

use crate::support::smtp_sink::SmtpSink;
use domain::keys::{Permissions, Principal};
use entity::{Environment, InvoiceStatus, invoice};
use mail_parser::MessageParser;
use sea_orm::{ActiveModelTrait, ActiveValue::Set, EntityTrait, IntoActiveModel};
use testkit::fleet::{Fleet, wait_ready};
use uuid::Uuid;

const KEY_HEX: &str = "5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f5c1e8d6f0b2a4c7e9d3f1a8b6c4e2d0f";

async fn create(state: &domain::state::AppState, who: &Principal, body: serde_json::Value) -> invoice::Model {
    let req: domain::invoices::types::CreateInvoiceRequest = serde_json::from_value(body.clone()).unwrap();
    match domain::invoices::service::create(state, who, req, &body).await {
        Ok(domain::invoices::service::Created::New(inv)) => inv,
        Ok(_) => panic!("replayed"),
        Err(e) => panic!("{}", e.message),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_with_payer_email_sends_one_payment_request_then_invoice_sent() {
    let sink = SmtpSink::start().await;
    let db = testkit::Db::fresh().await;
    let port = sink.port.to_string();
    let fleet = Fleet::new(
        &db.url,
        &[
            ("PAYGATE_WEBHOOKS__SECRET_KEY", KEY_HEX),
            ("PAYGATE_WEBHOOKS__DISPATCH_INTERVAL_MS", "50"),
            ("PAYGATE_EMAIL__HOST", "127.0.0.1"),
            ("PAYGATE_EMAIL__PORT", &port),
            ("PAYGATE_EMAIL__TLS", "none"),
            ("PAYGATE_EMAIL__FROM", "Acme Payments <pay@acme.example>"),
            ("PAYGATE_EMAIL__SWEEP_INTERVAL_MS", "100"),
            ("PAYGATE_PUBLIC_BASE_URL", "https://pay.acme.example"),
        ],
    );
    let config = domain::config::Config {
        database_url: db.url.clone(),
        public_base_url: "https://pay.acme.example".parse().unwrap(),
        ..Default::default()
    };
    let state = api::bootstrap(config).await.unwrap();
    let conn = &state.db;
    let merchant = domain::merchants::create_merchant(conn, "Acme Shop", &Default::default()).await.unwrap().id;
    let who = Principal {
        key_id: Uuid::now_v7().into(),
        merchant_id: merchant.into(),
        environment: Environment::Test,
        permissions: Permissions::all(),
        user_id: None,
    };
    // The merchant's support address receives the payers' replies.
    let patch =
        domain::settings::SettingsPatch { payer_reply_to: Some("help@acme.example".into()), ..Default::default() };
    domain::settings::update(&state, &who, &patch).await.unwrap();
    let mailed = create(
        &state,
        &who,
        serde_json::json!({"currency": "BTC", "amount": "0.015", "payer_email": "payer@example.com",
                           "description": "Order #42"}),
    )
    .await;
    let silent = create(&state, &who, serde_json::json!({"currency": "BTC", "amount": "0.02"})).await;
    assert_eq!((mailed.email_due_at.is_some(), silent.email_due_at), (true, None));
    // Paid before the mailer got to it: no payment request any more.
    let paid = create(
        &state,
        &who,
        serde_json::json!({"currency": "BTC", "amount": "0.03", "payer_email": "late@example.com"}),
    )
    .await;
    let mut am = paid.clone().into_active_model();
    am.status = Set(InvoiceStatus::Paid);
    am.update(conn).await.unwrap();

    let http = reqwest::Client::new();
    let deliverer = fleet.worker(env!("CARGO_BIN_EXE_webhook-deliverer"));
    wait_ready(&http, &deliverer).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    // Done when the payment request is sent and the paid invoice's job has let it go.
    let sent = loop {
        let inv = invoice::Entity::find_by_id(mailed.id).one(conn).await.unwrap().unwrap();
        let late = invoice::Entity::find_by_id(paid.id).one(conn).await.unwrap().unwrap();
        if inv.sent_at.is_some() && late.email_due_at.is_none() {
            break inv;
        }
        assert!(
            Instant::now() < deadline,
            "not done: sent_at {:?}, paid's email_due_at {:?}",
            inv.sent_at,
            late.email_due_at
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(sent.email_due_at, None);

    // Exactly one message, to the payer, from the configured sender.
    let mails = sink.mails();
    assert_eq!(mails.len(), 1, "{mails:?}");
    let mail = &mails[0];
    assert_eq!((mail.from.as_str(), mail.to.as_slice()), ("pay@acme.example", &["payer@example.com".to_owned()][..]));
    let msg = MessageParser::default().parse(mail.data.as_bytes()).expect("a MIME message");
    assert_eq!(msg.subject(), Some("Payment request from Acme Shop: 0.015 BTC"));
    let from = msg.from().and_then(|a| a.first()).unwrap();
    assert_eq!((from.name(), from.address()), (Some("Acme Payments"), Some("pay@acme.example")));
    let reply_to = msg.reply_to().and_then(|a| a.first()).and_then(|a| a.address());
    assert_eq!(reply_to, Some("help@acme.example"), "replies go to the merchant's payer_reply_to");
    let link = format!("https://pay.acme.example/checkout/{}", mailed.id);
    let text = msg.body_text(0).expect("a plain-text part");
    for needle in ["Acme Shop asks you to pay 0.015 BTC.", "For: Order #42", &format!("Pay here: {link}")] {
        assert!(text.contains(needle), "{needle:?} not in the text part:\n{text}");
    }
    let html = msg.body_html(0).expect("an HTML part");
    assert!(html.contains(&format!("<a href=\"{link}\">Pay 0.015 BTC</a>")), "{html}");
    assert!(html.contains("Order #42"), "{html}");

    // invoice.sent, once; nothing for the other two.
    let events = testkit::invoice_events(conn, mailed.id).await;
    assert_eq!(events, ["invoice.sent"]);
    for other in [&silent, &paid] {
        let inv = invoice::Entity::find_by_id(other.id).one(conn).await.unwrap().unwrap();
        assert_eq!((inv.sent_at, inv.email_due_at), (None, None), "{}", other.id);
        assert!(testkit::invoice_events(conn, other.id).await.is_empty());
    }
    // Later sweeps send nothing more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.mails().len(), 1);
}

#[test]
fn without_an_smtp_host_there_is_no_mailer() {
    let config = domain::config::Config::default();
    assert!(workers::deliverer::mail::Mailer::from_config(&config).unwrap().is_none());
}
