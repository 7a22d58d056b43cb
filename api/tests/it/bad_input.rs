//! Bad input, across the invoice endpoints and the other resources: a clear 400 naming the
//! field (malformed JSON, wrong types, out-of-bound values, NUL characters, amounts with more
//! digits than fit), 413 for an oversized body, and nothing written by any refused request; an
//! internal error renders the envelope without leaking its cause.

use serde_json::{Value, json};
use testkit::TestApp;

#[tokio::test]
async fn malformed_requests_are_400_naming_the_field() {
    let (app, _, key) = TestApp::with_test_key().await;
    let r = app.post_raw("/v1/invoices", &key, "{\"currency\": \"BTC\",").await;
    r.assert_error(400, "validation_error", Some("body"));
    app.post_raw("/v1/invoices", &key, "[1,2]").await.assert_error(400, "validation_error", Some("body"));
    app.post_raw("/v1/invoices", &key, "").await.assert_error(400, "validation_error", Some("body"));
    for (body, field) in [
        (json!({"currency": "BTC", "amount": 5}), "amount"),
        (json!({"currency": 7, "amount": "5"}), "currency"),
        (json!({"currency": "BTC", "amount": "5", "is_deferred": "yes"}), "is_deferred"),
        (json!({"currency": "BTC", "amount": "5", "metadata": [1]}), "metadata"),
        (json!({"currency": "BTC", "amount": "5", "amout": "1"}), "amout"),
        (json!({"currency": "BTC", "amount": "-1"}), "amount"),
        (json!({"currency": "BTC", "amount": "1e3"}), "amount"),
        (json!({"currency": "BTC"}), "amount"),
        (json!({"amount": "0.1"}), "currency"),
        (json!({"currency": "BTC", "amount": "0.1", "amount_fiat": "5", "fiat_currency": "USD"}), "amount"),
        (json!({"currency": "BTC", "amount_fiat": "5"}), "fiat_currency"),
        (json!({"currency": "BTC", "amount": "0.1", "description": "x".repeat(1001)}), "description"),
        (json!({"currency": "BTC", "amount": "0.1", "external_id": "x".repeat(256)}), "external_id"),
        (json!({"currency": "BTC", "amount": "0.1", "idempotency_key": "k".repeat(256)}), "idempotency_key"),
        (json!({"currency": "BTC", "amount": "0.1", "idempotency_key": ""}), "idempotency_key"),
        (json!({"currency": "BTC", "amount": "0.1", "redirect_url": "javascript:alert(1)"}), "redirect_url"),
        (json!({"currency": "BTC", "amount": "0.1", "payer_email": "not-an-email"}), "payer_email"),
        (json!({"currency": "BTC", "amount": "0.1", "draft_expires_at": "2099-01-01T00:00:00Z"}), "draft_expires_at"),
        (
            json!({"currency": "BTC", "amount": "0.1", "is_deferred": true, "draft_expires_at": "yesterday"}),
            "draft_expires_at",
        ),
    ] {
        app.post("/v1/invoices", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    let meta: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!(i))).collect();
    app.post("/v1/invoices", Some(&key), &json!({"currency": "BTC", "amount": "0.1", "metadata": meta}))
        .await
        .assert_error(400, "validation_error", Some("metadata"));
    let meta: serde_json::Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!(i))).collect();
    app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.1", "metadata": meta})).await;
    // Bad UUIDs in paths.
    app.get("/v1/invoices/not-a-uuid", Some(&key)).await.assert_error(400, "validation_error", Some("invoice_id"));
    app.post("/v1/invoices/123/cancel", Some(&key), &json!({})).await.assert_error(
        400,
        "validation_error",
        Some("invoice_id"),
    );
    app.get(&format!("/v1/invoices/{}", uuid::Uuid::new_v4()), Some(&key)).await.assert_error(404, "not_found", None);
    // Nothing was written by any of the refused requests.
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 1);
}

