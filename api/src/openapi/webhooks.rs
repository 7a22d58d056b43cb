//! The webhooks a merchant's endpoint receives, as OpenAPI 3.1 `webhooks`: one entry per event
//! type with the exact body (`event`, `created_at`, `data`, and `event_id` on
//! `balance.credited`), the signature and delivery headers, and what the endpoint answers. The
//! `data` schemas describe what `domain::events` writes; the tests below build real payloads
//! with those functions and check them against these schemas key by key.

use serde_json::{Map, Value, json};

use domain::events::{EventKind, Subject};
use domain::webhooks::{DELIVERY_HEADER, EVENT_HEADER, signature};

fn s(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn s_or_null(description: &str) -> Value {
    json!({"type": ["string", "null"], "description": description})
}

fn uuid(description: &str) -> Value {
    json!({"type": "string", "format": "uuid", "description": description})
}

fn object(description: &str, required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "description": description, "required": required, "properties": properties})
}

/// A reference to the component schema `name` (a named enum generators turn into one type).
fn named(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// `data` of each kind of event, by schema name, and the enums they name (`CreditOutcome`).
pub fn data_schemas() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "CreditOutcome".into(),
        json!({
            "type": "string",
            "description": "Where a payment was credited: in the paid asset, or converted into the invoice's settlement target.",
            "enum": ["source_credited", "target_credited"]
        }),
    );
    m.insert(
        "InvoiceEventData".into(),
        object(
            "The invoice as it is after the change, with the payment that caused it (`payment_id`, \
             `tx_hash`, `payment_amount`) where one did, else its `activation_count`.",
            &["invoice_id", "external_id", "currency", "network", "environment", "amount_requested", "amount_paid", "status"],
            json!({
                "invoice_id": uuid("The invoice"),
                "external_id": s_or_null("The merchant's own reference"),
                "currency": s_or_null("Asset code; null on a draft the payer has not activated"),
                "network": s_or_null("Network; null on an unactivated draft"),
                "environment": named("Environment"),
                "amount_requested": s_or_null("Decimal string; null on an unactivated draft"),
                "amount_paid": s("Decimal string: confirmed payments so far"),
                "status": named("InvoiceStatus"),
                "payment_id": uuid("The payment that caused the event"),
                "tx_hash": s("Its transaction"),
                "payment_amount": s("Decimal string: its amount"),
                "activation_count": {"type": "integer", "description": "Events without a payment: which activation of a draft"},
                "paid_at": {"type": "string", "format": "date-time", "description": "When the invoice was paid, once it was"}
            }),
        ),
    );
    m.insert(
        "PayoutEventData".into(),
        object(
            "The payout as it is after the change.",
            &[
                "payout_id",
                "environment",
                "status",
                "currency",
                "network",
                "amount",
                "recipient_amount",
                "merchant_debit_amount",
                "fee_amount",
                "network_fee",
                "destination",
                "destination_tag",
                "tx_hash",
                "failure_reason",
                "completed_at",
            ],
            json!({
                "payout_id": uuid("The payout"),
                "environment": named("Environment"),
                "status": named("PayoutStatus"),
                "currency": s("Asset code"),
                "network": s("Network"),
                "amount": s("Decimal string"),
                "recipient_amount": s("Decimal string: what the destination receives"),
                "merchant_debit_amount": s("Decimal string: what the balance paid"),
                "fee_amount": s("Decimal string"),
                "network_fee": s("Decimal string: the estimate, then the actual on-chain fee"),
                "destination": s("Address"),
                "destination_tag": s_or_null("XRP destination tag"),
                "tx_hash": s_or_null("Its transaction, once broadcast"),
                "failure_reason": s_or_null("Why it failed"),
                "completed_at": {"type": ["string", "null"], "format": "date-time"}
            }),
        ),
    );
    m.insert(
        "BalanceCreditedData".into(),
        object(
            "A payment credited to the balance: in the paid asset (`source_credited`) or, for an invoice \
             settled into another asset, in that asset (`target_credited`).",
            &[
                "invoice_id", "payment_id", "external_id", "outcome", "failure_class", "source_amount", "source_currency",
                "source_network", "credited_amount", "credited_currency", "credited_network",
            ],
            json!({
                "invoice_id": uuid("The invoice"),
                "payment_id": uuid("The credited payment"),
                "external_id": s_or_null("The merchant's own reference"),
                "outcome": named("CreditOutcome"),
                "failure_class": s_or_null("`not_required` for passthrough; why a conversion did not happen; null when it did"),
                "source_amount": s("Decimal string: the payment"),
                "source_currency": s_or_null("Asset code paid"),
                "source_network": s_or_null("Network paid on"),
                "credited_amount": s("Decimal string: what the balance got"),
                "credited_currency": s("Asset code credited"),
                "credited_network": s("Network of the credited asset")
            }),
        ),
    );
    m.insert(
        "TestEventData".into(),
        object(
            "Sent by `ops webhooks test`: verify the signature, then answer 2xx.",
            &["message", "environment", "test_id"],
            json!({
                "message": s("Human-readable text"),
                "environment": named("Environment"),
                "test_id": uuid("This test")
            }),
        ),
    );
    m
}

