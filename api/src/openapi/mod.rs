//! The OpenAPI document: the paths are those the router serves (`routes::documented_routes`, each
//! declared once by its handler's `#[utoipa::path]`), and this module puts them under the
//! document's info and tags, with the API key scheme and the responses every operation can give.

mod bodies;
mod shapes;
mod webhooks;

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi};

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .add_security_scheme("api_key", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))));
    }
}

/// Adds 429 `rate_limited` (with `Retry-After` and the `RateLimit-*` headers), 500
/// `internal_error` and 504 `request_timeout` to every operation: any request can be throttled,
/// meet a server fault or outlast `[server] request_timeout_ms`.
struct CommonResponses;

/// What an error status means on any operation, for the responses that say nothing more
/// (OpenAPI requires every response to have a description).
fn refusal(status: &str) -> &'static str {
    match status {
        "400" => "validation_error: the request is malformed; `error.details` names each field at fault",
        "401" => "unauthorized: the API key is missing, malformed, unknown or revoked",
        "403" => "forbidden: the key lacks the permission this operation needs",
        "404" => "not_found: no such resource for the key's merchant and environment",
        "409" => "The resource's state does not allow this now (`error.code` says why)",
        "422" => "Well-formed, but refused by a business rule (`error.code` says which)",
        "503" => "A gate or the rates cannot serve this now (`error.code` says which); retry later",
        _ => "See `error.code`",
    }
}

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::header::HeaderBuilder;
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let envelope = || ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorEnvelope"))).build();
        let integer = |description: &str| {
            HeaderBuilder::new()
                .schema(Some(ObjectBuilder::new().schema_type(Type::Integer).build()))
                .description(Some(description))
                .build()
        };
        let throttled = ResponseBuilder::new()
            .description("rate_limited: too many requests for this key, client IP or test merchant")
            .content("application/json", envelope())
            .header("Retry-After", integer("Seconds until a request is allowed again"))
            .header("RateLimit-Limit", integer("Requests allowed per window"))
            .header("RateLimit-Remaining", integer("Requests left now"))
            .header("RateLimit-Reset", integer("Seconds until the full limit is available again"))
            .build();
        let internal = ResponseBuilder::new()
            .description("internal_error: quote meta.request_id to support")
            .content("application/json", envelope())
            .build();
        let timeout = ResponseBuilder::new()
            .description("request_timeout: no response within the server's request timeout; a retry with the same idempotency key is safe")
            .content("application/json", envelope())
            .build();
        for item in openapi.paths.paths.values_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.options,
                &mut item.head,
                &mut item.patch,
                &mut item.trace,
            ];
            for op in ops.into_iter().flatten() {
                for (status, response) in op.responses.responses.iter_mut() {
                    if let RefOr::T(response) = response
                        && response.description.is_empty()
                    {
                        response.description = refusal(status).to_owned();
                    }
                }
                let r = &mut op.responses.responses;
                r.entry("429".into()).or_insert_with(|| RefOr::T(throttled.clone()));
                r.entry("500".into()).or_insert_with(|| RefOr::T(internal.clone()));
                r.entry("504".into()).or_insert_with(|| RefOr::T(timeout.clone()));
            }
        }
    }
}

/// The parameters whose values are lists the code knows at run time, written into the document
/// from the same lists the server checks against: an event `type` (`events::EventKind::ALL`)
/// and a ledger's `{currency}` (every gate id and every asset code on one network only, as
/// `gates::resolve` accepts them, without case-only twins).
struct KnownValues;

