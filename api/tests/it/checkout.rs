//! The checkout page's HTTP surface (the browser tests in `ops/tests/it/checkout_browser.rs` drive
//! the page itself): what the payer's view contains and leaves out, the page's headers and
//! escaping, activation and re-activation of deferred invoices (once, even when raced), and the
//! test-mode simulate buttons (absent in live), the payer's language and the receipt.

use std::time::Duration;

use entity::{Environment, event, invoice, sandbox_transfer};
use rust_decimal::Decimal;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::d;
use testkit::race::send_all;
use uuid::Uuid;
use workers::tracker::sweeper;

async fn state(app: &TestApp, id: &str) -> (u16, Value) {
    let r = app.get(&format!("/checkout/{id}/state"), None).await;
    (r.status.as_u16(), r.body["data"].clone())
}

async fn activate(app: &TestApp, id: &str, gate: &str) -> testkit::Resp {
    app.post(&format!("/checkout/{id}/activate"), None, &json!({"gate_id": gate})).await
}

/// `POST /checkout/{id}/test-payment` of `kind`: the payer's simulate button.
async fn test_payment(app: &TestApp, id: &str, kind: &str) -> testkit::Resp {
    app.post(&format!("/checkout/{id}/test-payment"), None, &json!({"kind": kind})).await
}

/// A draft of 60 USD fixed to bitcoin, which the payer only activates: its id.
async fn bitcoin_draft(app: &TestApp, key: &str) -> String {
    let body = json!({"is_deferred": true, "currency": "BTC", "amount_fiat": "60", "fiat_currency": "USD"});
    app.create_invoice(key, body).await["id"].as_str().unwrap().to_owned()
}

/// Sets one column of the invoice `id` behind the API's back.
async fn set_invoice(app: &TestApp, id: &str, column: invoice::Column, value: sea_orm::Value) {
    invoice::Entity::update_many()
        .col_expr(column, Expr::value(value))
        .filter(invoice::Column::Id.eq(Uuid::parse_str(id).unwrap()))
        .exec(&app.state.db)
        .await
        .unwrap();
}

/// The activation of `id` runs out unpaid: its `expires_at` is past, and the sweeper runs.
async fn expire_activation(app: &TestApp, id: &str) -> sweeper::SweepReport {
    set_invoice(app, id, invoice::Column::ExpiresAt, (chrono::Utc::now() - chrono::Duration::seconds(1)).into()).await;
    sweeper::sweep(&app.state.db, Duration::from_secs(60)).await.unwrap()
}

