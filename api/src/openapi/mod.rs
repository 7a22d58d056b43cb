//! The OpenAPI document: each resource module describes its own paths (its `Doc`), and this
//! module merges them under the document's info and tags, with the API key scheme and the
//! responses every operation can give.

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

/// Adds 429 `rate_limited` (with `Retry-After` and the `RateLimit-*` headers) and 500
/// `internal_error` to every operation: any request can be throttled or meet a server fault.
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
    components(schemas(crate::error::ErrorEnvelope, crate::error::ErrorCode, crate::envelope::Pagination)),
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

/// The whole document, served at `/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
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
    doc
}