impl Modify for KnownValues {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
        let one_of = |values: Vec<String>| {
            RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values)).build()))
        };
        let kinds: Vec<String> = domain::events::EventKind::ALL.iter().map(|k| k.as_str().to_owned()).collect();
        let currencies = bodies::currency_codes(true);
        for (path, name, values) in [
            ("/v1/events", "type", kinds.clone()),
            ("/v1/webhook_deliveries", "type", kinds),
            ("/v1/balances/{currency}/ledger", "currency", currencies),
        ] {
            let params =
                openapi.paths.paths.get_mut(path).and_then(|i| i.get.as_mut()).and_then(|o| o.parameters.as_mut());
            for p in params.into_iter().flatten() {
                if let RefOr::T(p) = p
                    && p.name == name
                {
                    p.schema = Some(one_of(values.clone()));
                }
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Paygate merchant API", version = "1.0.0",
        description = "Self-hosted crypto payments: invoices, balances, payouts, refunds, static addresses, webhooks. The environment (test/live) is chosen by the API key."),
    // The enums query parameters refer to by name (`status`, `environment`).
    components(schemas(crate::error::ErrorEnvelope, crate::error::ErrorCode, crate::envelope::Pagination,
        entity::InvoiceStatus, entity::PayoutStatus, entity::RefundStatus, entity::Environment,
        domain::exports::ExportKind)),
    tags(
        (name = "invoices"),
        (name = "balances"),
        (name = "payouts"),
        (name = "refunds", description = "Refunds of invoices' credited payments, carried out by linked payouts"),
        (name = "addresses", description = "Static deposit addresses"),
        (name = "events", description = "The event log: past events with the bodies their webhooks carry (permission events:read)"),
        (name = "settings", description = "The merchant's invoice defaults (permissions settings:read, settings:write)"),
        (name = "webhooks", description = "The merchant's webhook delivery log and redelivery (permissions webhooks:read, webhooks:write)"),
        (name = "exports", description = "Accounting exports as CSV, streamed (permission exports:read)"),
        (name = "api keys", description = "The merchant's API keys in the key's environment (permissions keys:read, keys:write): a key never grants more than it holds"),
        (name = "test helpers", description = "Sandbox deposits, reversals and blocks. Test keys only: 404 with a live key"),
        (name = "public", description = "No API key needed")
    )
)]
struct Root;

/// The whole document, served at `/openapi.json`: [`document_of`] the router's paths.
pub fn document() -> serde_json::Value {
    document_of(crate::routes::documented_routes().into_openapi())
}

