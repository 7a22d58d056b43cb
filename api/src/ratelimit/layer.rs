//! The middleware: classifies a request, checks its bucket, answers 429 when it is used up and
//! puts the `RateLimit-*` headers on every response of a limited route.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Class, Decision, ceil_secs};
use crate::auth::{API_KEY_HEADER, Principal, VerifiedKey};
use crate::error::{ApiError, ErrorCode};
use crate::state::HttpState;
use domain::config::{RateLimit, RateLimitsConfig};

pub const RATELIMIT_LIMIT: &str = "ratelimit-limit";
pub const RATELIMIT_REMAINING: &str = "ratelimit-remaining";
pub const RATELIMIT_RESET: &str = "ratelimit-reset";
pub const RATELIMIT_POLICY: &str = "ratelimit-policy";

/// Which limits a path is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Health, readiness, the OpenAPI document and its viewer.
    Unlimited,
    /// Per client IP.
    Public,
    /// Per API key (reads or writes), or per merchant for the test helpers.
    Keyed { test_helpers: bool },
}

pub fn route(path: &str) -> Route {
    if matches!(path, "/v1/currencies" | "/v1/rates")
        || path == "/checkout"
        || path.starts_with("/checkout/")
        || path == "/dashboard"
        || path.starts_with("/dashboard/")
    {
        Route::Public
    } else if path.starts_with("/v1/test/") {
        Route::Keyed { test_helpers: true }
    } else if path.starts_with("/v1/") {
        Route::Keyed { test_helpers: false }
    } else {
        Route::Unlimited
    }
}

pub async fn limit(State(state): State<HttpState>, mut req: Request, next: Next) -> Response {
    let rl = &state.limiter;
    if !rl.enabled() {
        return next.run(req).await;
    }
    let cfg = rl.config();
    let (class, limit, decision) = match route(req.uri().path()) {
        Route::Unlimited => return next.run(req).await,
        Route::Public => (Class::Public, cfg.public, rl.check(Class::Public, &client_key(&req, cfg), cfg.public).await),
        Route::Keyed { test_helpers } => {
            let Some(key) = req.headers().get(API_KEY_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned) else {
                // No key: the handler answers 401 without any lookup.
                return next.run(req).await;
            };
            let ip = client_key(&req, cfg);
            // A key that would cost a database lookup waits while its IP's failures are used up.
            // A cached or malformed one costs nothing (and saves the store a round trip); if it
            // fails, the failure is counted below.
            let verdict = match state.keys.verify_cached(&key) {
                Some(verdict) => verdict,
                None => {
                    let failures = rl.peek(Class::AuthFailures, &ip, cfg.auth_failures).await;
                    if !failures.allowed {
                        return throttled(Class::AuthFailures, cfg.auth_failures, failures);
                    }
                    state.keys.verify(&state.db, &key).await
                }
            };
            match verdict {
                Ok(principal) => {
                    let (class, bucket) = keyed_bucket(req.method(), test_helpers, &principal);
                    let limit = merchant_limit(&state, class, &principal).await;
                    req.extensions_mut().insert(VerifiedKey(principal));
                    (class, limit, rl.check(class, &bucket, limit).await)
                }
                // Counted; the handler answers 401 from the key cache (rejections are cached).
                Err(domain::keys::KeyError::Rejected(_)) => (
                    Class::AuthFailures,
                    cfg.auth_failures,
                    rl.check(Class::AuthFailures, &ip, cfg.auth_failures).await,
                ),
                // The database failed: the handler reports it as it always did.
                Err(domain::keys::KeyError::Db(_)) => return next.run(req).await,
            }
        }
    };
    if !decision.allowed {
        return throttled(class, limit, decision);
    }
    let mut resp = next.run(req).await;
    set_headers(resp.headers_mut(), limit, decision);
    resp
}

fn is_read(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Reads and writes per API key id (never the key itself); test helpers per merchant.
fn keyed_bucket(method: &Method, test_helpers: bool, p: &Principal) -> (Class, String) {
    if test_helpers {
        (Class::TestHelpers, p.merchant_id.to_string())
    } else if is_read(method) {
        (Class::Reads, p.key_id.to_string())
    } else {
        (Class::Writes, p.key_id.to_string())
    }
}

/// The class's limit, with the merchant's override (`ops merchants settings`) when set.
async fn merchant_limit(state: &HttpState, class: Class, p: &Principal) -> RateLimit {
    let base = class.configured(state.limiter.config());
    let Ok(m) = state.merchant(p.merchant_id).await else {
        return base;
    };
    let over = match class {
        Class::Reads => m.rate_limit_reads,
        Class::Writes => m.rate_limit_writes,
        Class::TestHelpers => m.rate_limit_test_helpers,
        Class::Public | Class::AuthFailures | Class::LoginAccount | Class::LoginIp => None,
    };
    match over.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0) {
        Some(limit) => RateLimit { limit, ..base },
        None => base,
    }
}

