//! The hosted checkout page in a real browser: headless Chromium (Debian's `chromium`) driven
//! over WebDriver (`chromedriver`, with the `fantoccini` client), against `ops serve` as a
//! newcomer runs it (API and every stage in one process on the embedded default). Run with
//! `--features browser-tests` (`.ci/run` does); screenshots of every step are written to
//! `target/checkout-screenshots/` (or `$CHECKOUT_SCREENSHOTS`).
//!
//! 1. A test invoice: the page shows the test banner, the amount, the address and a QR code;
//!    the simulate buttons pay half, then the rest; the status goes seen → underpaid → paid
//!    without a reload, and the page sends the payer to the merchant's `redirect_url`.
//! 2. A fiat-priced draft: the payer picks USDT on tron on the page, which activates the
//!    invoice (address, locked amount, `invoice.activated`), then pays it in full.
//! 3. Every state in English and in German, at a desktop and a phone width: a 49.90 EUR draft
//!    (method list), waiting, confirming, paid, the receipt, and an expired draft. Each is
//!    checked on its visible text, by axe-core (no serious or critical violation) and kept as a
//!    screenshot (in `docs/checkout-screenshots/` too with `CHECKOUT_SCREENSHOTS_DOCS=1`). The method is chosen and the amount
//!    copied with the keyboard only.
//!
//! axe-core is read from `$AXE_CORE_JS` (its `axe.min.js`; `.ci/run`'s `ensure_axe_core`
//! installs it): the tests fail when it is missing. Built only with the feature
//! (`main.rs` declares this module under `#[cfg(feature = "browser-tests")]`).

use std::time::{Duration, Instant};

use fantoccini::Locator;
use fantoccini::key::Key;
use serde_json::{Value, json};
use testkit::fleet::free_port;
use testkit::serve::{KillOnDrop, ops_serve, start_with_demo_key};

use crate::browser::{Browser, plain};

