//! Spec 2.7 and 4.12: static deposit addresses.

use std::collections::HashSet;

use api::auth::Permission;
use chrono::{DateTime, Utc};
use domain::chain::address::{AddressFamily, ChainNet, validate_address};
use entity::{Environment, invoice, static_address};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use testkit::TestApp;
use uuid::Uuid;

/// Every field of spec 2.7, plus `network`.
const STATIC_ADDRESS_FIELDS: [&str; 12] = [
    "id",
    "merchant_id",
    "currency",
    "environment",
    "gate_id",
    "address",
    "address_tag",
    "label",
    "total_received",
    "invoice_count",
    "created_at",
    "network",
];

/// `POST /v1/addresses`, which answers 200 (spec §4: "unless stated, success returns 200").
async fn create_address(app: &TestApp, key: &str, body: Value) -> Value {
    let r = app.post("/v1/addresses", Some(key), &body).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.data().clone()
}

fn total(r: &testkit::Resp) -> u64 {
    r.body["meta"]["pagination"]["total"].as_u64().unwrap_or_else(|| panic!("no pagination: {}", r.body))
}

fn id_of(v: &Value) -> &str {
    v["id"].as_str().unwrap_or_else(|| panic!("no id: {v}"))
}

#[tokio::test]
async fn create_for_several_gates_returns_every_field() {
    let (app, m, key) = TestApp::with_test_key().await;
    let cases = [
        (json!({"currency": "BTC", "label": "customer 42"}), "bitcoin", "BTC", "bitcoin", AddressFamily::Bitcoin),
        (json!({"currency": "xrp"}), "xrp", "XRP", "xrp", AddressFamily::Xrp),
        (json!({"currency": "tron_usdt", "label": ""}), "tron_usdt", "USDT", "tron", AddressFamily::Tron),
        (json!({"currency": "USDC", "network": "solana"}), "solana_usdc", "USDC", "solana", AddressFamily::Solana),
        (json!({"currency": "USDT", "network": "ethereum"}), "ethereum_usdt", "USDT", "ethereum", AddressFamily::Evm),
    ];
    let before = Utc::now() - chrono::Duration::seconds(1);
    for (body, gate, currency, network, family) in cases {
        let a = create_address(&app, &key, body.clone()).await;
        let obj = a.as_object().unwrap();
        for f in STATIC_ADDRESS_FIELDS {
            assert!(obj.contains_key(f), "{gate}: missing field {f}");
        }
        assert_eq!(obj.len(), STATIC_ADDRESS_FIELDS.len(), "{gate}: unexpected fields in {a}");
        assert!(Uuid::parse_str(id_of(&a)).is_ok());
        assert_eq!(a["merchant_id"], m.to_string());
        assert_eq!(a["environment"], "test");
        assert_eq!(a["gate_id"], gate);
        assert_eq!(a["currency"], currency);
        assert_eq!(a["network"], network);
        assert_eq!(a["total_received"], "0");
        assert_eq!(a["invoice_count"], 0);
        assert_eq!(a["label"], body.get("label").cloned().unwrap_or(Value::Null), "{gate}");
        let created = DateTime::parse_from_rfc3339(a["created_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
        assert!(created >= before && created <= Utc::now(), "{gate}: created_at {created}");
        assert!(a["created_at"].as_str().unwrap().ends_with('Z'));
        let addr = a["address"].as_str().unwrap();
        let tag = a["address_tag"].as_str();
        assert_eq!(tag.is_some(), family == AddressFamily::Xrp, "{gate}: address_tag {}", a["address_tag"]);
        validate_address(family, ChainNet::Testnet, addr, tag).unwrap_or_else(|e| panic!("{gate}: {addr}: {e}"));
        if gate == "bitcoin" {
            assert!(addr.starts_with("tb1q"), "{addr}");
        }
        // GET returns the same object.
        let g = app.get(&format!("/v1/addresses/{}", id_of(&a)), Some(&key)).await;
        assert_eq!(g.status, 200, "{}", g.body);
        assert_eq!(g.data(), &a);
        assert!(g.body["meta"]["request_id"].as_str().is_some_and(|s| !s.is_empty()));
    }
    // The stored scanner key has the invoices' format.
    let rows = static_address::Entity::find().all(&app.state.db).await.unwrap();
    assert_eq!(rows.len(), 5);
    for r in rows {
        let family = domain::gates::find(&r.gate_id).unwrap().family;
        assert_eq!(r.address_key, domain::addresses::address_key(family, &r.address, r.address_tag.as_deref()));
    }
}

#[tokio::test]
async fn addresses_never_collide_with_each_other_or_with_invoice_addresses() {
    // Small blocks, so allocation crosses many block boundaries while both resources draw on it.
    let app = TestApp::spawn_with(|c| c.invoices.address_block_size = 3).await;
    let other_process = TestApp::spawn_on(app.db.clone(), |c| c.invoices.address_block_size = 3).await;
    let (m, key) = app.test_key().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let gates = [
        ("bitcoin", "0.001"),
        ("xrp", "5"),
        ("tron_usdt", "5"),
        ("ethereum", "0.01"),
        ("polygon_usdc", "5"),
        ("solana", "0.5"),
    ];
    let mut seen: HashSet<(String, String, Option<String>)> = HashSet::new();
    let mut static_count = 0;
    for round in 0..4 {
        for (env_key, env) in [(&key, "test"), (&live, "live")] {
            for (i, (gate, amount)) in gates.iter().enumerate() {
                let family = domain::gates::find(gate).unwrap().family;
                if env == "live" && family != AddressFamily::Evm {
                    continue; // only live EVM gates have a chain adapter (the others are offline)
                }
                let via = if (round + i) % 2 == 0 { &app } else { &other_process };
                let inv = via.create_invoice(env_key, json!({"currency": gate, "amount": amount})).await;
                let sa = create_address(via, env_key, json!({"currency": gate})).await;
                static_count += 1;
                for (what, addr, tag) in [
                    ("invoice", &inv["deposit_address"], &inv["deposit_address_tag"]),
                    ("static address", &sa["address"], &sa["address_tag"]),
                ] {
                    let key = (env.to_owned(), addr.as_str().unwrap().to_owned(), tag.as_str().map(str::to_owned));
                    assert!(seen.insert(key.clone()), "{what} on {gate} reused {key:?}");
                }
                assert_eq!(sa["environment"], env);
                let net = if env == "live" { ChainNet::Mainnet } else { ChainNet::Testnet };
                validate_address(family, net, sa["address"].as_str().unwrap(), sa["address_tag"].as_str())
                    .unwrap_or_else(|e| panic!("{gate}: {sa}: {e}"));
            }
        }
    }
    assert_eq!(seen.len(), static_count * 2);
    // The stored scanner keys are distinct across both tables too.
    let mut keys = HashSet::new();
    for r in static_address::Entity::find().all(&app.state.db).await.unwrap() {
        assert!(keys.insert((r.environment, r.address_key)));
    }
    for r in invoice::Entity::find().all(&app.state.db).await.unwrap() {
        assert!(keys.insert((r.environment, r.address_key.unwrap())));
    }
    assert_eq!(keys.len(), static_count * 2);
}

#[tokio::test]
async fn keys_need_the_address_permissions() {
    let (app, m, full) = TestApp::with_test_key().await;
    let read_only = app.key(m, Environment::Test, &[Permission::AddressesRead]).await;
    let write_only = app.key(m, Environment::Test, &[Permission::AddressesWrite]).await;
    let invoices_only = app.key(m, Environment::Test, &[Permission::InvoicesRead, Permission::InvoicesWrite]).await;
    let a = create_address(&app, &full, json!({"currency": "BTC"})).await;
    let reads = [
        "/v1/addresses".to_owned(),
        format!("/v1/addresses/{}", id_of(&a)),
        format!("/v1/addresses/{}/invoices", id_of(&a)),
    ];

    // 401 without a key or with an unknown one.
    app.post("/v1/addresses", None, &json!({"currency": "BTC"})).await.assert_error(401, "unauthorized", None);
    let unknown = format!("sk_test_{}", "0".repeat(64));
    for path in &reads {
        app.get(path, None).await.assert_error(401, "unauthorized", None);
        app.get(path, Some(&unknown)).await.assert_error(401, "unauthorized", None);
    }

    // 403 naming the missing permission.
    for k in [&read_only, &invoices_only] {
        let r = app.post("/v1/addresses", Some(k), &json!({"currency": "BTC"})).await;
        r.assert_error(403, "forbidden", None);
        assert!(r.body["error"]["message"].as_str().unwrap().contains("addresses:write"), "{}", r.body);
    }
    for k in [&write_only, &invoices_only] {
        for path in &reads {
            let r = app.get(path, Some(k)).await;
            r.assert_error(403, "forbidden", None);
            assert!(r.body["error"]["message"].as_str().unwrap().contains("addresses:read"), "{}", r.body);
        }
    }
    // Nothing was created by the refused requests.
    assert_eq!(total(&app.get("/v1/addresses", Some(&full)).await), 1);

    // Each permission alone is enough for its endpoints.
    let b = create_address(&app, &write_only, json!({"currency": "ETH", "network": "base"})).await;
    for path in
        [reads[0].clone(), format!("/v1/addresses/{}", id_of(&b)), format!("/v1/addresses/{}/invoices", id_of(&b))]
    {
        assert_eq!(app.get(&path, Some(&read_only)).await.status, 200, "{path}");
    }
    assert_eq!(total(&app.get("/v1/addresses", Some(&read_only)).await), 2);
}

#[tokio::test]
async fn malformed_requests_are_400_naming_the_field() {
    let (app, _, key) = TestApp::with_test_key().await;
    app.post_raw("/v1/addresses", &key, "{\"currency\": \"BTC\",").await.assert_error(
        400,
        "validation_error",
        Some("body"),
    );
    app.post_raw("/v1/addresses", &key, "[\"BTC\"]").await.assert_error(400, "validation_error", Some("body"));
    app.post_raw("/v1/addresses", &key, "").await.assert_error(400, "validation_error", Some("body"));
    for (body, field) in [
        (json!({"currency": "BTC", "lable": "typo"}), "lable"),
        (json!({"currency": "BTC", "amount": "1"}), "amount"),
        (json!({"currency": "BTC", "label": "x".repeat(256)}), "label"),
        (json!({"currency": "BTC", "label": "é".repeat(256)}), "label"),
        (json!({"currency": "BTC", "label": 7}), "label"),
        (json!({"currency": 7}), "currency"),
        (json!({}), "currency"),
        (json!({"label": "no currency"}), "currency"),
        (json!({"currency": ""}), "currency"),
        (json!({"currency": "x".repeat(21)}), "currency"),
        (json!({"currency": "USDT", "network": ""}), "network"),
        (json!({"currency": "USDT", "network": "n".repeat(65)}), "network"),
    ] {
        app.post("/v1/addresses", Some(&key), &body).await.assert_error(400, "validation_error", Some(field));
    }
    // Structural problems are reported together.
    let r = app.post("/v1/addresses", Some(&key), &json!({"network": "", "label": "x".repeat(300)})).await;
    r.assert_error(400, "validation_error", Some("currency"));
    r.assert_error(400, "validation_error", Some("network"));
    r.assert_error(400, "validation_error", Some("label"));

    // 255 characters is the limit (characters, not bytes).
    let a = create_address(&app, &key, json!({"currency": "BTC", "label": "é".repeat(255)})).await;
    assert_eq!(a["label"].as_str().unwrap().chars().count(), 255);
    let g = app.get(&format!("/v1/addresses/{}", id_of(&a)), Some(&key)).await;
    assert_eq!(g.data()["label"], a["label"]);

    // Bad UUIDs and query parameters.
    app.get("/v1/addresses/not-a-uuid", Some(&key)).await.assert_error(400, "validation_error", Some("address_id"));
    app.get("/v1/addresses/123/invoices", Some(&key)).await.assert_error(400, "validation_error", Some("address_id"));
    for bad in ["limit=0", "limit=101", "offset=-1", "limit=x"] {
        let field = bad.split('=').next().unwrap();
        app.get(&format!("/v1/addresses?{bad}"), Some(&key)).await.assert_error(400, "validation_error", Some(field));
        app.get(&format!("/v1/addresses/{}/invoices?{bad}", id_of(&a)), Some(&key)).await.assert_error(
            400,
            "validation_error",
            Some(field),
        );
    }
    app.get(&format!("/v1/addresses/{}/invoices?status=bogus", id_of(&a)), Some(&key)).await.assert_error(
        400,
        "validation_error",
        Some("status"),
    );
    // Only the valid request wrote anything.
    assert_eq!(total(&app.get("/v1/addresses", Some(&key)).await), 1);
    assert_eq!(static_address::Entity::find().all(&app.state.db).await.unwrap().len(), 1);
}

#[tokio::test]
async fn unknown_and_ambiguous_currencies_are_422() {
    let (app, _, key) = TestApp::with_test_key().await;
    for (body, field) in [
        (json!({"currency": "USDT"}), "network"),
        (json!({"currency": "ETH"}), "network"),
        (json!({"currency": "DOGE"}), "currency"),
        (json!({"currency": "USDT", "network": "bitcoin"}), "network"),
        (json!({"currency": "tron_usdt", "network": "ethereum"}), "network"),
    ] {
        let r = app.post("/v1/addresses", Some(&key), &body).await;
        r.assert_error(422, "unsupported_currency", Some(field));
        if body["currency"] == "USDT" && body.get("network").is_none() {
            // The message lists the networks to choose from.
            assert!(r.body["error"]["message"].as_str().unwrap().contains("tron"), "{}", r.body);
        }
    }
    assert_eq!(total(&app.get("/v1/addresses", Some(&key)).await), 0);
    // The same currencies resolve once disambiguated.
    let a = create_address(&app, &key, json!({"currency": "usdt", "network": "tron"})).await;
    assert_eq!(a["gate_id"], "tron_usdt");
}

#[tokio::test]
async fn offline_gates_are_503() {
    let (app, m, key) = TestApp::spawn_with_gates_offline().await;
    for body in [json!({"currency": "BTC"}), json!({"currency": "bitcoin", "label": "x"})] {
        let r = app.post("/v1/addresses", Some(&key), &body).await;
        r.assert_error(503, "gate_offline", None);
        assert!(r.body["error"]["message"].as_str().unwrap().contains("bitcoin"), "{}", r.body);
    }
    // Other gates stay online.
    create_address(&app, &key, json!({"currency": "SOL"})).await;
    // A live gate without operator keys is offline too, and so is one without a chain adapter
    // (bitcoin has keys here, but no live adapter: its deposits would go unseen).
    let live = app.key(m, Environment::Live, &[]).await;
    app.post("/v1/addresses", Some(&live), &json!({"currency": "SOL"})).await.assert_error(503, "gate_offline", None);
    app.post("/v1/addresses", Some(&live), &json!({"currency": "BTC"})).await.assert_error(503, "gate_offline", None);
    create_address(&app, &live, json!({"currency": "ETH", "network": "ethereum"})).await;
    assert_eq!(total(&app.get("/v1/addresses", Some(&key)).await), 1);
    assert_eq!(total(&app.get("/v1/addresses", Some(&live)).await), 1);
}

#[tokio::test]
async fn other_merchants_and_environments_get_404() {
    let (app, m, key) = TestApp::with_test_key().await;
    let (_, other) = app.test_key().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let a = create_address(&app, &key, json!({"currency": "BTC", "label": "mine"})).await;
    let id = id_of(&a);
    let mine = [format!("/v1/addresses/{id}"), format!("/v1/addresses/{id}/invoices")];
    for path in &mine {
        assert_eq!(app.get(path, Some(&key)).await.status, 200, "{path}");
        // Another merchant, and the same merchant's live key: 404, never 403.
        for k in [&other, &live] {
            let r = app.get(path, Some(k)).await;
            r.assert_error(404, "not_found", None);
            assert!(!r.body.to_string().contains(a["address"].as_str().unwrap()));
        }
    }
    let unknown = Uuid::new_v4();
    app.get(&format!("/v1/addresses/{unknown}"), Some(&key)).await.assert_error(404, "not_found", None);
    app.get(&format!("/v1/addresses/{unknown}/invoices"), Some(&key)).await.assert_error(404, "not_found", None);
    // Lists are confined the same way.
    assert_eq!(total(&app.get("/v1/addresses", Some(&key)).await), 1);
    assert_eq!(total(&app.get("/v1/addresses", Some(&other)).await), 0);
    assert_eq!(total(&app.get("/v1/addresses", Some(&live)).await), 0);
    // The live key's own address is invisible to the test key.
    let l = create_address(&app, &live, json!({"currency": "ETH", "network": "ethereum"})).await;
    assert_eq!(l["environment"], "live");
    app.get(&format!("/v1/addresses/{}", id_of(&l)), Some(&key)).await.assert_error(404, "not_found", None);
    assert_eq!(app.get(&format!("/v1/addresses/{}", id_of(&l)), Some(&live)).await.data(), &l);
}

#[tokio::test]
async fn list_pagination_and_filters() {
    let (app, _, key) = TestApp::with_test_key().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(create_address(&app, &key, json!({"currency": "BTC", "label": format!("btc {i}")})).await);
    }
    for _ in 0..3 {
        created.push(create_address(&app, &key, json!({"currency": "USDT", "network": "tron"})).await);
    }
    for _ in 0..2 {
        created.push(create_address(&app, &key, json!({"currency": "solana_usdc"})).await);
    }
    // Another merchant's addresses never count.
    let (_, other) = app.test_key().await;
    create_address(&app, &other, json!({"currency": "BTC"})).await;

    let r = app.get("/v1/addresses", Some(&key)).await;
    assert_eq!(r.status, 200);
    r.assert_page(10, 20, 0, false);
    // Newest first, and list rows equal the created objects.
    let newest_first: Vec<&Value> = created.iter().rev().collect();
    assert_eq!(r.data().as_array().unwrap().iter().collect::<Vec<_>>(), newest_first);

    let r = app.page("/v1/addresses?limit=3&offset=3", &key, [10, 3, 3], true).await;
    assert_eq!(r.data()[0]["id"], created[6]["id"]);
    let r = app.page("/v1/addresses?limit=3&offset=9", &key, [10, 3, 9], false).await;
    assert_eq!(r.data().as_array().unwrap().len(), 1);
    assert_eq!(r.data()[0]["id"], created[0]["id"]);
    let r = app.get("/v1/addresses?offset=100", Some(&key)).await;
    assert_eq!(r.data(), &json!([]));
    assert_eq!(total(&r), 10);
    // Paging by offset += limit visits every address once.
    let mut seen = HashSet::new();
    let mut offset = 0;
    loop {
        let r = app.get(&format!("/v1/addresses?limit=4&offset={offset}"), Some(&key)).await;
        for a in r.data().as_array().unwrap() {
            assert!(seen.insert(id_of(a).to_owned()));
        }
        if r.body["meta"]["pagination"]["has_more"] == false {
            break;
        }
        offset += 4;
    }
    assert_eq!(seen.len(), 10);

    for (query, expected) in [
        ("currency=BTC", 5),
        ("currency=btc", 5),
        ("currency=bitcoin", 5),
        ("currency=USDT", 3),
        ("currency=tron_usdt", 3),
        ("currency=USDC", 2),
        ("network=solana", 2),
        ("network=tron", 3),
        ("currency=USDT&network=tron", 3),
        ("currency=USDT&network=solana", 0),
        ("currency=DOGE", 0),
        ("currency=", 10),
    ] {
        let r = app.get(&format!("/v1/addresses?{query}"), Some(&key)).await;
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        assert_eq!(total(&r), expected, "{query}");
        assert_eq!(r.data().as_array().unwrap().len() as u64, expected, "{query}");
    }
    let r = app.page("/v1/addresses?currency=USDT&limit=2", &key, [3, 2, 0], true).await;
    assert!(r.data().as_array().unwrap().iter().all(|a| a["gate_id"] == "tron_usdt"));
    assert_eq!(app.get("/v1/addresses?limit=1", Some(&key)).await.data().as_array().unwrap().len(), 1);
    assert_eq!(app.get("/v1/addresses?limit=100", Some(&key)).await.status, 200);
}

#[tokio::test]
async fn address_invoices_are_listed_per_address() {
    let (app, m, key) = TestApp::with_test_key().await;
    let (_, other) = app.test_key().await;
    let live = app.key(m, Environment::Live, &[]).await;
    let a = create_address(&app, &key, json!({"currency": "BTC"})).await;
    let b = create_address(&app, &key, json!({"currency": "BTC"})).await;
    // An ordinary invoice belongs to no static address.
    let plain = app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.01"})).await;

    // Until the deposit pipeline creates invoices, the list is an empty page.
    let path_a = format!("/v1/addresses/{}/invoices", id_of(&a));
    let r = app.get(&path_a, Some(&key)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.data(), &json!([]));
    r.assert_page(0, 20, 0, false);
    app.page(&format!("{path_a}?limit=5&offset=10"), &key, [0, 5, 10], false).await;

    // Foreign and unknown addresses are 404, never an empty list.
    app.get(&path_a, Some(&other)).await.assert_error(404, "not_found", None);
    app.get(&path_a, Some(&live)).await.assert_error(404, "not_found", None);
    app.get(&format!("/v1/addresses/{}/invoices", Uuid::new_v4()), Some(&key)).await.assert_error(
        404,
        "not_found",
        None,
    );

    // Invoices linked to the address (as the deposit pipeline will link them) show up there
    // and only there.
    let linked: Vec<Value> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(app.create_invoice(&key, json!({"currency": "BTC", "amount": "0.02"})).await);
        }
        v
    };
    let a_id = Uuid::parse_str(id_of(&a)).unwrap();
    let ids: Vec<Uuid> = linked.iter().map(|i| Uuid::parse_str(id_of(i)).unwrap()).collect();
    invoice::Entity::update_many()
        .col_expr(invoice::Column::StaticAddressId, Expr::value(a_id))
        .col_expr(invoice::Column::Source, Expr::value("static_address"))
        .filter(invoice::Column::Id.is_in(ids))
        .exec(&app.state.db)
        .await
        .unwrap();
    let r = app.page(&format!("{path_a}?limit=2"), &key, [3, 2, 0], true).await;
    assert_eq!(r.data()[0]["id"], linked[2]["id"]);
    assert_eq!(r.data()[0]["static_address_id"], a["id"]);
    assert_eq!(r.data()[0]["source"], "static_address");
    let r = app.get(&format!("{path_a}?limit=2&offset=2"), Some(&key)).await;
    assert_eq!(r.data().as_array().unwrap().len(), 1);
    assert_eq!(r.data()[0]["id"], linked[0]["id"]);
    let all = app.get(&path_a, Some(&key)).await;
    assert!(all.data().as_array().unwrap().iter().all(|i| i["id"] != plain["id"]));
    assert_eq!(total(&app.get(&format!("{path_a}?status=pending"), Some(&key)).await), 3);
    assert_eq!(total(&app.get(&format!("{path_a}?status=paid"), Some(&key)).await), 0);
    assert_eq!(total(&app.get(&format!("/v1/addresses/{}/invoices", id_of(&b)), Some(&key)).await), 0);
    // Still 404 for everyone else.
    app.get(&path_a, Some(&other)).await.assert_error(404, "not_found", None);
}

