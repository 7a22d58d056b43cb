//! Extractors that turn every malformed input into a 400 naming the field.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use domain::db::PageRequest;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::ApiError;

/// Largest request body accepted (JSON bodies here are small); the router's body limit layer
/// enforces it too.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A JSON body: malformed JSON, wrong types, unknown fields and missing fields are 400 with
/// the field's path in `details`. Also keeps the parsed value for idempotency hashing.
pub struct JsonBody<T> {
    pub value: T,
    pub raw: serde_json::Value,
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let content_type_ok = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.starts_with("application/json"))
            .unwrap_or(true);
        if !content_type_ok {
            return Err(ApiError::invalid_field("body", "Content-Type must be application/json"));
        }
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(MAX_BODY_BYTES)
            } else {
                ApiError::invalid_field("body", e.body_text())
            }
        })?;
        if bytes.is_empty() {
            return Err(ApiError::invalid_field("body", "a JSON object is required"));
        }
        let raw: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid_field("body", format!("malformed JSON: {e}")))?;
        if !raw.is_object() {
            return Err(ApiError::invalid_field("body", "must be a JSON object"));
        }
        if let Some(field) = unstorable_field(&raw, "") {
            return Err(ApiError::invalid_field(&field, NUL_PROBLEM));
        }
        let value = serde_path_to_error::deserialize(&raw).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::invalid_field(&field, e.into_inner())
        })?;
        Ok(JsonBody { value, raw })
    }
}

/// What a field holding a NUL character is told. PostgreSQL cannot store U+0000 in a text or
/// JSON column (and SQLite would store what PostgreSQL refuses), so it is refused everywhere.
pub const NUL_PROBLEM: &str = "must not contain the NUL character (\\u0000)";

/// Whether `s` can be stored in a text column of both databases.
pub fn storable(s: &str) -> bool {
    !s.contains('\0')
}

/// The path (`description`, `metadata.note`, `tags[2]`) of the first string or object key in
/// `v` that cannot be stored, in the notation of the other validation errors.
fn unstorable_field(v: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    let here = || if path.is_empty() { "body".to_owned() } else { path.to_owned() };
    match v {
        Value::String(s) if !storable(s) => Some(here()),
        Value::Object(m) => m.iter().find_map(|(k, v)| {
            let child = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
            if storable(k) { unstorable_field(v, &child) } else { Some(child.replace('\0', "\\u0000")) }
        }),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, v)| unstorable_field(v, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// A UUID path parameter (`…ID` in the spec), as the resource's typed id (`PathId<InvoiceId>`)
/// or a plain `Uuid`; anything else is 400.
pub struct PathId<T = Uuid>(pub T);

impl<S: Send + Sync, T: From<Uuid>> FromRequestParts<S> for PathId<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(params) =
            axum::extract::Path::<Vec<(String, String)>>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::invalid_field("path", e.body_text()))?;
        let (name, raw) = params.into_iter().next().ok_or_else(|| ApiError::invalid_field("path", "missing id"))?;
        Uuid::parse_str(&raw)
            .map(|id| PathId(T::from(id)))
            .map_err(|_| ApiError::invalid_field(&name, "must be a UUID"))
    }
}

/// The mandatory `Idempotency-Key` header (spec 4.9, section 8): 1..=255 visible ASCII
/// characters; missing, empty, longer or unreadable is 400 naming the header.
#[derive(Debug)]
pub struct IdempotencyKey(pub String);

impl IdempotencyKey {
    pub const HEADER: &'static str = "Idempotency-Key";
    pub const MAX_LEN: usize = 255;

    pub fn parse(value: Option<&axum::http::HeaderValue>) -> Result<Self, ApiError> {
        let bad = |problem: &str| ApiError::invalid_field(Self::HEADER, problem);
        let v = value.ok_or_else(|| bad("header required"))?;
        let s = v.to_str().map_err(|_| bad("must be visible ASCII characters"))?;
        match s.len() {
            0 => Err(bad("must not be empty")),
            n if n > Self::MAX_LEN => Err(bad(&format!("at most {} characters, got {n}", Self::MAX_LEN))),
            _ => Ok(IdempotencyKey(s.to_owned())),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Self::parse(parts.headers.get(Self::HEADER))
    }
}

/// Raw query parameters; handlers validate each one they use by name. A parameter holding a
/// NUL character (`%00`) is 400 naming it, whether or not the handler reads it.
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        QueryParams::parse(parts.uri.query().unwrap_or(""))
    }
}

impl QueryParams {
    pub fn parse(q: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> =
            url::form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        if let Some((k, _)) = pairs.iter().find(|(k, v)| !storable(k) || !storable(v)) {
            let name = if storable(k) { k.clone() } else { "query".to_owned() };
            return Err(ApiError::invalid_field(&name, NUL_PROBLEM));
        }
        Ok(QueryParams(pairs))
    }
}

impl QueryParams {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// `limit` (default 20, 1..=100) and `offset` (default 0, >= 0), per spec section 8.
    pub fn pagination(&self) -> Result<(u64, u64), ApiError> {
        let mut problems = Vec::new();
        let limit = match self.get("limit") {
            None => 20,
            Some(s) => match s.parse::<i64>() {
                Ok(n) if (1..=100).contains(&n) => n as u64,
                _ => {
                    problems.push(format!("limit: must be an integer from 1 to 100, got {s:?}"));
                    20
                }
            },
        };
        let offset = match self.get("offset") {
            None => 0,
            Some(s) => match s.parse::<i64>() {
                Ok(n) if n >= 0 => n as u64,
                _ => {
                    problems.push(format!("offset: must be an integer >= 0, got {s:?}"));
                    0
                }
            },
        };
        if problems.is_empty() { Ok((limit, offset)) } else { Err(ApiError::validation(problems)) }
    }

