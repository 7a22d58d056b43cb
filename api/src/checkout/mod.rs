//! The hosted checkout page at `checkout_url` (`GET /checkout/{invoice_id}`): what the payer
//! sees and does. Public (the invoice id in the link is the capability), served by the API with
//! every asset embedded in the binary: no external request, a strict Content-Security-Policy.
//!
//! - `GET /checkout/{id}`: the page (HTML shell; the script renders the state embedded in it
//!   and polls for changes without reloading).
//! - `GET /checkout/{id}/state`: the payer's view (`service::CheckoutView`).
//! - `GET /checkout/{id}/qr.svg`: the QR code of the payment URI.
//! - `GET /checkout/{id}/receipt`: the printable receipt of a paid or overpaid invoice
//!   (server-rendered, no script; `receipt`). 404 for any other invoice.
//! - `POST /checkout/{id}/activate`: a deferred invoice is activated on the chosen gate.
//! - `POST /checkout/{id}/test-payment`: test environment only, the simulate buttons.
//!
//! The two actions are the domain's (`domain::invoices::checkout`): this module reads and
//! renders, and writes no rows.
//!
//! Every text the payer reads is in `domain::messages` (`entity/domain/src/messages/<lang>.json`,
//! one catalogue per language, shared with the payment-request e-mail); none is in the HTML,
//! the script or this module. The language (`lang`) is `?lang=xx` if given, else the browser's
//! `Accept-Language`, else English; every route above takes `?lang=` and the page passes its
//! own to the state poll, the activation and the receipt link. The page links to itself in each
//! language (plain links, no script) and sets `<html lang>`.

pub mod lang;
pub mod receipt;
pub mod service;
pub mod uri;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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
/// The payer's texts in English (the fallback catalogue). Keys are used by `checkout.js`.
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
        .route("/checkout/{invoice_id}/receipt", get(receipt_page))
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

/// The language of a request: `?lang=`, else `Accept-Language`, else English.
fn language(q: &lang::LangQuery, headers: &HeaderMap) -> &'static str {
    let accept = headers.get(header::ACCEPT_LANGUAGE).and_then(|v| v.to_str().ok());
    lang::pick(q.lang.as_deref(), accept)
}

/// The links to this page in every language (plain links: no script), the current one marked.
fn language_switch(lang: &str) -> String {
    let label = domain::messages::escape_html(&domain::messages::fill_in(lang, "language_switch", &[]));
    let mut links = String::new();
    for (code, _) in domain::messages::LANGUAGES {
        let name = domain::messages::escape_html(&domain::messages::fill_in(code, "language_name", &[]));
        let current = if code == lang { " aria-current=\"true\"" } else { "" };
        links.push_str(&format!(
            "<li><a href=\"?lang={code}\" hreflang=\"{code}\" lang=\"{code}\"{current}>{name}</a></li>"
        ));
    }
    format!("<nav class=\"langs\" aria-label=\"{label}\"><ul>{links}</ul></nav>")
}

/// The page for an invoice's view (`state` is `null` for an unknown invoice), in `lang`.
fn render_page(state: &str, invoice: &str, lang: &str) -> String {
    let messages = domain::messages::catalogue(lang).replace('<', "\\u003c");
    let title = domain::messages::escape_html(&domain::messages::fill_in(lang, "title", &[]));
    fill(
        PAGE,
        &[
            ("LANG", lang),
            ("TITLE", &title),
            ("LANG_SWITCH", &language_switch(lang)),
            ("STATE", state),
            ("MESSAGES", &messages),
            ("INVOICE", invoice),
        ],
    )
}

async fn page(
    State(state): State<HttpState>,
    Path(raw): Path<String>,
    Query(q): Query<lang::LangQuery>,
    headers: HeaderMap,
) -> Response {
    let lang = language(&q, &headers);
    let not_found = || html(StatusCode::NOT_FOUND, render_page("null", "", lang));
    let Ok(id) = Uuid::parse_str(&raw) else { return not_found() };
    match service::view(&state, id, lang).await {
        Ok(view) => html(StatusCode::OK, render_page(&embedded_json(&view), &id.to_string(), lang)),
        Err(e) if e.status == StatusCode::NOT_FOUND => not_found(),
        Err(e) => e.into_response(),
    }
}