async fn activations(app: &TestApp, id: &str) -> u64 {
    event::Entity::find()
        .filter(event::Column::EventType.eq("invoice.activated"))
        .filter(event::Column::DedupeKey.starts_with(format!("invoice.activated:{id}:")))
        .count(&app.state.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_payers_view_holds_what_a_payer_needs_and_nothing_internal() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app
        .create_invoice(
            &key,
            json!({"currency": "USDT", "network": "tron", "amount": "12.5", "external_id": "order-7",
                   "metadata": {"customer": "secret-crm-id"}, "description": "Mug </script><script>alert(1)</script>"}),
        )
        .await;
    let id = inv["id"].as_str().unwrap();
    let (status, v) = state(&app, id).await;
    assert_eq!(status, 200);
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "address",
            "address_tag",
            "amount",
            "amount_fiat",
            "amount_paid",
            "amount_remaining",
            "can_activate",
            "description",
            "draft_expires_at",
            "expires_at",
            "fiat_currency",
            "gate",
            "merchant_name",
            "now",
            "options",
            "paid_at",
            "payment_uri",
            "payments",
            "redirect_url",
            "status",
            "test_mode"
        ]
    );
    let text = v.to_string();
    for secret in ["order-7", "secret-crm-id", inv["merchant_id"].as_str().unwrap()] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    assert_eq!(v["test_mode"], true);
    assert_eq!(v["address"], inv["deposit_address"]);
    assert_eq!(
        v["payment_uri"],
        format!(
            "tron:{}?token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t&amount=12.5",
            inv["deposit_address"].as_str().unwrap()
        )
    );

    // The page: embedded state, escaped so a description cannot close the script block.
    let r = app.http.get(app.url(&format!("/checkout/{id}"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    let page = r.text().await.unwrap();
    assert!(!page.contains("</script><script>alert(1)"), "unescaped description");
    assert!(page.contains("\\u003c/script>\\u003cscript>alert(1)"), "escaped description");
    assert!(!page.contains("http://") && !page.contains("https://"), "no external reference");
    for asset in ["/checkout/assets/checkout.js", "/checkout/assets/checkout.css"] {
        let r = app.http.get(app.url(asset)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{asset}");
        let body = r.text().await.unwrap();
        assert!(!body.contains("http://") && !body.contains("https://"), "{asset} references another origin");
    }
    let qr = app.http.get(app.url(&format!("/checkout/{id}/qr.svg"))).send().await.unwrap();
    assert_eq!(qr.headers()["content-type"], "image/svg+xml");
    assert!(qr.text().await.unwrap().starts_with("<?xml"));

    // Unknown or malformed ids: a 404 page, nothing else.
    for bad in [Uuid::now_v7().to_string(), "not-a-uuid".to_owned()] {
        let r = app.http.get(app.url(&format!("/checkout/{bad}"))).send().await.unwrap();
        assert_eq!(r.status(), 404, "{bad}");
    }
    assert_eq!(state(&app, &Uuid::now_v7().to_string()).await.0, 404);
}

#[tokio::test]
async fn a_draft_is_activated_once_on_the_chosen_gate_even_when_raced() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"is_deferred": true, "amount_fiat": "30", "fiat_currency": "USD"})).await;
    let id = inv["id"].as_str().unwrap().to_owned();
    let (_, v) = state(&app, &id).await;
    assert_eq!((v["status"].as_str(), v["can_activate"].as_bool()), (Some("draft"), Some(true)));
    assert_eq!(v["address"], Value::Null);
    let options: Vec<(String, String)> = v["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["gate"]["id"].as_str().unwrap().to_owned(), o["amount"].as_str().unwrap().to_owned()))
        .collect();
    assert!(options.contains(&("tron_usdt".into(), "30".into())), "{options:?}");
    assert!(options.contains(&("bitcoin".into(), "0.0005".into())), "{options:?}");
    // Nothing to simulate before a method is chosen.
    test_payment(&app, &id, "full").await.assert_error(422, "validation_error", Some("invoice"));
    activate(&app, &id, "dogecoin").await.assert_error(422, "unsupported_currency", Some("gate_id"));

    // Two payers click at once: one activation.
    let (a, b) = tokio::join!(activate(&app, &id, "tron_usdt"), activate(&app, &id, "bitcoin"));
    let mut codes = [a.status.as_u16(), b.status.as_u16()];
    codes.sort();
    assert_eq!(codes, [200, 409], "{} / {}", a.body, b.body);
    let loser = if a.status.as_u16() == 409 { &a } else { &b };
    loser.assert_error(409, "invoice_not_activatable", None);
    let got = app.get(&format!("/v1/invoices/{id}"), Some(&key)).await.data().clone();
    assert_eq!(got["status"], "pending");
    assert_eq!(got["activation_count"], 1);
    assert!(got["deposit_address"].is_string() && got["expires_at"].is_string() && got["activated_at"].is_string());
    let gate = got["network"].as_str().unwrap();
    let amount = if gate == "tron" { "30" } else { "0.0005" };
    assert_eq!(got["amount_requested"], amount);
    assert_eq!(activations(&app, &id).await, 1);
    // Asking again for the gate it was activated on answers that activation; another gate is 409.
    let (won, lost) = if gate == "tron" { ("tron_usdt", "bitcoin") } else { ("bitcoin", "tron_usdt") };
    let again = activate(&app, &id, won).await;
    assert_eq!(again.status.as_u16(), 200, "{}", again.body);
    assert_eq!(again.data()["address"], got["deposit_address"]);
    activate(&app, &id, lost).await.assert_error(409, "invoice_not_activatable", None);
    assert_eq!(activations(&app, &id).await, 1);
}

