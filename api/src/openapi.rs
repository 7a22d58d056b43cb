//! The OpenAPI document, generated from the handlers and types.

use serde::Serialize;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use crate::envelope::Meta;
use crate::invoices::types::InvoiceResponse;
use crate::public::{CurrencyResponse, RateResponse};
use crate::static_addresses::types::StaticAddressResponse;

#[derive(Serialize, ToSchema)]
pub struct InvoiceEnvelope {
    pub data: InvoiceResponse,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct InvoiceListEnvelope {
    pub data: Vec<InvoiceResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct PayoutShortEnvelope {
    pub data: crate::payouts::types::PayoutShort,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct PayoutFullEnvelope {
    pub data: crate::payouts::types::PayoutFull,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct PayoutListEnvelope {
    pub data: Vec<crate::payouts::types::PayoutFull>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct BalanceListEnvelope {
    pub data: Vec<crate::balances::BalanceResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct LedgerListEnvelope {
    pub data: Vec<crate::balances::LedgerEntryResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct StaticAddressEnvelope {
    pub data: StaticAddressResponse,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct StaticAddressListEnvelope {
    pub data: Vec<StaticAddressResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct CurrencyListEnvelope {
    pub data: Vec<CurrencyResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct RateListEnvelope {
    pub data: Vec<RateResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct RefundEnvelope {
    pub data: crate::refunds::types::RefundResponse,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct RefundListEnvelope {
    pub data: Vec<crate::refunds::types::RefundResponse>,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct SandboxDepositEnvelope {
    pub data: crate::test_helpers::SandboxDeposit,
    pub meta: Meta,
}

#[derive(Serialize, ToSchema)]
pub struct ChainTipEnvelope {
    pub data: crate::test_helpers::ChainTip,
    pub meta: Meta,
}

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

#[derive(OpenApi)]
#[openapi(
    info(title = "Paygate merchant API", version = "1.0.0",
        description = "Self-hosted crypto payments: invoices, balances, payouts, refunds, static addresses, webhooks. The environment (test/live) is chosen by the API key."),
    paths(
        crate::invoices::create_invoice,
        crate::invoices::list_invoices,
        crate::invoices::get_invoice,
        crate::invoices::cancel_invoice,
        crate::payouts::create_payout,
        crate::payouts::list_payouts,
        crate::payouts::get_payout,
        crate::payouts::cancel_payout,
        crate::refunds::create_refund,
        crate::refunds::list_refunds,
        crate::refunds::get_refund,
        crate::balances::list_balances,
        crate::balances::list_ledger,
        crate::static_addresses::create_address,
        crate::static_addresses::list_addresses,
        crate::static_addresses::get_address,
        crate::static_addresses::list_address_invoices,
        crate::test_helpers::simulate_deposit,
        crate::test_helpers::reverse_deposit,
        crate::test_helpers::mine_blocks,
        crate::public::list_currencies,
        crate::public::list_rates,
    ),
    components(schemas(crate::error::ErrorEnvelope, crate::error::ErrorCode, crate::envelope::Pagination)),
    modifiers(&SecurityAddon, &CommonResponses),
    tags(
        (name = "invoices"),
        (name = "balances"),
        (name = "payouts"),
        (name = "refunds", description = "Refunds of invoices' credited payments, carried out by linked payouts"),
        (name = "addresses", description = "Static deposit addresses"),
        (name = "test helpers", description = "Sandbox deposits, reversals and blocks. Test keys only: 404 with a live key"),
        (name = "public", description = "No API key needed")
    )
)]
pub struct ApiDoc;
