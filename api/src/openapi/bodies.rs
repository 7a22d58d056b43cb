//! What the request schemas derived from the Rust types cannot say, written into the document
//! from the same rules the server applies, in the shapes client generators handle (plain object
//! bodies, named enums, nullable fields as type arrays or `anyOf [.., null]`):
//!
//! - the fields a create request requires are required and not `null` (the Rust fields are
//!   `Option`s only so that a missing one is reported by name with the others);
//! - `currency` is one of the `Currency` codes (gate ids, and asset codes without a twin that
//!   differs only by case), `network` one of the `Network`s;
//! - decimal amounts, lengths, the `Idempotency-Key` header's characters;
//! - no string may hold U+0000 (neither database stores it): free-text fields, query values, and
//!   the keys and string values of `metadata`.
//!
//! The rules that span fields (which currency/network pairs resolve, a crypto or a fiat amount,
//! `currency` left out only by a fiat-priced draft, exactly one of `invoice_id` and
//! `address_id`) are stated in the bodies' descriptions and enforced by the server, not written
//! as schema compositions over the body: generated clients cannot build a body typed as an
//! intersection of alternatives. Schemathesis covers those operations through the documented
//! exceptions in `.ci/schemathesis.toml`.

use serde_json::{Map, Value, json};

/// A string without U+0000.
const NO_NUL: &str = "^[^\\u0000]*$";
/// A decimal string greater than zero: digits, an optional fraction, some digit not zero.
pub const POSITIVE_DECIMAL: &str = "^([0-9]*[1-9][0-9]*(\\.[0-9]+)?|[0-9]+\\.[0-9]*[1-9][0-9]*)$";
/// `Idempotency-Key`: visible ASCII, no surrounding blanks (HTTP trims them).
const HEADER_TOKEN: &str = "^[!-~]([\\t -~]*[!-~])?$";

/// Every currency code a request may name: the gate ids, then the asset codes that are not a gate
/// id in another case (asset codes are case-insensitive, so `XRP` is the gate `xrp`). With
/// `alone`, only the codes that resolve without a network.
pub fn currency_codes(alone: bool) -> Vec<String> {
    let gates = domain::gates::GATES.iter();
    let mut codes: Vec<String> = gates.clone().map(|g| g.id.to_owned()).collect();
    for g in gates {
        let twin = codes.iter().any(|c| c.eq_ignore_ascii_case(g.asset));
        if !twin && (!alone || domain::gates::resolve(g.asset, None).is_ok()) {
            codes.push(g.asset.to_owned());
        }
    }
    codes
}

/// Every network, once.
fn networks() -> Vec<&'static str> {
    let mut networks: Vec<&'static str> = Vec::new();
    for g in domain::gates::GATES.iter() {
        if !networks.contains(&g.network) {
            networks.push(g.network);
        }
    }
    networks
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

/// Appends the rules that span fields to the description of schema `name`.
fn describe(schemas: &mut Map<String, Value>, name: &str, rules: &str) {
    let s = &mut schemas[name];
    let derived = s.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
    s["description"] = json!(if derived.is_empty() { rules.to_owned() } else { format!("{derived}\n\n{rules}") });
}

/// Which `currency`/`network` pairs resolve, in words.
const PAIRING: &str = "`currency` is a gate id (`tron_usdt`) or an asset code (`USDT`, case-insensitive). \
An asset on several networks needs `network` (`USDT` with `tron`); a gate id or an asset on one \
network needs none, and a `network` given with it must be the gate's own. A pair that does not \
resolve is refused with `validation_error` (400) or `unsupported_currency` (422), naming the field.";

/// The request bodies, `Idempotency-Key` and free-text query values (module docs).
pub fn constrain(doc: &mut Value) {
    let currency = json!({"$ref": "#/components/schemas/Currency"});
    let network = json!({"$ref": "#/components/schemas/Network"});
    let amount = json!({"type": "string", "pattern": POSITIVE_DECIMAL, "maxLength": 50});
    let metadata = json!({"$ref": "#/components/schemas/Metadata"});
    let key = json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": NO_NUL});
    let destination = json!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_NUL});

    let schemas = doc["components"]["schemas"].as_object_mut().expect("components.schemas");
    schemas.insert(
        "Currency".into(),
        json!({
            "type": "string",
            "description": format!("A gate id, or an asset code (case-insensitive; `xrp` is both). {PAIRING}"),
            "enum": currency_codes(false)
        }),
    );
    schemas.insert(
        "Network".into(),
        json!({"type": "string", "description": "The network of a gate (`GET /v1/currencies`).", "enum": networks()}),
    );
    schemas.insert(
        "SettlementAsset".into(),
        json!({
            "type": "string",
            "description": "`passthrough` (credit what was paid) or the gate id to convert each payment into.",
            "enum": settlement_assets()
        }),
    );
    schemas.insert(
        "Metadata".into(),
        json!({
            "type": "object",
            "description": "The merchant's own key/value data, at most 50 properties; returned exactly as given. Values are any JSON (strings, numbers, booleans, null, arrays, objects). No key or string may contain U+0000.",
            "maxProperties": 50,
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"}
        }),
    );
    schemas.insert(
        "MetadataValue".into(),
        json!({
            "description": "One value of `metadata`: any JSON value.",
            "anyOf": [
                {"type": "string", "pattern": NO_NUL},
                {"type": "number"},
                {"type": "boolean"},
                {"type": "array", "items": {}},
                {"$ref": "#/components/schemas/MetadataObject"},
                {"type": "null"}
            ]
        }),
    );
    schemas.insert(
        "MetadataObject".into(),
        json!({"type": "object", "description": "An object nested in `metadata`: any JSON.", "additionalProperties": {}}),
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
            ("target_settlement_asset", json!({"$ref": "#/components/schemas/SettlementAsset"})),
            ("settlement_target_currency", currency.clone()),
            ("settlement_target_network", network.clone()),
        ],
    );
    describe(
        schemas,
        "CreateInvoiceRequest",
        &format!(
            "Rules across fields, enforced by the server (400 `validation_error` naming the field): \
             give either `amount` (crypto) or `amount_fiat` with `fiat_currency`, not both; \
             `currency` is required unless the invoice is a fiat-priced draft (`is_deferred: true` \
             with `amount_fiat`), whose payer picks the gate on the checkout page; \
             `draft_expires_at` only on a draft. {PAIRING}"
        ),
    );
    for name in ["CreateStaticAddressRequest", "CreatePayoutRequest", "CreateRefundRequest", "MineRequest"] {
        describe(schemas, name, PAIRING);
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
    describe(
        schemas,
        "SimulateDepositRequest",
        "Give exactly one of `invoice_id` and `address_id` (400 `validation_error` otherwise).",
    );

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