#[tokio::test]
async fn internal_errors_render_the_envelope_without_leaking_the_cause() {
    use sea_orm::ConnectionTrait;
    let (app, _, key) = TestApp::with_test_key().await;
    let inv = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;
    // Break the schema under the running API.
    // (A table nothing references, that reading an invoice's payments joins.)
    app.state.db.execute_unprepared("DROP TABLE settlement_conversions").await.unwrap();
    let r = app.get(&format!("/v1/invoices/{}", inv["id"].as_str().unwrap()), Some(&key)).await;
    r.assert_error(500, "internal_error", None);
    let text = r.body.to_string();
    assert!(!text.contains("settlement_conversions") && !text.to_lowercase().contains("sql"), "{text}");
    assert_eq!(r.body["meta"]["request_id"], r.headers["x-request-id"].to_str().unwrap());
}

/// A NUL character cannot be stored by PostgreSQL (text or JSON), so any string field holding
/// one, at any depth, is 400 `validation_error` naming the field, on both databases, and
/// nothing is written. Query parameters too.
#[tokio::test]
async fn nul_characters_are_refused_in_every_string_field_naming_it() {
    let (app, m, key) = TestApp::with_test_key().await;
    let nul = "a\u{0}b";
    let inv = json!({"currency": "BTC", "amount": "0.1"});
    let with = |base: &Value, k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let invoice_cases = [
        (with(&inv, "description", json!(nul)), "description"),
        (with(&inv, "external_id", json!(nul)), "external_id"),
        (with(&inv, "idempotency_key", json!(nul)), "idempotency_key"),
        (with(&inv, "redirect_url", json!(format!("https://shop.example/{nul}"))), "redirect_url"),
        (with(&inv, "payer_email", json!(format!("{nul}@shop.example"))), "payer_email"),
        (with(&inv, "currency", json!("BT\u{0}C")), "currency"),
        (with(&inv, "metadata", json!({"note": nul})), "metadata.note"),
        (with(&inv, "metadata", json!({"deep": {"list": ["ok", nul]}})), "metadata.deep.list[1]"),
        (with(&inv, "metadata", json!({"ke\u{0}y": 1})), "metadata.ke\\u0000y"),
    ];
    for (body, field) in invoice_cases {
        app.post("/v1/invoices", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);

    let po = json!({"currency": "USDT", "network": "tron", "amount": "5", "destination": "TTxSA9fmLZbSEfkEejjU2vDqE8GyS5nCJP"});
    for (body, field) in [
        (with(&po, "destination", json!(nul)), "destination"),
        (with(&po, "destination_tag", json!(nul)), "destination_tag"),
        (with(&po, "description", json!(nul)), "description"),
        (with(&po, "idempotency_key", json!(nul)), "idempotency_key"),
        (with(&po, "metadata", json!({"k": nul})), "metadata.k"),
    ] {
        app.post("/v1/payouts", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    let refund = with(&po, "invoice_id", json!(uuid::Uuid::now_v7()));
    for (body, field) in [
        (with(&refund, "destination", json!(nul)), "destination"),
        (with(&refund, "description", json!(nul)), "description"),
        (with(&refund, "metadata", json!({"k": nul})), "metadata.k"),
    ] {
        let rb = app.http.post(app.url("/v1/refunds")).header("X-API-Key", &key).header("Idempotency-Key", "k");
        app.send(rb.json(&body)).await.assert_error(400, "validation_error", Some(field));
    }
    app.post("/v1/addresses", Some(&key), &json!({"currency": "BTC", "label": nul})).await.assert_error(
        400,
        "validation_error",
        Some("label"),
    );
    // Query strings: `%00` in any parameter.
    for path in ["/v1/invoices?currency=BT%00C", "/v1/addresses?network=%00", "/v1/payouts?limit=5&x=%00"] {
        let r = app.get(path, Some(&key)).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.details()[0].contains("NUL"), "{path}: {}", r.body);
    }
    app.get("/v1/invoices?currency=BT%00C", Some(&key)).await.assert_error(400, "validation_error", Some("currency"));
    // The test helpers and the checkout page's activation (no key) go through the same check.
    let created = app.create_invoice(&key, inv.clone()).await;
    let dep = json!({"invoice_id": created["id"], "amount": "0.1", "tx_hash": nul});
    app.post("/v1/test/deposits", Some(&key), &dep).await.assert_error(400, "validation_error", Some("tx_hash"));
    let draft =
        app.create_invoice(&key, json!({"is_deferred": true, "amount_fiat": "30", "fiat_currency": "USD"})).await;
    let path = format!("/checkout/{}/activate", draft["id"].as_str().unwrap());
    app.post(&path, None, &json!({"gate_id": nul})).await.assert_error(400, "validation_error", Some("gate_id"));
    // Nothing was written by the refused requests: no payout, no refund, no address, no deposit.
    for path in ["/v1/payouts", "/v1/refunds", "/v1/addresses"] {
        assert_eq!(app.get(path, Some(&key)).await.body["meta"]["pagination"]["total"], 0, "{path}");
    }
    let _ = m;
}

/// A body over the limit is answered with the error envelope (413 `payload_too_large`), both
/// when `Content-Length` announces it and when a chunked body grows past it.
#[tokio::test]
async fn an_oversized_body_gets_the_error_envelope() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (app, _, key) = TestApp::with_test_key().await;
    let big = json!({"currency": "BTC", "amount": "0.1", "description": "d".repeat(100 * 1024)});
    let r = app.post("/v1/invoices", Some(&key), &big).await;
    r.assert_error(413, "payload_too_large", Some("body"));
    assert!(r.headers.get("x-request-id").is_some());

    // Chunked: no Content-Length, the limit trips while reading.
    let mut s = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let head = format!(
        "POST /v1/invoices HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {key}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let chunk = " ".repeat(96 * 1024);
    let body = format!("{:x}\r\n{chunk}\r\n0\r\n\r\n", chunk.len());
    // The server may answer (and close) before reading everything: write errors do not matter.
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("\"code\":\"payload_too_large\"") && text.contains("request_id"), "{text}");
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);
}

