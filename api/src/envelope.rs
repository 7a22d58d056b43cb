//! Success envelopes and the request id that every response carries.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub static REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being served (empty outside a request).
pub fn current_request_id() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_default()
}

fn acceptable_incoming_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    let ok = !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    ok.then(|| s.to_owned())
}

/// The id `request_id_layer` will serve this request under: its well-formed `X-Request-Id`, else
/// a new one, written into the request's headers so every layer inside agrees on it.
pub fn assign_request_id(req: &mut Request) -> String {
    if let Some(id) = req.headers().get(&REQUEST_ID_HEADER).and_then(acceptable_incoming_id) {
        return id;
    }
    let id = format!("req_{}", uuid::Uuid::now_v7().simple());
    if let Ok(v) = HeaderValue::from_str(&id) {
        req.headers_mut().insert(REQUEST_ID_HEADER.clone(), v);
    }
    id
}

/// Builds a response outside `request_id_layer` (e.g. a server timeout) under `id`: the envelope's
/// `meta.request_id` and the `X-Request-Id` header both carry it.
pub fn response_with_request_id(id: String, make: impl FnOnce() -> Response) -> Response {
    let mut resp = REQUEST_ID.sync_scope(id.clone(), make);
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER.clone(), v);
    }
    resp
}

/// Honours a well-formed incoming `X-Request-Id`, otherwise makes one; exposes it to handlers
/// (for `meta.request_id`) and echoes it as a response header.
pub async fn request_id_layer(req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(acceptable_incoming_id)
        .unwrap_or_else(|| format!("req_{}", uuid::Uuid::now_v7().simple()));
    let span = tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path());
    let mut resp = REQUEST_ID.scope(id.clone(), tracing::Instrument::instrument(next.run(req), span)).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER.clone(), v);
    }
    resp
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Meta {
    pub request_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pagination: Option<Pagination>,
}

impl Meta {
    pub fn current() -> Self {
        Meta { request_id: current_request_id(), pagination: None }
    }
}

#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
pub struct Pagination {
    /// Rows the list's filter matches in all.
    pub total: u64,
    pub limit: u64,
    /// Rows skipped, as asked (counted from the cursor on a page asked for by cursor).
    pub offset: u64,
    /// More rows lie beyond this page in the direction of travel: older ones, or newer ones on
    /// a page asked for by `ending_before` alone.
    pub has_more: bool,
}

impl Pagination {
    pub fn new(total: u64, limit: u64, offset: u64) -> Self {
        Pagination { total, limit, offset, has_more: offset.saturating_add(limit) < total }
    }
}

/// Declares documented success bodies, `Name = T` being `{ data: T, meta }` as `Data`, `Page`
/// and `List` serialize it (`T` is `Vec<_>` for the lists). A resource declares its own next to
/// its handlers and names them as `body = Name`, a named component (one type per envelope in a
/// generated client); not generic, so `data` stays a reference to `T`'s schema in the document.
macro_rules! documented {
    ($($name:ident = $data:ty;)+) => {$(
        #[derive(utoipa::ToSchema)]
        pub struct $name {
            pub data: $data,
            pub meta: $crate::envelope::Meta,
        }
    )+};
}
pub(crate) use documented;

/// `{ data, meta }` with a status code.
pub struct Data<T> {
    pub status: StatusCode,
    pub data: T,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl<T> Data<T> {
    pub fn ok(data: T) -> Self {
        Data { status: StatusCode::OK, data, headers: Vec::new() }
    }

    pub fn created(data: T) -> Self {
        Data { status: StatusCode::CREATED, data, headers: Vec::new() }
    }

    pub fn with_header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((HeaderName::from_static(name), HeaderValue::from_static(value)));
        self
    }
}

#[derive(Serialize)]
struct Single<'a, T> {
    data: &'a T,
    meta: Meta,
}

impl<T: Serialize> IntoResponse for Data<T> {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(Single { data: &self.data, meta: Meta::current() })).into_response();
        for (k, v) in self.headers {
            resp.headers_mut().insert(k, v);
        }
        resp
    }
}

/// `limit` and `offset` of every list (spec section 8), as the OpenAPI document states them:
/// exactly the bounds `QueryParams::pagination` enforces.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Items per page: 1..100, default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Items skipped: >= 0, default 0. The database reads every row it skips, so a deep offset
    /// costs its depth; page through a long list with `starting_after` instead.
    #[param(minimum = 0)]
    pub offset: Option<i64>,
    /// Cursor: only rows older than the row with this id (the page right after it); pass the
    /// last id of a page to get the next one, the same cost at any depth. An id that is not a
    /// row of this list is 404.
    pub starting_after: Option<uuid::Uuid>,
    /// Cursor: only rows newer than the row with this id. Alone, the page right before it (still
    /// newest first); pass the first id of a page to get the previous one. With
    /// `starting_after`, the rows between the two. `offset` skips rows from where the page starts.
    pub ending_before: Option<uuid::Uuid>,
}

/// `{ data: [...], meta: { request_id, pagination } }`.
pub struct Page<T> {
    pub data: Vec<T>,
    pub pagination: Pagination,
}

impl<T> Page<T> {
    /// The page of `rows` asked for by `(limit, offset)`, each shown as `T`, of `total` rows in all.
    pub fn of<R>(rows: &[R], show: impl FnMut(&R) -> T, total: u64, (limit, offset): (u64, u64)) -> Self {
        Page { data: rows.iter().map(show).collect(), pagination: Pagination::new(total, limit, offset) }
    }

    /// `rows` (the rows of the page `of`, as [`domain::db::newest_first`] found it by offset or
    /// cursor, possibly with more read beside them), each shown as `T`.
    pub fn listed<R, M>(rows: &[R], show: impl FnMut(&R) -> T, of: &domain::db::Listed<M>, limit: u64) -> Self {
        let pagination = Pagination { total: of.total, limit, offset: of.offset, has_more: of.has_more };
        Page { data: rows.iter().map(show).collect(), pagination }
    }
}

/// Plain list without pagination (`/v1/currencies`, `/v1/rates`).
pub struct List<T>(pub Vec<T>);

#[derive(Serialize)]
struct Many<'a, T> {
    data: &'a [T],
    meta: Meta,
}

impl<T: Serialize> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        let meta = Meta { request_id: current_request_id(), pagination: Some(self.pagination) };
        axum::Json(Many { data: &self.data, meta }).into_response()
    }
}

impl<T: Serialize> IntoResponse for List<T> {
    fn into_response(self) -> Response {
        axum::Json(Many { data: &self.0, meta: Meta::current() }).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_more_follows_offset_and_limit() {
        assert!(Pagination::new(45, 20, 0).has_more);
        assert!(Pagination::new(45, 20, 20).has_more);
        assert!(!Pagination::new(45, 20, 40).has_more);
        assert!(!Pagination::new(40, 20, 20).has_more);
        assert!(!Pagination::new(0, 20, 0).has_more);
    }

    #[test]
    fn incoming_ids_are_checked() {
        assert_eq!(acceptable_incoming_id(&HeaderValue::from_static("abc-123")), Some("abc-123".into()));
        assert_eq!(acceptable_incoming_id(&HeaderValue::from_static("has space")), None);
        assert_eq!(acceptable_incoming_id(&HeaderValue::from_str(&"a".repeat(129)).unwrap()), None);
    }
}