/// The document for `paths` (what `routes::documented_routes` collected: operations and the schemas
/// they name): the derived root with them merged in, with what the types cannot say written in
/// by [`bodies::constrain`] (JSON Schema that utoipa's model does not hold) and the response
/// shapes generators take best ([`shapes::plain`]).
pub fn document_of(paths: utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut doc = Root::openapi();
    doc.merge(paths);
    SecurityAddon.modify(&mut doc);
    CommonResponses.modify(&mut doc);
    KnownValues.modify(&mut doc);
    let mut v = serde_json::to_value(&doc).expect("the document serialises");
    bodies::constrain(&mut v);
    shapes::plain(&mut v);
    webhooks::add(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    fn doc() -> Value {
        super::document()
    }

    #[test]
    fn every_reference_resolves() {
        let d = doc();
        let mut all = Vec::new();
        refs(&d, &mut all);
        assert!(all.len() > 20);
        for r in all {
            let name = r.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("unexpected $ref {r}"));
            assert!(d["components"]["schemas"].get(name).is_some(), "{r} does not resolve");
        }
    }

    #[test]
    fn create_requests_require_their_fields_and_name_their_enums() {
        let d = doc();
        let s = &d["components"]["schemas"];
        assert_eq!(s["CreatePayoutRequest"]["required"], serde_json::json!(["currency", "amount", "destination"]));
        assert_eq!(s["CreatePayoutRequest"]["properties"]["amount"]["type"], "string");
        assert_eq!(s["CreatePayoutRequest"]["properties"]["currency"]["$ref"], "#/components/schemas/Currency");
        assert_eq!(
            s["CreateStaticAddressRequest"]["properties"]["label"]["type"],
            serde_json::json!(["string", "null"])
        );
        // An optional enum takes null as the server does, and stays a named component.
        let network = &s["CreateStaticAddressRequest"]["properties"]["network"]["anyOf"];
        assert_eq!(network, &serde_json::json!([{"$ref": "#/components/schemas/Network"}, {"type": "null"}]));
        // Bodies are plain objects: no composition a generator would turn into an intersection.
        for name in [
            "CreateInvoiceRequest",
            "CreateStaticAddressRequest",
            "CreatePayoutRequest",
            "CreateRefundRequest",
            "MineRequest",
            "SimulateDepositRequest",
        ] {
            let body = s[name].as_object().unwrap();
            assert_eq!(body["type"], "object", "{name}");
            for k in ["allOf", "anyOf", "oneOf"] {
                assert!(!body.contains_key(k), "{name} has a top-level {k}");
            }
            assert!(body["description"].as_str().unwrap().len() > 40, "{name} states its cross-field rules");
        }
        assert_eq!(s["MineRequest"]["properties"]["count"]["minimum"], 1);
        let header = &d["paths"]["/v1/refunds"]["post"]["parameters"][0];
        assert_eq!((header["name"].as_str(), &header["schema"]["minLength"]), (Some("Idempotency-Key"), &1.into()));
    }

    /// Generators name enum members by upper-casing the value: two values that differ only by
    /// case would give two members of one name.
    #[test]
    fn no_enum_has_case_only_twins() {
        fn enums<'a>(v: &'a Value, out: &mut Vec<&'a Vec<Value>>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::Array(e)) = m.get("enum") {
                        out.push(e);
                    }
                    m.values().for_each(|v| enums(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| enums(v, out)),
                _ => {}
            }
        }
        let d = doc();
        let mut all = Vec::new();
        enums(&d, &mut all);
        assert!(all.len() > 5);
        for e in all {
            let mut seen = std::collections::HashSet::new();
            for v in e.iter().filter_map(Value::as_str) {
                assert!(seen.insert(v.to_ascii_uppercase()), "{v} has a twin in {e:?}");
            }
        }
        let currencies = d["components"]["schemas"]["Currency"]["enum"].as_array().unwrap();
        assert!(currencies.contains(&"xrp".into()) && !currencies.contains(&"XRP".into()));
        assert!(currencies.contains(&"USDT".into()) && currencies.contains(&"BTC".into()));
    }

    /// OpenAPI requires a description on every response; generators name functions after
    /// `operationId` and document them with `summary`.
    #[test]
    fn every_operation_is_named_summarised_and_its_responses_described() {
        let d = doc();
        let mut ids = std::collections::HashSet::new();
        let mut n = 0;
        for (path, item) in d["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId"));
                assert!(ids.insert(id.to_owned()), "{id} twice");
                assert!(!op["summary"].as_str().unwrap_or_default().is_empty(), "{method} {path}: no summary");
                for (status, r) in op["responses"].as_object().unwrap() {
                    n += 1;
                    assert!(
                        !r["description"].as_str().unwrap_or_default().is_empty(),
                        "{method} {path} {status}: no description"
                    );
                }
            }
        }
        assert!(n > 150, "{n} responses");
    }

    /// docs/integrating.md shows the first ten lines of each flow CI runs with a generated
    /// client, and the webhook verifiers CI runs, exactly as they are.
    #[test]
    fn the_integration_guide_shows_what_ci_runs() {
        let guide = include_str!("../../../docs/integrating.md");
        for (name, file) in [
            ("flow.py", include_str!("../../../.ci/clients/flow.py")),
            ("flow.ts", include_str!("../../../.ci/clients/flow.ts")),
        ] {
            let head: Vec<&str> = file.lines().take(10).collect();
            assert!(guide.contains(&head.join("\n")), "the guide does not show the first ten lines of {name}");
        }
        for (name, file, end) in [
            ("verify.py", include_str!("../../../.ci/clients/verify.py"), "\n\n# Run by"),
            ("verify.ts", include_str!("../../../.ci/clients/verify.ts"), "\n\n// Run by"),
        ] {
            let function = &file[..file.find(end).unwrap()];
            assert!(guide.contains(function.trim_end()), "the guide does not show {name}'s verify");
        }
    }

    #[test]
    fn positive_decimal_pattern() {
        let re = regex::Regex::new(super::bodies::POSITIVE_DECIMAL).unwrap();
        for ok in ["1", "0.1", "10.000", "000.5", "0.00000001", "100"] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in ["0", "0.0", "", ".5", "1.", "-1", "1e3", " 1", "00"] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }
}
