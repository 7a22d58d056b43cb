//! The merchant's own settings: `GET /v1/settings`, `PATCH /v1/settings` (domain::settings).

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{Allowed, perm};
use crate::envelope::Data;
use crate::error::{ApiResult, ErrorEnvelope};
use crate::extract::JsonBody;
use crate::state::HttpState;
use domain::invoices::types::ts;
use domain::settings::{self, SettingsPatch};

/// This resource's routes.
pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::default().routes(routes!(get_settings, update_settings))
}

crate::envelope::documented! {
    SettingsEnvelope = SettingsResponse;
}

/// The merchant's invoice defaults (shared by both environments).
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingsResponse {
    /// Fiat code that fiat-priced invoices default to.
    pub base_currency: String,
    /// How long a new invoice stays payable, in seconds.
    pub invoice_lifetime_secs: i64,
    /// A payment this percentage short of the requested amount still counts as paid (decimal string).
    pub underpayment_tolerance_percent: String,
    /// `Reply-To` of the payment-request e-mails sent to payers; null: the operator's sender.
    pub payer_reply_to: Option<String>,
    pub updated_at: String,
}

impl SettingsResponse {
    fn from_model(m: &entity::merchant::Model) -> Self {
        SettingsResponse {
            base_currency: m.base_currency.clone(),
            invoice_lifetime_secs: m.invoice_lifetime_secs,
            underpayment_tolerance_percent: m.underpayment_tolerance_percent.value().normalize().to_string(),
            payer_reply_to: m.payer_reply_to.clone(),
            updated_at: ts(m.updated_at),
        }
    }
}

/// A change: only the fields given change; all are checked before anything is written.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSettingsRequest {
    /// 3-letter upper-case fiat code (`USD`, `EUR`).
    #[schema(pattern = "^[A-Z]{3}$")]
    pub base_currency: Option<String>,
    /// From 60 to 2592000 (30 days).
    #[schema(value_type = Option<u64>, minimum = 60, maximum = 2592000)]
    #[serde(default, deserialize_with = "crate::extract::optional_whole_number")]
    pub invoice_lifetime_secs: Option<u64>,
    /// Decimal string from 0 to 50, at most 2 decimal places.
    #[schema(pattern = "^(50(\\.0{1,2})?|[1-4]?[0-9](\\.[0-9]{1,2})?)$")]
    pub underpayment_tolerance_percent: Option<String>,
    /// `Reply-To` of the payment-request e-mails to payers (the merchant's support address);
    /// `""` removes it.
    #[schema(max_length = 254, pattern = "^$|^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+$")]
    pub payer_reply_to: Option<String>,
}

/// The merchant's settings.
#[utoipa::path(get, path = "/v1/settings", tag = "settings", security(("api_key" = [])),
    responses(
        (status = 200, body = SettingsEnvelope),
        (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn get_settings(
    State(state): State<HttpState>,
    auth: Allowed<perm::SettingsRead>,
) -> ApiResult<Data<SettingsResponse>> {
    Ok(Data::ok(SettingsResponse::from_model(&settings::get(&state, &auth).await?)))
}

/// Change the merchant's settings (recorded in the audit log with the key that changed them).
///
/// Payout approval settings are the operator's, not a key's: a key able to switch approval off
/// would remove the check that stops a stolen key from paying money out.
#[utoipa::path(patch, path = "/v1/settings", tag = "settings", security(("api_key" = [])),
    request_body = UpdateSettingsRequest,
    responses(
        (status = 200, body = SettingsEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
    ))]
pub async fn update_settings(
    State(state): State<HttpState>,
    auth: Allowed<perm::SettingsWrite>,
    body: JsonBody<UpdateSettingsRequest>,
) -> ApiResult<Data<SettingsResponse>> {
    let b = body.value;
    let patch = SettingsPatch {
        base_currency: b.base_currency,
        invoice_lifetime_secs: b.invoice_lifetime_secs.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
        underpayment_tolerance_percent: b.underpayment_tolerance_percent,
        payer_reply_to: b.payer_reply_to,
    };
    Ok(Data::ok(SettingsResponse::from_model(&settings::update(&state, &auth, &patch).await?)))
}