#[tokio::test]
async fn openapi_documents_the_address_endpoints() {
    let app = TestApp::spawn().await;
    let doc = app.get("/openapi.json", None).await;
    assert_eq!(doc.status, 200);
    for (path, method) in [
        ("/v1/addresses", "post"),
        ("/v1/addresses", "get"),
        ("/v1/addresses/{address_id}", "get"),
        ("/v1/addresses/{address_id}/invoices", "get"),
    ] {
        assert!(doc.body["paths"][path][method].is_object(), "{method} {path} not documented");
    }
    let created = &doc.body["paths"]["/v1/addresses"]["post"]["responses"];
    assert!(created.get("200").is_some() && created.get("201").is_none(), "{created}");
    let schema = &doc.body["components"]["schemas"]["StaticAddressResponse"]["properties"];
    for f in STATIC_ADDRESS_FIELDS {
        assert!(schema.get(f).is_some(), "{f} missing from the schema");
    }
}

/// Live deposit safety: `total_received` is updated under the address row's lock. 50 deposits to
/// one static address (each its own invoice, so no invoice lock serializes them), confirmed by
/// 50 concurrent trackers: the total is exact (on PostgreSQL a read-modify-write without the
/// lock lost updates).
#[tokio::test]
async fn concurrent_confirmations_to_one_static_address_add_up_exactly() {
    use workers::chain::Chains;
    use workers::{scanner, tracker};
    let app = TestApp::spawn_with(|c| c.sandbox.block_interval_ms = 0).await;
    let (_, key) = app.test_key().await;
    let a = create_address(&app, &key, json!({"currency": "USDT", "network": "tron"})).await;
    for i in 0..50 {
        let body = json!({"address_id": id_of(&a), "amount": format!("1.0{:02}", i)});
        let r = app.post("/v1/test/deposits", Some(&key), &body).await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let r = app.post("/v1/test/blocks", Some(&key), &json!({"currency": "tron_usdt", "count": 19})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let db = app.state.db.clone();
    let chains = Chains::new(&db, &app.state.config.sandbox);
    let chain = chains.get(Environment::Test, "tron_usdt").unwrap();
    let mut recorded = Vec::new();
    while let Some(r) = scanner::scan_gate(&db, chain.as_ref(), Environment::Test, 500).await.unwrap() {
        recorded.extend(r.recorded);
    }
    assert_eq!(recorded.len(), 50);
    let cfg = app.state.config.pipeline.clone();
    let mut set = tokio::task::JoinSet::new();
    for id in recorded {
        let (db, chains, cfg) = (db.clone(), chains.clone(), cfg.clone());
        set.spawn(async move { tracker::track_payment(&db, &chains, &cfg, id).await.unwrap() });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    // 50 × 1 + (0 + 1 + … + 49) / 1000 = 51.225
    let expected: rust_decimal::Decimal = "51.225".parse().unwrap();
    let confirmed = entity::payment::Entity::find()
        .filter(entity::payment::Column::Status.eq(entity::PaymentStatus::Confirmed))
        .all(&db)
        .await
        .unwrap();
    assert_eq!(confirmed.len(), 50);
    assert_eq!(confirmed.iter().map(|p| p.amount.0).sum::<rust_decimal::Decimal>(), expected);
    let row = static_address::Entity::find_by_id(Uuid::parse_str(id_of(&a)).unwrap()).one(&db).await.unwrap().unwrap();
    assert_eq!(row.total_received.0, expected);
    assert_eq!(row.invoice_count, 50);
    let r = app.get(&format!("/v1/addresses/{}", id_of(&a)), Some(&key)).await;
    assert_eq!(r.data()["total_received"], "51.225");
}
