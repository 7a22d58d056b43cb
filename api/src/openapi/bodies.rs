//! What the request schemas derived from the Rust types cannot say, written into the document
//! from the same rules the server applies, so a client (or a generator such as schemathesis)
//! built from the document sends what the server accepts:
//!
//! - the fields a create request requires are required and not `null` (the Rust fields are
//!   `Option`s only so that a missing one is reported by name with the others);
//! - `currency` and `network` are the gates' codes, and only in pairs `gates::resolve` accepts
//!   (an asset on several networks needs its `network`);
//! - decimal amounts, lengths, the `Idempotency-Key` header's characters, and "exactly one of
//!   `invoice_id` and `address_id`";
//! - no string anywhere may hold U+0000 (neither database stores it): free-text fields, query
//!   values and every string and key inside `metadata` (the `Metadata` schema).

use serde_json::{Map, Value, json};

/// A string without U+0000.
const NO_NUL: &str = "^[^\\u0000]*$";
/// A decimal string greater than zero: digits, an optional fraction, some digit not zero.
pub const POSITIVE_DECIMAL: &str = "^([0-9]*[1-9][0-9]*(\\.[0-9]+)?|[0-9]+\\.[0-9]*[1-9][0-9]*)$";
/// `Idempotency-Key`: visible ASCII, no surrounding blanks (HTTP trims them).
const HEADER_TOKEN: &str = "^[!-~]([\\t -~]*[!-~])?$";

/// Every currency code the server resolves (gate ids, and assets that exist on one network)
/// paired with no network, and every (currency, network) pair it resolves.
fn currency_network_pairs() -> Vec<Value> {
    let gates = domain::gates::GATES.iter();
    let mut alone: Vec<&str> = gates.clone().map(|g| g.id).collect();
    for g in gates.clone() {
        if domain::gates::resolve(g.asset, None).is_ok() && !alone.contains(&g.asset) {
            alone.push(g.asset);
        }
    }
    let mut pairs = vec![json!({
        "properties": {"currency": {"enum": alone}, "network": {"type": "null"}}
    })];
    for g in gates {
        let codes: Vec<&str> = if g.id == g.asset { vec![g.id] } else { vec![g.id, g.asset] };
        pairs.push(json!({
            "required": ["network"],
            "properties": {"currency": {"enum": codes}, "network": {"const": g.network}}
        }));
    }
    pairs
}

/// Every code `currency` may hold, and every network.
fn codes() -> (Vec<String>, Vec<String>) {
    let mut currencies: Vec<String> = Vec::new();
    let mut networks: Vec<String> = Vec::new();
    for g in domain::gates::GATES.iter() {
        for c in [g.id, g.asset] {
            if !currencies.iter().any(|x| x == c) {
                currencies.push(c.to_owned());
            }
        }
        if !networks.iter().any(|x| x == g.network) {
            networks.push(g.network.to_owned());
        }
    }
    (currencies, networks)
}

/// `target_settlement_asset`: `passthrough` or a gate id to convert into.
fn settlement_assets() -> Vec<&'static str> {
    std::iter::once("passthrough").chain(domain::gates::GATES.iter().map(|g| g.id)).collect()
}

fn string(max: Option<u64>) -> Value {
    let mut s = json!({"type": "string", "pattern": NO_NUL});
    if let Some(m) = max {
        s["maxLength"] = json!(m);
    }
    s
}

fn nullable(mut s: Value) -> Value {
    if s.get("$ref").is_some() {
        return json!({"anyOf": [s, {"type": "null"}]});
    }
    s["type"] = json!([s["type"].clone(), "null"]);
    if let Some(values) = s.get_mut("enum").and_then(Value::as_array_mut) {
        values.push(Value::Null);
    }
    s
}

/// Sets `props[name]` to `schema`, keeping the derived description.
fn set(props: &mut Map<String, Value>, name: &str, mut schema: Value) {
    if let Some(d) = props.get(name).and_then(|p| p.get("description")).cloned() {
        schema["description"] = d;
    }
    props.insert(name.to_owned(), schema);
}

/// Makes the request schema `name` say what the server accepts (module docs).
fn constrain_schema(schemas: &mut Map<String, Value>, name: &str, required: &[&str], fields: &[(&str, Value)]) {
    let Some(Value::Object(s)) = schemas.get_mut(name) else { panic!("no request schema {name}") };
    let Some(Value::Object(props)) = s.get_mut("properties") else { panic!("{name} has no properties") };
    for (field, schema) in fields {
        assert!(props.contains_key(*field), "{name} has no field {field}");
        let schema = if required.contains(field) { schema.clone() } else { nullable(schema.clone()) };
        set(props, field, schema);
    }
    if !required.is_empty() {
        s.insert("required".into(), json!(required));
    }
}

