//! Extractors that turn every malformed input into a 400 naming the field.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::ApiError;

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
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid_field("body", e.body_text()))?;
        if bytes.is_empty() {
            return Err(ApiError::invalid_field("body", "a JSON object is required"));
        }
        let raw: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::invalid_field("body", format!("malformed JSON: {e}")))?;
        if !raw.is_object() {
            return Err(ApiError::invalid_field("body", "must be a JSON object"));
        }
        let value = serde_path_to_error::deserialize(&raw).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::invalid_field(&field, e.into_inner())
        })?;
        Ok(JsonBody { value, raw })
    }
}

/// A UUID path parameter (`…ID` in the spec); anything else is 400.
pub struct PathId(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(params) =
            axum::extract::Path::<Vec<(String, String)>>::from_request_parts(parts, state)
                .await
                .map_err(|e| ApiError::invalid_field("path", e.body_text()))?;
        let (name, raw) = params.into_iter().next().ok_or_else(|| ApiError::invalid_field("path", "missing id"))?;
        Uuid::parse_str(&raw).map(PathId).map_err(|_| ApiError::invalid_field(&name, "must be a UUID"))
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

/// Raw query parameters; handlers validate each one they use by name.
pub struct QueryParams(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let q = parts.uri.query().unwrap_or("");
        let pairs = url::form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
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

    /// An optional enum-like parameter; unknown values are 400 naming the allowed ones.
    pub fn one_of<T>(
        &self,
        name: &str,
        parse: impl Fn(&str) -> Option<T>,
        allowed: &str,
    ) -> Result<Option<T>, ApiError> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some(v) => parse(v)
                .map(Some)
                .ok_or_else(|| ApiError::invalid_field(name, format!("must be one of {allowed}, got {v:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> QueryParams {
        QueryParams(url::form_urlencoded::parse(s.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
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