struct Serve {
    base: String,
    key: String,
    http: reqwest::Client,
    _child: KillOnDrop,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// `ops serve` on a fresh directory, fast sandbox blocks; the demo test key it prints.
    async fn start() -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cmd = ops_serve(env!("CARGO_BIN_EXE_ops"), dir.path(), port, "300");
        cmd.env("PAYGATE_PUBLIC_BASE_URL", format!("http://127.0.0.1:{port}"))
            // Bitcoin blocks only when the test mines them: the page (polling every 2 s) shows
            // the "seen" state for as long as the test waits, whatever the machine's speed.
            .env("PAYGATE_SANDBOX__GATE_BLOCK_INTERVAL_MS__BITCOIN", "0")
            .env("PAYGATE_PIPELINE__TRACK_INTERVAL_MS", "200")
            // An expired draft within a second of its draft_expires_at.
            .env("PAYGATE_PIPELINE__SWEEP_INTERVAL_MS", "500");
        let (child, key) = start_with_demo_key(cmd).await;
        let s = Serve {
            base: format!("http://127.0.0.1:{port}"),
            key,
            http: reqwest::Client::new(),
            _child: child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while s.http.get(format!("{}/ready", s.base)).send().await.map(|r| r.status() != 200).unwrap_or(true) {
            assert!(Instant::now() < deadline, "ops serve never became ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        s
    }

    async fn invoice(&self, body: Value) -> Value {
        let r = self
            .http
            .post(format!("{}/v1/invoices", self.base))
            .header("X-API-Key", &self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["data"].clone()
    }

    /// Mines `count` sandbox blocks on `currency` (test helper route).
    async fn mine(&self, currency: &str, count: u32) {
        let r = self
            .http
            .post(format!("{}/v1/test/blocks", self.base))
            .header("X-API-Key", &self.key)
            .json(&json!({"currency": currency, "count": count}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    }

    async fn get_invoice(&self, id: &str) -> Value {
        let r = self.http.get(format!("{}/v1/invoices/{id}", self.base)).header("X-API-Key", &self.key);
        r.send().await.unwrap().json::<Value>().await.unwrap()["data"].clone()
    }
}

/// The merchant's "thank you" page the payer is sent back to.
async fn shop() -> String {
    let app = axum::Router::new().route(
        "/thanks",
        axum::routing::get(|| async {
            axum::response::Html("<!doctype html><title>Shop</title><h1 id=\"thanks\">Thank you for your order</h1>")
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/thanks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payer_pays_a_test_invoice_on_the_checkout_page() {
    let serve = Serve::start().await;
    let thanks = shop().await;
    let inv = serve
        .invoice(json!({"currency": "BTC", "amount": "0.01", "description": "Order #1042", "redirect_url": thanks}))
        .await;
    let b = Browser::start("checkout").await;
    b.client.goto(inv["checkout_url"].as_str().unwrap()).await.unwrap();
    b.wait_text("#status", "Waiting for your payment").await;
    // A marker that a reload would wipe.
    b.js("window.__noReload = 42; return true;").await;

    assert!(b.visible("#test-banner").await, "test-mode banner");
    assert!(b.text("#test-banner").await.contains("Test mode"));
    assert_eq!(b.text("#merchant").await, "Payment to Demo merchant");
    assert_eq!(b.text("#description").await, "Order #1042");
    assert_eq!(b.text("#amount").await, "0.01");
    assert_eq!(b.text("#address").await, inv["deposit_address"].as_str().unwrap());
    assert!(b.text("#countdown").await.starts_with("Time left: 59:"));
    // The QR code loaded (an SVG from our own origin) and is described for screen readers.
    let qr = b.js("const i = document.getElementById('qr'); return [i.complete, i.naturalWidth, i.alt, i.src];").await;
    assert_eq!(qr[0], true, "{qr}");
    assert!(qr[1].as_u64().unwrap() > 0, "{qr}");
    assert!(qr[2].as_str().unwrap().contains(inv["deposit_address"].as_str().unwrap()), "{qr}");
    let svg = serve.http.get(qr[3].as_str().unwrap()).send().await.unwrap();
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    assert_eq!(
        b.client.find(Locator::Css("#copy-address")).await.unwrap().attr("aria-label").await.unwrap().as_deref(),
        Some("Copy the deposit address")
    );
    b.shot("01-invoice-open").await;

    // Half now: seen, confirming, then underpaid with the rest to pay.
    b.click("#simulate-partial").await;
    b.wait_text("#simulate-note", "Simulated payment sent").await;
    serve.mine("BTC", 1).await; // the block holding the transfer: seen, 1 of 3 confirmations
    b.wait_text("#status", "Payment seen").await;
    b.shot("02-payment-seen").await;
    serve.mine("BTC", 2).await;
    b.wait_text("#status", "Partially paid: 0.005 BTC still to pay").await;
    assert_eq!(b.text("#amount").await, "0.005");
    assert_eq!(b.text("#amount-label").await, "Send the remaining");
    b.shot("03-underpaid").await;

    // The rest: paid, then back to the shop.
    b.click("#simulate-full").await;
    // Blocks until the page shows the payment confirmed (the transfer lands in the next one).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !b.text("#status").await.contains("Paid. Thank you!") {
        assert!(Instant::now() < deadline, "never paid: {}", b.text("#status").await);
        serve.mine("BTC", 1).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    assert_eq!(b.js("return window.__noReload;").await, 42, "the status changed without a reload");
    assert!(!b.visible("#pay").await, "nothing left to pay");
    assert_eq!(b.text("#received").await, "Received: 0.01 BTC");
    assert_eq!(
        b.client.find(Locator::Css("#redirect-link")).await.unwrap().attr("href").await.unwrap().as_deref(),
        Some(thanks.as_str())
    );
    b.shot("04-paid").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.client.current_url().await.unwrap().as_str() != thanks {
        assert!(Instant::now() < deadline, "never redirected to {thanks}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.wait_text("#thanks", "Thank you for your order").await;
    b.shot("05-redirected").await;
    assert_eq!(serve.get_invoice(inv["id"].as_str().unwrap()).await["status"], "paid");
    b.client.clone().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payer_chooses_the_method_of_a_draft_on_the_page() {
    let serve = Serve::start().await;
    let inv = serve
        .invoice(json!({"is_deferred": true, "amount_fiat": "25", "fiat_currency": "USD", "description": "Gift card"}))
        .await;
    assert_eq!(inv["status"], "draft");
    assert_eq!(inv["deposit_address"], Value::Null);
    let b = Browser::start("checkout").await;
    b.client.goto(inv["checkout_url"].as_str().unwrap()).await.unwrap();
    b.wait_text("#methods-title", "Choose a payment method").await;
    assert!(!b.visible("#status").await, "one heading: the method list's");
    assert!(!b.visible("#pay").await, "no address before a method is chosen");
    assert_eq!(b.text("#fiat-total").await, "$25.00");
    // Every enabled gate priced at today's rate: 25 USD is 25 USDT, 0.000417 BTC (rounded up).
    let tron_usdt = b.text("button[data-gate='tron_usdt']").await;
    assert!(tron_usdt.contains("USDT on TRON (TRC-20)") && tron_usdt.contains("25 USDT"), "{tron_usdt}");
    let btc = b.text("button[data-gate='bitcoin']").await;
    assert!(btc.contains("BTC on Bitcoin") && btc.contains("0.00041667 BTC"), "{btc}");
    b.shot("06-draft-methods").await;

    b.click("button[data-gate='tron_usdt']").await;
    b.wait_text("#status", "Waiting for your payment").await;
    assert_eq!(b.text("#amount").await, "25");
    assert_eq!(b.text("#asset").await, "USDT");
    assert_eq!(b.text("#network").await, "TRON (TRC-20)");
    let activated = serve.get_invoice(inv["id"].as_str().unwrap()).await;
    assert_eq!(activated["status"], "pending");
    assert_eq!(activated["activation_count"], 1);
    assert_eq!(activated["currency"], "USDT");
    assert_eq!(activated["network"], "tron");
    assert!(activated["activated_at"].is_string() && activated["expires_at"].is_string());
    assert_eq!(b.text("#address").await, activated["deposit_address"].as_str().unwrap());
    b.shot("07-draft-activated").await;

    b.click("#simulate-full").await;
    b.wait_text("#status", "Paid. Thank you!").await;
    b.shot("08-draft-paid").await;
    assert_eq!(serve.get_invoice(inv["id"].as_str().unwrap()).await["amount_paid"], "25");
    b.client.clone().close().await.unwrap();
}

/// What the page says in one language, for the assertions on visible text.
struct Texts {
    lang: &'static str,
    fiat: &'static str,
    label: &'static str,
    choose: &'static str,
    waiting: &'static str,
    seen: &'static str,
    paid: &'static str,
    receipt_link: &'static str,
    receipt: &'static str,
    expired: &'static str,
}

const EN: Texts = Texts {
    lang: "en",
    fiat: "€49.90",
    label: "USDT on BNB Smart Chain (BEP-20)",
    choose: "Choose a payment method",
    waiting: "Waiting for your payment",
    seen: "Payment seen: 1 of 3 confirmations",
    paid: "Paid. Thank you!",
    receipt_link: "View and print the receipt",
    receipt: "Payment receipt",
    expired: "Expired",
};

const DE: Texts = Texts {
    lang: "de",
    fiat: "49,90 €",
    label: "USDT auf BNB Smart Chain (BEP-20)",
    choose: "Zahlungsart wählen",
    waiting: "Warten auf Ihre Zahlung",
    seen: "Zahlung erkannt: 1 von 3 Bestätigungen",
    paid: "Bezahlt. Vielen Dank!",
    receipt_link: "Beleg ansehen und drucken",
    receipt: "Zahlungsbeleg",
    expired: "Abgelaufen",
};

/// Every state of a 49.90 EUR order in one language, at both widths: draft (method list),
/// waiting, confirming, paid, receipt, and an expired draft; the method chosen and the amount
/// copied with the keyboard only.
async fn every_state_in(t: &Texts) {
    let serve = Serve::start().await;
    let description = "Order #1042";
    let inv = serve
        .invoice(json!({
            "is_deferred": true, "amount_fiat": "49.90", "fiat_currency": "EUR", "description": description,
            "external_id": "ext-secret-7", "metadata": {"note": "meta-secret-9"}
        }))
        .await;
    let id = inv["id"].as_str().unwrap().to_owned();
    let url = inv["checkout_url"].as_str().unwrap();
    // The receipt of an unpaid invoice does not exist.
    let early = serve.http.get(format!("{}/checkout/{id}/receipt", serve.base)).send().await.unwrap();
    assert_eq!(early.status(), 404);

    let b = Browser::start("checkout").await;
    b.client.goto(url).await.unwrap();
    if t.lang != "en" {
        // The language links: plain links, the page comes back in that language.
        b.wait_text("#methods-title", EN.choose).await;
        b.click(&format!("a[hreflang='{}']", t.lang)).await;
    }
    b.wait_text("#methods-title", t.choose).await;
    assert_eq!(b.js("return document.documentElement.lang;").await, t.lang);
    assert!(!b.visible("#status").await, "one heading: the method list's");
    let top = [("#fiat-total", t.fiat), ("#description", description)];
    // Quotes rounded up to figures people send (USDT to cents, ETH to 6 places), never below
    // the price: 49.90 EUR at 0.9 EUR per USDT is 55.45, at 2700 EUR per ETH 0.018482.
    let draft = [
        top[0],
        top[1],
        ("#methods-title", t.choose),
        ("#method-list", t.label),
        ("#method-list", "55.45 USDT"),
        ("#method-list", "0.018482 ETH"),
    ];
    b.capture("draft", t.lang, &draft).await;

    // Keyboard only: Tab to Bitcoin, Enter.
    b.tab_to("button[data-gate='bitcoin']").await;
    b.press(Key::Enter).await;
    b.wait_text("#status", t.waiting).await;
    assert_eq!(b.text("#network").await, "Bitcoin");
    b.capture("waiting", t.lang, &[top[0], top[1], ("#status", t.waiting)]).await;
    // The state poll keeps the language.
    assert_eq!(b.js("return document.documentElement.lang;").await, t.lang);
    let copy_label = b.text("#copy-amount").await;
    b.tab_to("#copy-amount").await;
    b.press(Key::Enter).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.text("#copy-amount").await == copy_label {
        assert!(Instant::now() < deadline, "the copy button never said it copied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // While it says so, its accessible name says so too (axe: the name contains the text).
    let copied = b
        .js("var c = document.getElementById('copy-amount'); return [c.textContent, c.getAttribute('aria-label')];")
        .await;
    assert_eq!(copied[0], copied[1], "the copy button's name while it says it copied");

    b.click("#simulate-full").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.text("#simulate-note").await.is_empty() {
        assert!(Instant::now() < deadline, "the simulated payment was never sent");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    serve.mine("BTC", 1).await;
    b.wait_text("#status", t.seen).await;
    b.capture("confirming", t.lang, &[top[0], top[1], ("#status", t.seen)]).await;

    serve.mine("BTC", 2).await;
    b.wait_text("#status", t.paid).await;
    b.capture("paid", t.lang, &[top[0], top[1], ("#status", t.paid), ("#receipt-link", t.receipt_link)]).await;

    b.click("#receipt-link").await;
    b.wait_text("#receipt-title", t.receipt).await;
    assert_eq!(b.js("return document.documentElement.lang;").await, t.lang);
    let receipt = plain(&b.text("#receipt").await);
    for want in [description, t.fiat, "Bitcoin", "BTC", id.as_str(), "Demo merchant"] {
        assert!(receipt.contains(want), "the receipt shows {want:?}: {receipt}");
    }
    let rows = b.client.find_all(Locator::Css("#transactions tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 1, "one credited transaction");
    let source = b.client.source().await.unwrap();
    for secret in ["ext-secret-7", "meta-secret-9", "<script"] {
        assert!(!source.contains(secret), "the receipt shows {secret:?}");
    }
    b.capture("receipt", t.lang, &[("#receipt-title", t.receipt), ("#receipt", t.fiat)]).await;

    // A draft nobody opened in time: expired.
    let soon = chrono::Utc::now() + chrono::Duration::seconds(2);
    let gone = serve
        .invoice(json!({
            "is_deferred": true, "amount_fiat": "49.90", "fiat_currency": "EUR", "description": description,
            "draft_expires_at": soon.to_rfc3339()
        }))
        .await;
    let gone_id = gone["id"].as_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while serve.get_invoice(gone_id).await["status"] != "expired" {
        assert!(Instant::now() < deadline, "the draft never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.client.goto(&format!("{}?lang={}", gone["checkout_url"].as_str().unwrap(), t.lang)).await.unwrap();
    b.wait_text("#status", t.expired).await;
    assert!(!b.visible("#methods").await && !b.visible("#pay").await, "nothing to choose or pay");
    b.capture("expired", t.lang, &[top[0], top[1], ("#status", t.expired)]).await;
    b.client.clone().close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_in_english_at_desktop_and_phone_widths() {
    every_state_in(&EN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_in_german_at_desktop_and_phone_widths() {
    every_state_in(&DE).await;
}
