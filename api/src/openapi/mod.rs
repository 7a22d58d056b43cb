//! The OpenAPI document: each resource module describes its own paths (its `Doc`), and this
//! module merges them under the document's info and tags, with the API key scheme and the
//! responses every operation can give.

mod bodies;
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
                let r = &mut op.responses.responses;
                r.entry("429".into()).or_insert_with(|| RefOr::T(throttled.clone()));
                r.entry("500".into()).or_insert_with(|| RefOr::T(internal.clone()));
                r.entry("504".into()).or_insert_with(|| RefOr::T(timeout.clone()));
            }
        }
    }
}

/// The parameters whose values are lists the code knows at run time, written into the document
/// from the same lists the server checks against: an event `type` (`webhooks::events_kinds`)
/// and a ledger's `{currency}` (every gate id and every asset code on one network only, as
/// `gates::resolve` accepts them).
struct KnownValues;

impl Modify for KnownValues {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
        let one_of = |values: Vec<String>| {
            RefOr::T(Schema::Object(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(values)).build()))
        };
        let kinds: Vec<String> = domain::webhooks::events_kinds().iter().map(|k| (*k).to_owned()).collect();
        let gates = domain::gates::GATES.iter();
        let mut currencies: Vec<String> = gates.clone().map(|g| g.id.to_owned()).collect();
        for g in gates.clone() {
            if domain::gates::resolve(g.asset, None).is_ok() && !currencies.iter().any(|c| c == g.asset) {
                currencies.push(g.asset.to_owned());
            }
        }
        for (path, name, values) in
            [("/v1/events", "type", kinds), ("/v1/balances/{currency}/ledger", "currency", currencies)]
        {
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
        entity::InvoiceStatus, entity::PayoutStatus, entity::RefundStatus, entity::Environment)),
    tags(
        (name = "invoices"),
        (name = "balances"),
        (name = "payouts"),
        (name = "refunds", description = "Refunds of invoices' credited payments, carried out by linked payouts"),
        (name = "addresses", description = "Static deposit addresses"),
        (name = "events", description = "The event log: past events with the bodies their webhooks carry (permission events:read)"),
        (name = "test helpers", description = "Sandbox deposits, reversals and blocks. Test keys only: 404 with a live key"),
        (name = "public", description = "No API key needed")
    )
)]
struct Root;

/// The whole document, served at `/openapi.json`: the derived one, with what the types cannot
/// say written in by [`bodies::constrain`] (JSON Schema that utoipa's model does not hold).
pub fn document() -> serde_json::Value {
    let mut doc = Root::openapi();
    for part in [
        crate::invoices::Doc::openapi(),
        crate::payouts::Doc::openapi(),
        crate::refunds::Doc::openapi(),
        crate::events::Doc::openapi(),
        crate::balances::Doc::openapi(),
        crate::static_addresses::Doc::openapi(),
        crate::test_helpers::Doc::openapi(),
        crate::public::Doc::openapi(),
    ] {
        doc.merge(part);
    }
    SecurityAddon.modify(&mut doc);
    CommonResponses.modify(&mut doc);
    KnownValues.modify(&mut doc);
    let mut v = serde_json::to_value(&doc).expect("the document serialises");
    bodies::constrain(&mut v);
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
    fn create_requests_require_their_fields_and_resolvable_currencies() {
        let d = doc();
        let s = &d["components"]["schemas"];
        assert_eq!(s["CreatePayoutRequest"]["required"], serde_json::json!(["currency", "amount", "destination"]));
        assert_eq!(s["CreatePayoutRequest"]["properties"]["amount"]["type"], "string");
        assert_eq!(
            s["CreateStaticAddressRequest"]["properties"]["label"]["type"],
            serde_json::json!(["string", "null"])
        );
        // An optional enum takes null as the server does.
        let network = &s["CreateStaticAddressRequest"]["properties"]["network"]["enum"];
        assert!(network.as_array().unwrap().contains(&serde_json::Value::Null));
        // USDT alone is ambiguous: only with a network.
        let pairs = s["CreateStaticAddressRequest"]["anyOf"].as_array().unwrap();
        let alone = pairs[0]["properties"]["currency"]["enum"].as_array().unwrap();
        assert!(
            alone.contains(&"BTC".into()) && alone.contains(&"tron_usdt".into()) && !alone.contains(&"USDT".into())
        );
        assert!(pairs.iter().any(|p| p["properties"]["network"]["const"] == "tron"
            && p["properties"]["currency"]["enum"].as_array().unwrap().contains(&"USDT".into())));
        assert_eq!(s["SimulateDepositRequest"]["oneOf"].as_array().unwrap().len(), 2);
        assert_eq!(s["MineRequest"]["properties"]["count"]["minimum"], 1);
        let header = &d["paths"]["/v1/refunds"]["post"]["parameters"][0];
        assert_eq!((header["name"].as_str(), &header["schema"]["minLength"]), (Some("Idempotency-Key"), &1.into()));
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