/// Payers activating one draft at the same moment take one deposit address between them: the
/// address is taken only after the activation's guarded update succeeded, in its transaction,
/// so a finite pool (live Solana) loses no entry to the requests that lost. Indices are reserved
/// one at a time here (`address_block_size` 1, as live Solana pools always are), so the counter
/// shows every address taken. Every caller sees the same activation. The requests are held
/// behind a lock on the invoice row until all of them wait for it, so they all read the draft
/// before any activation commits.
#[tokio::test]
async fn concurrent_activations_of_one_draft_take_one_address_and_all_see_it() {
    use entity::derivation_counter;
    const N: usize = 8;
    let app = TestApp::spawn_with(|c| c.invoices.address_block_size = 1).await;
    let (_, key) = app.test_key().await;
    let id = app.create_invoice(&key, json!({"is_deferred": true, "amount_fiat": "30", "fiat_currency": "USD"})).await
        ["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let counter = || async {
        derivation_counter::Entity::find_by_id(("test".to_owned(), "solana".to_owned()))
            .one(&app.state.db)
            .await
            .unwrap()
            .map_or(0, |c| c.next_index)
    };
    assert_eq!(counter().await, 0);

    let (_conn, hold) = hold_invoice(&app, &id).await;
    let url = app.url(&format!("/checkout/{id}/activate"));
    let in_flight = send_all((0..N).map(|_| app.http.post(&url).json(&json!({"gate_id": "solana"}))));
    app.wait_blocked_writers(N).await;
    hold.rollback().await.unwrap();
    let answers = in_flight.answers().await;

    assert_eq!(counter().await, 1, "one address taken from the counter: {answers:?}");
    let mut addresses = std::collections::HashSet::new();
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["data"]["status"], "pending", "{body}");
        addresses.insert(body["data"]["address"].as_str().unwrap().to_owned());
    }
    assert_eq!(addresses.len(), 1, "every caller sees the one activation: {addresses:?}");
    assert_eq!(activations(&app, &id).await, 1);
    let got = app.get(&format!("/v1/invoices/{id}"), Some(&key)).await.data().clone();
    assert_eq!((got["status"].as_str(), got["activation_count"].as_i64()), (Some("pending"), Some(1)));
    assert_eq!(Some(got["deposit_address"].as_str().unwrap()), addresses.iter().next().map(String::as_str));
    // The next address goes to the next invoice.
    let next = app.create_invoice(&key, json!({"currency": "SOL", "amount": "1"})).await;
    assert_ne!(next["deposit_address"], got["deposit_address"]);
}

/// A transaction of the test's own on another connection that holds the invoice `id` (PostgreSQL:
/// its row lock; SQLite: the database write lock) until rolled back; with its connection.
async fn hold_invoice(app: &TestApp, id: &str) -> (sea_orm::DatabaseConnection, sea_orm::DatabaseTransaction) {
    let conn = sea_orm::Database::connect(&app.db.url).await.unwrap();
    let txn = domain::db::begin_write(&conn).await.unwrap();
    let held = invoice::Entity::update_many()
        .col_expr(invoice::Column::UpdatedAt, Expr::col(invoice::Column::UpdatedAt))
        .filter(invoice::Column::Id.eq(Uuid::parse_str(id).unwrap()))
        .exec(&txn)
        .await
        .unwrap();
    assert_eq!(held.rows_affected, 1);
    (conn, txn)
}