/// The receipt of a paid or overpaid invoice; the page's not-found for any other.
async fn receipt_page(
    State(state): State<HttpState>,
    Path(raw): Path<String>,
    Query(q): Query<lang::LangQuery>,
    headers: HeaderMap,
) -> Response {
    let lang = language(&q, &headers);
    let not_found = || html(StatusCode::NOT_FOUND, render_page("null", "", lang));
    let Ok(id) = Uuid::parse_str(&raw) else { return not_found() };
    let found = async {
        let inv = service::load(&state, id).await?;
        let pays = service::payments(&state, id).await?;
        let merchant = state.merchant(inv.merchant_id.into()).await?;
        ApiResult::Ok(receipt::Receipt::of(&inv, &merchant.name, &pays))
    };
    match found.await {
        Ok(Some(r)) => html(StatusCode::OK, receipt::render(&r, lang, &language_switch(lang))),
        Ok(None) => not_found(),
        Err(e) if e.status == StatusCode::NOT_FOUND => not_found(),
        Err(e) => e.into_response(),
    }
}

async fn state_json(
    State(state): State<HttpState>,
    PathId(id): PathId,
    Query(q): Query<lang::LangQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let lang = language(&q, &headers);
    Ok(secured(Data::ok(service::view(&state, id, lang).await?).into_response(), "no-store"))
}

async fn qr(State(state): State<HttpState>, PathId(id): PathId) -> ApiResult<Response> {
    let view = service::view(&state, id, "en").await?;
    let uri = view.payment_uri.ok_or_else(|| ApiError::not_found("payment address"))?;
    let svg = uri::qr_svg(&uri).ok_or_else(|| ApiError::internal("QR encoding failed"))?;
    Ok(secured(([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(), "no-store"))
}

async fn activate(
    State(state): State<HttpState>,
    PathId(id): PathId,
    Query(q): Query<lang::LangQuery>,
    headers: HeaderMap,
    body: Result<JsonBody<service::ActivateRequest>, ApiError>,
) -> ApiResult<Response> {
    let lang = language(&q, &headers);
    service::activate(&state, id, body?.value).await?;
    Ok(secured(Data::ok(service::view(&state, id, lang).await?).into_response(), "no-store"))
}

async fn test_payment(
    State(state): State<HttpState>,
    PathId(id): PathId,
    Query(q): Query<lang::LangQuery>,
    headers: HeaderMap,
    body: Result<JsonBody<service::SimulateRequest>, ApiError>,
) -> ApiResult<Response> {
    let lang = language(&q, &headers);
    service::simulate(&state, id, body?.value).await?;
    Ok(secured(Data::ok(service::view(&state, id, lang).await?).into_response(), "no-store"))
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

    #[test]
    fn the_page_in_a_language() {
        let page = render_page("null", "", "de");
        assert!(page.contains("<html lang=\"de\">") && page.contains("<title>Zahlung</title>"), "{page}");
        assert!(page.contains("href=\"?lang=fr\""), "a link to every language");
        assert!(page.contains("aria-current=\"true\">Deutsch<"), "the current language marked");
        assert!(page.contains("\"status_draft\": \"Zahlungsart wählen\""), "the German catalogue");
        assert!(!page.contains("{{"), "every placeholder filled");
    }

    /// The text between tags of `html` (tags, placeholders and entities removed).
    fn visible_text(html: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        fill(&out, &[]).split("{{").map(|part| part.split_once("}}").map_or(part, |(_, rest)| rest)).collect::<String>()
    }

    /// No payer-visible text is written in the page, the receipt or the script: it all comes
    /// from the catalogues.
    #[test]
    fn no_hard_coded_text() {
        for (name, html) in [("checkout.html", PAGE), ("receipt.html", include_str!("assets/receipt.html"))] {
            let body = html.split_once("<body>").map_or(html, |(_, b)| b);
            let body = body.split("<script").next().unwrap_or(body);
            let text = visible_text(body);
            assert!(text.trim().is_empty(), "{name} has text of its own: {:?}", text.trim());
        }
        // A string literal in the script with two words in it would be a sentence.
        let mut rest = SCRIPT;
        while let Some(start) = rest.find('"') {
            let after = &rest[start + 1..];
            let end = after.find('"').expect("balanced quotes in checkout.js");
            let literal = &after[..end];
            let words = literal.split(' ').filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 2).count();
            assert!(words < 2 || literal == "use strict", "checkout.js has text of its own: {literal:?}");
            rest = &after[end + 1..];
        }
    }
}