/// 429 `rate_limited` with `Retry-After` (whole seconds, rounded up) and the headers.
fn throttled(class: Class, limit: RateLimit, d: Decision) -> Response {
    let retry = ceil_secs(d.retry_after).max(1);
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
        format!(
            "too many requests: the {} limit of {} per {} s is used up; retry after {retry} s",
            class.as_str(),
            limit.limit,
            limit.period_secs
        ),
    );
    e.retry_after = Some(retry);
    let mut resp = e.into_response();
    set_headers(resp.headers_mut(), limit, d);
    resp
}

/// `RateLimit-Limit`, `-Remaining`, `-Reset` (seconds until the bucket is full again) and
/// `RateLimit-Policy` (`<limit>;w=<period>`).
fn set_headers(h: &mut HeaderMap, limit: RateLimit, d: Decision) {
    let mut put = |name: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    put(RATELIMIT_LIMIT, limit.limit.to_string());
    put(RATELIMIT_REMAINING, d.remaining.to_string());
    put(RATELIMIT_RESET, ceil_secs(d.reset).to_string());
    put(RATELIMIT_POLICY, format!("{};w={}", limit.limit, limit.period_secs));
}

/// The bucket key of the client's address: the socket peer, or the configured proxy header on a
/// connection from a trusted proxy. IPv6 clients are counted per /64 (what one host gets).
pub(crate) fn client_key(req: &Request, cfg: &RateLimitsConfig) -> String {
    match client_ip(req, cfg) {
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{}/64", Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        Some(IpAddr::V6(v6)) => v6.to_canonical().to_string(),
        Some(ip) => ip.to_string(),
        None => "unknown".to_owned(),
    }
}

pub fn client_ip(req: &Request, cfg: &RateLimitsConfig) -> Option<IpAddr> {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_canonical())?;
    let Some(header) = cfg.trusted_proxy_header.as_deref() else {
        return Some(peer);
    };
    let trusted = |ip: &IpAddr| cfg.trusted_proxies.iter().any(|n| n.contains(ip));
    if !trusted(&peer) {
        return Some(peer);
    }
    forwarded_client(req.headers(), header, trusted).or(Some(peer))
}

/// The rightmost address of the proxy header that is not a trusted proxy (addresses left of it
/// were written by the client and can be forged); the leftmost when all are trusted.
fn forwarded_client(h: &HeaderMap, header: &str, trusted: impl Fn(&IpAddr) -> bool) -> Option<IpAddr> {
    let hops: Vec<IpAddr> = h
        .get_all(header)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(parse_hop)
        .collect::<Option<Vec<_>>>()?;
    hops.iter().rev().find(|ip| !trusted(ip)).or(hops.first()).copied()
}

fn parse_hop(s: &str) -> Option<IpAddr> {
    let s = s.trim();
    s.parse::<IpAddr>().ok().or_else(|| s.parse::<SocketAddr>().ok().map(|a| a.ip())).map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_classified() {
        assert_eq!(route("/v1/currencies"), Route::Public);
        assert_eq!(route("/v1/rates"), Route::Public);
        assert_eq!(route("/checkout/0193/state"), Route::Public);
        assert_eq!(route("/v1/test/deposits"), Route::Keyed { test_helpers: true });
        assert_eq!(route("/v1/invoices"), Route::Keyed { test_helpers: false });
        for p in ["/health", "/ready", "/openapi.json", "/docs/"] {
            assert_eq!(route(p), Route::Unlimited, "{p}");
        }
    }

    #[test]
    fn the_proxy_header_is_read_right_to_left_skipping_trusted_proxies() {
        let nets: Vec<ipnet::IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let trusted = |ip: &IpAddr| nets.iter().any(|n| n.contains(ip));
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6, 203.0.113.7, 10.0.0.2"));
        assert_eq!(forwarded_client(&h, "x-forwarded-for", trusted), Some("203.0.113.7".parse().unwrap()));
        h.insert("x-forwarded-for", HeaderValue::from_static("10.1.1.1"));
        assert_eq!(forwarded_client(&h, "x-forwarded-for", trusted), Some("10.1.1.1".parse().unwrap()));
        h.insert("x-forwarded-for", HeaderValue::from_static("garbage"));
        assert_eq!(forwarded_client(&h, "x-forwarded-for", trusted), None);
    }
}