#[tokio::test]
async fn an_unpaid_activation_that_expired_can_be_activated_again_with_the_same_address() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    // A draft fixed to a gate: the payer only activates it.
    let id = bitcoin_draft(&app, &key).await;
    activate(&app, &id, "tron_usdt").await.assert_error(422, "unsupported_currency", Some("gate_id"));
    let r = activate(&app, &id, "bitcoin").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    let first = r.data().clone();
    assert_eq!(first["amount"], "0.001");
    let address = first["address"].as_str().unwrap().to_owned();

    // The activation runs out unpaid: the sweeper expires it.
    expire_activation(&app, &id).await;
    let (_, v) = state(&app, &id).await;
    assert_eq!((v["status"].as_str(), v["can_activate"].as_bool()), (Some("expired"), Some(true)));
    assert_eq!(v["address"], Value::Null, "an expired invoice shows no address to pay");

    let r = activate(&app, &id, "bitcoin").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    assert_eq!(r.data()["address"], address.as_str(), "the address it had is kept (and still watched)");
    let got = app.get(&format!("/v1/invoices/{id}"), Some(&key)).await.data().clone();
    assert_eq!((got["status"].as_str(), got["activation_count"].as_i64()), (Some("pending"), Some(2)));
    assert_eq!(activations(&app, &id).await, 2);

    // Paid something, then expired: no re-activation.
    let r = test_payment(&app, &id, "partial").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    set_invoice(&app, &id, invoice::Column::Status, "expired".into()).await;
    // (The sandbox deposit is not scanned here, so it has no payment yet: record one.)
    testkit::credit_invoice(&app, merchant, Uuid::parse_str(&id).unwrap(), "bitcoin", "0.0005").await;
    assert_eq!(state(&app, &id).await.1["can_activate"], false);
    activate(&app, &id, "bitcoin").await.assert_error(409, "invoice_not_activatable", None);
}

#[tokio::test]
async fn the_simulate_buttons_send_the_remaining_half_or_one_and_a_half_in_test_only() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    let id = inv["id"].as_str().unwrap();
    for kind in ["partial", "full", "excess"] {
        let r = test_payment(&app, id, kind).await;
        assert_eq!(r.status.as_u16(), 200, "{kind}: {}", r.body);
    }
    let mut sent: Vec<Decimal> = sandbox_transfer::Entity::find()
        .filter(sandbox_transfer::Column::GateId.eq("bitcoin"))
        .all(&app.state.db)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.amount.0)
        .collect();
    sent.sort();
    // Nothing was scanned in between (no scanner here), so each press prices the whole amount.
    assert_eq!(sent, [d("0.005"), d("0.01"), d("0.015")]);
    let r = test_payment(&app, id, "all").await;
    assert_eq!(r.status.as_u16(), 400, "{}", r.body);
    // Once the whole amount is in, "full" and "partial" have nothing to send; an excess is half
    // the amount again.
    testkit::credit_invoice(&app, merchant, Uuid::parse_str(id).unwrap(), "bitcoin", "0.01").await;
    for kind in ["full", "partial"] {
        test_payment(&app, id, kind).await.assert_error(422, "validation_error", Some("kind"));
    }
    let r = test_payment(&app, id, "excess").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.body);
    let n = sandbox_transfer::Entity::find()
        .filter(sandbox_transfer::Column::Amount.eq(entity::Amount::new(d("0.005"))))
        .count(&app.state.db)
        .await
        .unwrap();
    assert_eq!(n, 2, "the partial payment and the late excess");

    // Live: no banner, and the route does not exist.
    let live = app.key(merchant, Environment::Live, &[]).await;
    let inv = app.create_invoice(&live, json!({"currency": "ETH", "network": "base", "amount": "0.01"})).await;
    let id = inv["id"].as_str().unwrap();
    assert_eq!(state(&app, id).await.1["test_mode"], false);
    test_payment(&app, id, "full").await.assert_error(404, "not_found", None);
}