/// Amounts are parsed exactly: more significant digits than a Decimal holds is 400 naming the
/// field, never silently rounded (`0.1000000000000000000000000000001` used to become 0.1).
#[tokio::test]
async fn amounts_with_more_digits_than_fit_are_refused_not_rounded() {
    let (app, _, key) = TestApp::with_test_key().await;
    let precise = "0.1000000000000000000000000000001";
    for (body, field) in [
        (json!({"currency": "BTC", "amount": precise}), "amount"),
        (
            json!({"currency": "BTC", "amount_fiat": format!("1{}", &precise[1..]), "fiat_currency": "USD"}),
            "amount_fiat",
        ),
    ] {
        let r = app.post("/v1/invoices", Some(&key), &body).await;
        r.assert_error(400, "validation_error", Some(field));
        assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    }
    assert_eq!(app.get("/v1/invoices", Some(&key)).await.body["meta"]["pagination"]["total"], 0);
    // The test deposit helper parses the same way.
    let inv = app.create_invoice(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "0.1"})).await;
    let r = app.post("/v1/test/deposits", Some(&key), &json!({"invoice_id": inv["id"], "amount": precise})).await;
    r.assert_error(422, "validation_error", Some("amount"));
    assert!(r.details()[0].contains("significant digits"), "{}", r.body);
    // 28 significant digits fit and are kept exactly.
    let ok = app
        .create_invoice(&key, json!({"currency": "ETH", "network": "ethereum", "amount": "0.100000000000000001"}))
        .await;
    assert_eq!(ok["amount_requested"], "0.100000000000000001");
}