    /// The page a list asks for: `limit` and `offset` ([`QueryParams::pagination`]) and the
    /// cursors `starting_after` and `ending_before`, each the id of a row of the same list
    /// (add-only to spec section 8; `domain::db::PageRequest` says what each combination means).
    pub fn page(&self) -> Result<PageRequest, ApiError> {
        let (limit, offset) = self.pagination()?;
        let cursor = |name: &str| -> Result<Option<Uuid>, ApiError> {
            match self.get(name) {
                None => Ok(None),
                Some(s) => Uuid::parse_str(s).map(Some).map_err(|_| {
                    ApiError::invalid_field(name, format!("must be the id of a row of this list, got {s:?}"))
                }),
            }
        };
        Ok(PageRequest { limit, offset, after: cursor("starting_after")?, before: cursor("ending_before")? })
    }

    /// An optional enum-like (or otherwise typed) parameter; any other value, the empty one
    /// included, is 400 naming the allowed ones (as the OpenAPI document states them).
    pub fn one_of<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Result<Option<T>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid_field(name, format!("must be one of {allowed}, got {v:?}"))),
        }
    }
}

/// A JSON number without a fraction, as JSON Schema's `integer` counts them (`3` and `3.0`).
pub fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::Deserialize;
    use serde::de::Error;
    let n = serde_json::Number::deserialize(d)?;
    n.as_u64()
        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && (0.0..=1e15).contains(f)).map(|f| f as u64))
        .ok_or_else(|| D::Error::custom(format!("must be a whole number, got {n}")))
}

/// [`whole_number`] of an optional field (`null` or missing: `None`).
pub fn optional_whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::Deserialize;
    #[derive(Deserialize)]
    struct Whole(#[serde(deserialize_with = "whole_number")] u64);
    Ok(Option::<Whole>::deserialize(d)?.map(|w| w.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> QueryParams {
        QueryParams::parse(s).unwrap()
    }

    #[test]
    fn a_page_takes_an_offset_and_cursors_that_are_ids() {
        let id = Uuid::now_v7();
        let page = |limit, offset, after, before| PageRequest { limit, offset, after, before };
        assert_eq!(q("limit=5&offset=40").page().unwrap(), page(5, 40, None, None));
        assert_eq!(q(&format!("starting_after={id}")).page().unwrap(), page(20, 0, Some(id), None));
        assert_eq!(q(&format!("ending_before={id}&limit=3")).page().unwrap(), page(3, 0, None, Some(id)));
        assert_eq!(
            q(&format!("starting_after={id}&ending_before={id}&offset=2")).page().unwrap(),
            page(20, 2, Some(id), Some(id))
        );
        let field = |s: &str| q(s).page().unwrap_err().details[0].split(':').next().unwrap().to_owned();
        assert_eq!(field("starting_after=inv_42"), "starting_after");
        assert_eq!(field("ending_before="), "ending_before");
        assert_eq!(field(&format!("starting_after={id}&limit=0")), "limit");
    }

    #[test]
    fn nul_in_a_query_parameter_is_refused_naming_it() {
        let err = QueryParams::parse("limit=5&currency=BT%00C").err().unwrap();
        assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(err.details[0].starts_with("currency:"), "{:?}", err.details);
        let err = QueryParams::parse("a%00b=1").err().unwrap();
        assert!(err.details[0].starts_with("query:"), "{:?}", err.details);
    }

    #[test]
    fn nul_anywhere_in_a_body_is_found_with_its_path() {
        use serde_json::json;
        assert_eq!(unstorable_field(&json!({"a": "ok", "b": [1, "x"], "c": {"d": null}}), ""), None);
        assert_eq!(unstorable_field(&json!({"description": "a\0b"}), "").as_deref(), Some("description"));
        assert_eq!(unstorable_field(&json!({"metadata": {"k": "\0"}}), "").as_deref(), Some("metadata.k"));
        assert_eq!(unstorable_field(&json!({"metadata": {"k\0": 1}}), "").as_deref(), Some("metadata.k\\u0000"));
        assert_eq!(unstorable_field(&json!({"tags": ["a", "b\0"]}), "").as_deref(), Some("tags[1]"));
    }

    #[test]
    fn pagination_bounds() {
        assert_eq!(q("").pagination().unwrap(), (20, 0));
        assert_eq!(q("limit=1&offset=0").pagination().unwrap(), (1, 0));
        assert_eq!(q("limit=100&offset=7").pagination().unwrap(), (100, 7));
        for bad in ["limit=0", "limit=101", "limit=-1", "limit=abc", "offset=-1", "offset=x", "limit=1.5"] {
            let err = q(bad).pagination().unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST, "{bad}");
            assert!(err.details[0].starts_with(bad.split('=').next().unwrap()), "{bad}: {:?}", err.details);
        }
        assert_eq!(q("limit=0&offset=-1").pagination().unwrap_err().details.len(), 2);
    }

    #[test]
    fn idempotency_key_bounds() {
        use axum::http::HeaderValue;
        let parse = |v: &str| IdempotencyKey::parse(Some(&HeaderValue::from_str(v).unwrap()));
        assert_eq!(parse("k").unwrap().0, "k");
        assert_eq!(parse(&"x".repeat(255)).unwrap().0.len(), 255);
        for err in
            [IdempotencyKey::parse(None).unwrap_err(), parse("").unwrap_err(), parse(&"x".repeat(256)).unwrap_err()]
        {
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(err.details[0].starts_with("Idempotency-Key:"), "{:?}", err.details);
        }
    }
}