/// The page template is filled in one pass: a description holding the template's own
/// placeholders stays text, and the page's state and messages stay valid JSON.
#[tokio::test]
async fn a_description_with_the_templates_placeholders_cannot_break_the_page() {
    let (app, _, key) = TestApp::with_test_key().await;
    let description = "{{STATE}} {{MESSAGES}} {{INVOICE}} {{STATE}}";
    let inv = app
        .create_invoice(&key, json!({"currency": "USDT", "network": "tron", "amount": "5", "description": description}))
        .await;
    let id = inv["id"].as_str().unwrap();
    let page = app.http.get(app.url(&format!("/checkout/{id}"))).send().await.unwrap().text().await.unwrap();
    let block = |name: &str| -> Value {
        let open = format!("<script type=\"application/json\" id=\"{name}\">");
        let start = page.find(&open).unwrap_or_else(|| panic!("no {name} block")) + open.len();
        let end = start + page[start..].find("</script>").unwrap();
        serde_json::from_str(&page[start..end])
            .unwrap_or_else(|e| panic!("{name} is not JSON ({e}): {}", &page[start..end]))
    };
    let state = block("checkout-state");
    assert_eq!(state["description"], description, "the description is shown as written");
    let messages: Value = serde_json::from_str(api::checkout::MESSAGES_EN).unwrap();
    assert_eq!(block("checkout-messages"), messages);
    assert!(page.contains(&format!("data-invoice=\"{id}\"")));
    assert_eq!(page.matches(&format!("data-invoice=\"{id}\"")).count(), 1);
}

/// Each expiry after a re-activation is its own `invoice.expired` event, and each activation's
/// `invoice.activated` carries its number, so a receiver de-duplicating by type, invoice and
/// `activation_count` keeps all four events.
#[tokio::test]
async fn every_activation_and_every_expiry_of_a_draft_is_its_own_event() {
    let (app, _, key) = TestApp::with_test_key().await;
    let id = bitcoin_draft(&app, &key).await;
    let uuid = Uuid::parse_str(&id).unwrap();
    for _ in 0..2 {
        let r = activate(&app, &id, "bitcoin").await;
        assert_eq!(r.status.as_u16(), 200, "{}", r.body);
        assert_eq!(expire_activation(&app, &id).await.expired, 1);
    }
    let events: Vec<(String, Value)> = event::Entity::find()
        .filter(event::Column::DedupeKey.contains(id.as_str()))
        .all(&app.state.db)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event_type, e.payload))
        .collect();
    let of = |t: &str| -> Vec<i64> {
        let mut n: Vec<i64> =
            events.iter().filter(|(k, _)| k == t).map(|(_, d)| d["activation_count"].as_i64().unwrap()).collect();
        n.sort();
        n
    };
    assert_eq!(of("invoice.activated"), [1, 2], "{events:?}");
    assert_eq!(of("invoice.expired"), [1, 2], "{events:?}");
    for (_, d) in &events {
        assert_eq!(d["invoice_id"], id.as_str());
    }
    // A replayed expiry of the second activation is still written once.
    let after = invoice::Entity::find_by_id(uuid).one(&app.state.db).await.unwrap().unwrap();
    assert!(
        !domain::events::emit_invoice(&app.state.db, domain::events::EventKind::InvoiceExpired, &after, None)
            .await
            .unwrap()
    );
}