/// The `data` schema name of an event type.
pub fn data_schema_of(kind: EventKind) -> &'static str {
    match kind.subject() {
        Subject::Credit => "BalanceCreditedData",
        Subject::Payout => "PayoutEventData",
        Subject::Test => "TestEventData",
        Subject::Invoice => "InvoiceEventData",
    }
}

/// Adds `webhooks` (one per event type) and the `data` schemas to `doc`.
pub fn add(doc: &mut Value) {
    let mut hooks = Map::new();
    for kind in EventKind::ALL {
        let event_type = kind.as_str();
        let schema_name = data_schema_of(kind);
        let mut required = vec!["event", "created_at", "data"];
        let mut properties = json!({
            "event": {"type": "string", "const": event_type},
            "created_at": {"type": "string", "format": "date-time", "description": "When the event happened (UTC, milliseconds)"},
            "data": {"$ref": format!("#/components/schemas/{schema_name}")}
        });
        if kind == EventKind::BalanceCredited {
            required.insert(0, "event_id");
            properties["event_id"] = uuid("The event (as in `GET /v1/events/{id}`): credit each id once");
        }
        hooks.insert(
            event_type.to_owned(),
            json!({"post": {
                "summary": format!("`{event_type}`: {}", kind.description()),
                "description": "POSTed to the merchant's endpoint for its environment. Verify `X-Service-Signature` \
                    (`t=<unix>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">`, one `v1` per secret during a rotation; \
                    reject a `t` more than 300 s away) before trusting the body. Delivery is at least once: \
                    de-duplicate on the delivery id. Deliveries about one invoice or payout arrive in the order \
                    their events happened.",
                "parameters": [
                    {"name": signature::HEADER, "in": "header", "required": true, "schema": {"type": "string"},
                     "description": "t=<unix seconds>,v1=<hex>"},
                    {"name": DELIVERY_HEADER, "in": "header", "required": true, "schema": {"type": "string", "format": "uuid"},
                     "description": "The delivery: the same on every retry of it"},
                    {"name": EVENT_HEADER, "in": "header", "required": true, "schema": {"type": "string", "const": event_type},
                     "description": "The event type"}
                ],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": required, "properties": properties
                }}}},
                "responses": {
                    "2XX": {"description": "Received: the delivery is done"},
                    "default": {"description": "Anything else (or no answer within the timeout) is retried on the schedule; `429`/`503` with `Retry-After` postpone the next attempt"}
                }
            }}),
        );
    }
    doc["webhooks"] = Value::Object(hooks);
    let schemas = doc["components"]["schemas"].as_object_mut().expect("components.schemas");
    schemas.extend(data_schemas());
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use entity::{Amount, Environment, invoice, payment, payout};
    use uuid::Uuid;

    /// Every key `data` holds is a property of its schema, every required one is there, and
    /// each value has the declared JSON type.
    fn conforms(schema_name: &str, data: &Value) {
        let doc = crate::openapi::document();
        let schemas = &doc["components"]["schemas"];
        let schema = &schemas[schema_name];
        let resolved: Map<String, Value> = schema["properties"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, p)| {
                let p = match p["$ref"].as_str() {
                    Some(r) => schemas[r.trim_start_matches("#/components/schemas/")].clone(),
                    None => p.clone(),
                };
                (k.clone(), p)
            })
            .collect();
        let props = &resolved;
        let obj = data.as_object().unwrap();
        for k in obj.keys() {
            assert!(props.contains_key(k), "{schema_name}: `{k}` is not in the schema");
        }
        for r in schema["required"].as_array().unwrap() {
            assert!(obj.contains_key(r.as_str().unwrap()), "{schema_name}: required `{r}` missing");
        }
        for (k, v) in obj {
            let types: Vec<&str> = match &props[k]["type"] {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                _ => unreachable!(),
            };
            let t = match v {
                Value::Null => "null",
                Value::String(_) => "string",
                Value::Number(_) => "integer",
                Value::Bool(_) => "boolean",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            assert!(types.contains(&t), "{schema_name}.{k}: {v} is not {types:?}");
            if let Some(e) = props[k].get("enum") {
                assert!(e.as_array().unwrap().contains(v), "{schema_name}.{k}: {v} not in {e}");
            }
        }
    }

    fn invoice() -> invoice::Model {
        let mut inv = invoice::Model::blank(Uuid::now_v7(), Uuid::now_v7(), Environment::Test, Utc::now());
        inv.currency = Some("BTC".into());
        inv.network = Some("bitcoin".into());
        inv.amount_requested = Some(Amount("0.01".parse().unwrap()));
        inv
    }

    #[test]
    fn invoice_payout_and_test_payloads_match_their_schemas() {
        let inv = invoice();
        conforms("InvoiceEventData", &domain::events::invoice_data(&inv, None));
        let p = payment::Model::detected(
            inv.id,
            Environment::Test,
            "bitcoin".into(),
            "ab".repeat(32),
            0,
            Amount("0.01".parse().unwrap()),
            Utc::now(),
        );
        let mut paid = inv.clone();
        paid.paid_at = Some(Utc::now());
        conforms("InvoiceEventData", &domain::events::invoice_data(&paid, Some(&p)));
        for (outcome, failure_class, gate) in
            [("source_credited", Some("not_required"), "bitcoin"), ("target_credited", None, "tron_usdt")]
        {
            let credited_gate = domain::gates::find(gate).unwrap();
            let credit =
                domain::events::Credit { outcome, failure_class, credited_gate, credited_amount: "5".parse().unwrap() };
            conforms("BalanceCreditedData", &domain::events::balance_credited_data(&paid, &p, credit));
        }
        conforms("TestEventData", &domain::webhooks::admin::test_data(Environment::Test, Uuid::now_v7()));
        let po = payout::Model::blank(Uuid::now_v7(), Uuid::now_v7(), Environment::Live, Utc::now());
        conforms("PayoutEventData", &domain::events::payout_data(&po));
    }

    #[test]
    fn every_event_type_has_a_webhook_with_its_data_schema() {
        let mut doc = json!({"components": {"schemas": {}}});
        add(&mut doc);
        for k in EventKind::ALL.map(EventKind::as_str) {
            let body = &doc["webhooks"][k]["post"]["requestBody"]["content"]["application/json"]["schema"];
            assert_eq!(body["properties"]["event"]["const"], k);
            let r = body["properties"]["data"]["$ref"].as_str().unwrap();
            assert!(doc["components"]["schemas"].get(r.trim_start_matches("#/components/schemas/")).is_some());
        }
        let credited =
            &doc["webhooks"]["balance.credited"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert!(credited["required"].as_array().unwrap().contains(&"event_id".into()));
    }
}
