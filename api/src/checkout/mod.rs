//! The hosted checkout page at `checkout_url` (`GET /checkout/{invoice_id}`): what the payer
//! sees and does. Public (the invoice id in the link is the capability), served by the API with
//! every asset embedded in the binary: no external request, a strict Content-Security-Policy.
//!
//! - `GET /checkout/{id}`: the page (HTML shell; the script renders the state embedded in it
//!   and polls for changes without reloading).
//! - `GET /checkout/{id}/state`: the payer's view (`service::CheckoutView`).
//! - `GET /checkout/{id}/qr.svg`: the QR code of the payment URI.
//! - `POST /checkout/{id}/activate`: a deferred invoice is activated on the chosen gate.
//! - `POST /checkout/{id}/test-payment`: test environment only, the simulate buttons.
//!
//! Every text the payer reads is in `domain::messages` (`entity/domain/src/messages/en.json`,
//! shared with the payment-request e-mail): a translation is another such file.

pub mod service;
pub mod uri;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use uuid::Uuid;

use crate::envelope::Data;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, PathId};
use crate::state::HttpState;

const PAGE: &str = include_str!("assets/checkout.html");
const SCRIPT: &str = include_str!("assets/checkout.js");
const STYLE: &str = include_str!("assets/checkout.css");
/// The payer's texts (English). Keys are used by `checkout.js` and the page.
pub const MESSAGES_EN: &str = domain::messages::EN;

/// Only our own script, style, images and requests; nothing framed, no form posts.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn router() -> Router<HttpState> {
    Router::new()
        .route("/checkout/assets/checkout.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/checkout/assets/checkout.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/checkout/{invoice_id}", get(page))
        .route("/checkout/{invoice_id}/state", get(state_json))
        .route("/checkout/{invoice_id}/qr.svg", get(qr))
        .route("/checkout/{invoice_id}/activate", post(activate))
        .route("/checkout/{invoice_id}/test-payment", post(test_payment))
}

fn secured(mut r: Response, cache: &'static str) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    r
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    secured(([(header::CONTENT_TYPE, content_type)], body).into_response(), "public, max-age=300")
}

/// JSON for a `<script type="application/json">` block: `<` escaped so no `</script>` or
/// comment can close it, whatever a description contains.
fn embedded_json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into()).replace('<', "\\u003c")
}

fn html(status: StatusCode, body: String) -> Response {
    secured((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response(), "no-store")
}

/// Fills the page's `{{NAME}}` placeholders in one pass over the template: a substituted value
/// (a description, a merchant name) is never scanned again, so text that looks like a
/// placeholder stays text. Unknown names are left as they are.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let value = after.find("}}").and_then(|end| {
            let name = &after[..end];
            values.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v, end))
        });
        match value {
            Some((v, end)) => {
                out.push_str(v);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The page for an invoice's view (`state` is `null` for an unknown invoice).
fn render_page(state: &str, invoice: &str) -> String {
    let messages = MESSAGES_EN.replace('<', "\\u003c");
    fill(PAGE, &[("STATE", state), ("MESSAGES", &messages), ("INVOICE", invoice)])
}

async fn page(State(state): State<HttpState>, Path(raw): Path<String>) -> Response {
    let not_found = || html(StatusCode::NOT_FOUND, render_page("null", ""));
    let Ok(id) = Uuid::parse_str(&raw) else { return not_found() };
    match service::view(&state, id).await {
        Ok(view) => html(StatusCode::OK, render_page(&embedded_json(&view), &id.to_string())),
        Err(e) if e.status == StatusCode::NOT_FOUND => not_found(),
        Err(e) => e.into_response(),
    }
}

async fn state_json(State(state): State<HttpState>, PathId(id): PathId) -> ApiResult<Response> {
    Ok(secured(Data::ok(service::view(&state, id).await?).into_response(), "no-store"))
}

async fn qr(State(state): State<HttpState>, PathId(id): PathId) -> ApiResult<Response> {
    let view = service::view(&state, id).await?;
    let uri = view.payment_uri.ok_or_else(|| ApiError::not_found("payment address"))?;
    let svg = uri::qr_svg(&uri).ok_or_else(|| ApiError::internal("QR encoding failed"))?;
    Ok(secured(([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(), "no-store"))
}

async fn activate(
    State(state): State<HttpState>,
    PathId(id): PathId,
    body: Result<JsonBody<service::ActivateRequest>, ApiError>,
) -> ApiResult<Response> {
    service::activate(&state, id, body?.value).await?;
    Ok(secured(Data::ok(service::view(&state, id).await?).into_response(), "no-store"))
}

async fn test_payment(
    State(state): State<HttpState>,
    PathId(id): PathId,
    body: Result<JsonBody<service::SimulateRequest>, ApiError>,
) -> ApiResult<Response> {
    service::simulate(&state, id, body?.value).await?;
    Ok(secured(Data::ok(service::view(&state, id).await?).into_response(), "no-store"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_and_values_are_not_rescanned() {
        let vals = [("A", "{{B}}"), ("B", "b")];
        assert_eq!(fill("x{{A}}y{{B}}z", &vals), "x{{B}}ybz");
        assert_eq!(fill("{{UNKNOWN}} {{A", &vals), "{{UNKNOWN}} {{A");
        assert_eq!(fill("{{}}{{A}}", &vals), "{{}}{{B}}");
    }
}