/// The page speaks the payer's language: `?lang=`, else `Accept-Language` by q-value, else
/// English; the state's labels follow.
#[tokio::test]
async fn the_page_and_its_state_speak_the_payers_language() {
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app
        .create_invoice(
            &key,
            json!({"currency": "USDT", "network": "bsc", "amount_fiat": "49.90", "fiat_currency": "EUR"}),
        )
        .await;
    let id = inv["id"].as_str().unwrap();
    let page = |accept: &'static str, query: &'static str| {
        let req = app.http.get(app.url(&format!("/checkout/{id}{query}"))).header("accept-language", accept);
        async move { req.send().await.unwrap().text().await.unwrap() }
    };
    assert!(page("en;q=0.4, de-DE;q=0.9", "").await.contains("<html lang=\"de\">"));
    assert!(page("de", "?lang=fr").await.contains("<html lang=\"fr\">"), "?lang= overrides the header");
    assert!(page("ja", "").await.contains("<html lang=\"en\">"));
    let (_, en) = state(&app, id).await;
    assert_eq!(en["amount_fiat"], "49.9", "the exact decimal; the page formats it");
    assert_eq!(en["fiat_currency"], "EUR");
    assert_eq!(en["gate"]["label"], "USDT on BNB Smart Chain (BEP-20)");
    assert_eq!(en["gate"]["network_name"], "BNB Smart Chain");
    assert_eq!(en["gate"]["token_standard"], "BEP-20");
    let de = app.get(&format!("/checkout/{id}/state?lang=de"), None).await;
    assert_eq!(de.body["data"]["gate"]["label"], "USDT auf BNB Smart Chain (BEP-20)");
}

/// The receipt exists once the invoice is paid, in the payer's language, with every
/// merchant-provided string escaped and nothing of the invoice the payer did not see.
#[tokio::test]
async fn the_receipt_of_a_paid_invoice_shares_only_what_the_payer_knows() {
    let (app, merchant, key) = TestApp::with_test_key().await;
    let inv = app
        .create_invoice(
            &key,
            json!({"currency": "USDT", "network": "bsc", "amount_fiat": "49.90", "fiat_currency": "EUR",
                   "external_id": "order-7", "metadata": {"customer": "secret-crm-id"},
                   "redirect_url": "https://shop.example/thanks",
                   "description": "Mug <script>alert(1)</script> & \"more\""}),
        )
        .await;
    let id = inv["id"].as_str().unwrap();
    let receipt = |accept: &'static str| {
        let req = app.http.get(app.url(&format!("/checkout/{id}/receipt"))).header("accept-language", accept);
        async move { req.send().await.unwrap() }
    };
    assert_eq!(receipt("en").await.status(), 404, "no receipt before the invoice is paid");
    let amount = state(&app, id).await.1["amount"].as_str().unwrap().to_owned();
    testkit::credit_invoice(&app, merchant, Uuid::parse_str(id).unwrap(), "bsc_usdt", &amount).await;
    // What the confirmation tracker makes of it.
    set_invoice(&app, id, invoice::Column::AmountPaid, entity::Amount::new(d(&amount)).into()).await;
    set_invoice(&app, id, invoice::Column::PaidAt, Some(chrono::Utc::now()).into()).await;
    set_invoice(&app, id, invoice::Column::Status, "paid".into()).await;
    let r = receipt("de-DE,de;q=0.9,en;q=0.5").await;
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    let html = r.text().await.unwrap();
    assert!(html.contains("<html lang=\"de\">") && html.contains("Zahlungsbeleg"), "{html}");
    assert!(html.contains("Mug &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;more&quot;"), "{html}");
    assert!(!html.contains("<script"), "no script on the receipt: {html}");
    assert!(html.contains("49,90\u{a0}€"), "{html}");
    assert!(html.contains(&format!("{amount} USDT")), "{html}");
    assert!(html.contains("BNB Smart Chain") && html.contains("test-") && html.contains(id), "{html}");
    for secret in ["order-7", "secret-crm-id", "shop.example", inv["merchant_id"].as_str().unwrap()] {
        assert!(!html.contains(secret), "{secret} on the receipt: {html}");
    }
    assert_eq!(
        app.http.get(app.url(&format!("/checkout/{}/receipt", Uuid::now_v7()))).send().await.unwrap().status(),
        404
    );
}