/// The request bodies, `Idempotency-Key` and free-text query values (module docs).
pub fn constrain(doc: &mut Value) {
    let (currencies, networks) = codes();
    let currency = json!({"type": "string", "enum": currencies});
    let network = json!({"type": "string", "enum": networks});
    let amount = json!({"type": "string", "pattern": POSITIVE_DECIMAL, "maxLength": 50});
    let metadata = json!({"$ref": "#/components/schemas/Metadata"});
    let key = json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": NO_NUL});
    let destination = json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_NUL});
    let pairs = currency_network_pairs();

    let schemas = doc["components"]["schemas"].as_object_mut().expect("components.schemas");
    schemas.insert(
        "Metadata".into(),
        json!({
            "type": "object",
            "description": "The merchant's own key/value data, at most 50 properties; returned as given. No string or key may contain U+0000.",
            "maxProperties": 50,
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"}
        }),
    );
    schemas.insert(
        "MetadataValue".into(),
        json!({"anyOf": [
            {"type": "string", "pattern": NO_NUL},
            {"type": ["number", "boolean", "null"]},
            {"type": "array", "items": {"$ref": "#/components/schemas/MetadataValue"}},
            {"type": "object", "propertyNames": {"pattern": NO_NUL},
             "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"}}
        ]}),
    );
    constrain_schema(
        schemas,
        "CreateStaticAddressRequest",
        &["currency"],
        &[("currency", currency.clone()), ("network", network.clone()), ("label", string(Some(255)))],
    );
    let payout_fields = [
        ("currency", currency.clone()),
        ("network", network.clone()),
        ("amount", amount.clone()),
        ("destination", destination),
        ("destination_tag", string(Some(256))),
        ("description", string(Some(1000))),
        ("metadata", metadata.clone()),
    ];
    let mut payout = payout_fields.to_vec();
    payout.push(("idempotency_key", key.clone()));
    constrain_schema(schemas, "CreatePayoutRequest", &["currency", "amount", "destination"], &payout);
    let mut refund = payout_fields.to_vec();
    refund.push(("invoice_id", json!({"type": "string", "format": "uuid"})));
    constrain_schema(schemas, "CreateRefundRequest", &["invoice_id", "currency", "amount", "destination"], &refund);
    constrain_schema(
        schemas,
        "MineRequest",
        &["currency", "count"],
        &[
            ("currency", currency.clone()),
            ("network", network.clone()),
            ("count", json!({"type": "integer", "minimum": 1, "maximum": 1000})),
        ],
    );
    constrain_schema(
        schemas,
        "CreateInvoiceRequest",
        &[],
        &[
            ("currency", currency.clone()),
            ("network", network.clone()),
            ("amount", amount.clone()),
            ("amount_fiat", amount.clone()),
            ("fiat_currency", json!({"type": "string", "pattern": "^[A-Z]{3}$"})),
            ("description", string(Some(1000))),
            ("external_id", json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": NO_NUL})),
            ("idempotency_key", key.clone()),
            ("metadata", metadata.clone()),
            ("target_settlement_asset", json!({"type": "string", "enum": settlement_assets()})),
            ("settlement_target_currency", currency.clone()),
            ("settlement_target_network", network.clone()),
        ],
    );
    // A crypto amount, or a fiat amount with its currency; `currency` may be left out only by a
    // fiat-priced draft; `draft_expires_at` only on a draft.
    schemas["CreateInvoiceRequest"]["allOf"] = json!([
        {"oneOf": [
            {"required": ["amount"], "properties": {"amount": {"type": "string"},
                "amount_fiat": {"type": "null"}, "fiat_currency": {"type": "null"}}},
            {"required": ["amount_fiat", "fiat_currency"], "properties": {"amount": {"type": "null"},
                "amount_fiat": {"type": "string"}, "fiat_currency": {"type": "string"}}}
        ]},
        {"anyOf": [
            {"required": ["currency"], "properties": {"currency": {"type": "string"}}},
            {"required": ["is_deferred", "amount_fiat"], "properties": {"is_deferred": {"const": true}}}
        ]},
        {"anyOf": [
            {"properties": {"draft_expires_at": {"type": "null"}}},
            {"required": ["is_deferred"], "properties": {"is_deferred": {"const": true}}}
        ]},
        {"anyOf": pairs.clone()}
    ]);
    for name in ["CreateStaticAddressRequest", "CreatePayoutRequest", "CreateRefundRequest", "MineRequest"] {
        schemas[name]["anyOf"] = json!(pairs);
    }
    constrain_schema(
        schemas,
        "SimulateDepositRequest",
        &["amount"],
        &[
            ("amount", amount.clone()),
            ("tx_hash", json!({"type": "string", "minLength": 1, "maxLength": 128, "pattern": NO_NUL})),
        ],
    );
    schemas["SimulateDepositRequest"]["oneOf"] = json!([
        {"required": ["invoice_id"], "properties": {"invoice_id": {"type": "string"}, "address_id": {"type": "null"}}},
        {"required": ["address_id"], "properties": {"address_id": {"type": "string"}, "invoice_id": {"type": "null"}}}
    ]);

    for item in doc["paths"].as_object_mut().expect("paths").values_mut() {
        for op in item.as_object_mut().into_iter().flat_map(|i| i.values_mut()) {
            for p in op.get_mut("parameters").and_then(Value::as_array_mut).into_iter().flatten() {
                let name = p["name"].as_str().unwrap_or_default().to_owned();
                let in_query = p["in"] == "query";
                let s = &mut p["schema"];
                if name == "Idempotency-Key" {
                    *s = json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": HEADER_TOKEN});
                } else if in_query
                    && s["type"] == "string"
                    && s.get("enum").is_none()
                    && s.get("format").is_none()
                    && s.get("pattern").is_none()
                {
                    s["pattern"] = json!(NO_NUL);
                }
            }
        }
    }
}
