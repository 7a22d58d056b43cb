//! Outbound safety of webhook requests. A merchant chooses the URL, so a careless or hostile
//! one must not make the deliverer reach into the operator's network: targets on loopback,
//! private, link-local (cloud metadata), shared, multicast and reserved addresses are refused,
//! both when the URL is saved and when each connection is made (the resolver below checks the
//! addresses the name resolves to at that moment, so DNS rebinding does not get around it).
//! Live endpoints must use https. `webhooks.allow_insecure_targets` lifts both rules for
//! development and tests.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use entity::Environment;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::config::WebhooksConfig;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("must be an absolute http or https URL")]
    NotHttp,
    #[error("live endpoints must use https")]
    HttpsRequired,
    #[error("must not contain a user name or password")]
    Credentials,
    #[error("must have a host")]
    NoHost,
    #[error("{0} resolves to a blocked address {1} ({2})")]
    Blocked(String, IpAddr, &'static str),
    #[error("{0} does not resolve: {1}")]
    Unresolvable(String, String),
}

/// Why `ip` may not be a webhook target, or `None` when it may.
pub fn blocked_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        return Some("cloud metadata");
    }
    if a == 0 {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    if ip.is_private() {
        return Some("private");
    }
    if ip.is_link_local() {
        return Some("link-local");
    }
    if a == 100 && (64..128).contains(&b) {
        return Some("shared address space");
    }
    if (a == 192 && b == 0 && c == 0) || (a == 198 && (b == 18 || b == 19)) {
        return Some("reserved");
    }
    if a == 192 && b == 88 && c == 99 {
        return Some("6to4 relay anycast");
    }
    if (a == 192 && b == 0 && c == 2) || (a == 198 && b == 51 && c == 100) || (a == 203 && b == 0 && c == 113) {
        return Some("documentation");
    }
    if ip.is_multicast() {
        return Some("multicast");
    }
    if a >= 240 {
        return Some("reserved");
    }
    None
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return blocked_v4(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // Addresses that embed an IPv4 address: NAT64 (64:ff9b::/96), 6to4 (2002::/16) and the
    // deprecated IPv4-compatible form (::/96).
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return blocked_v4(Ipv4Addr::from(u32::from(s[6]) << 16 | u32::from(s[7])));
    }
    // Translation and tunnelling prefixes that reach IPv4 or another network through a gateway
    // the operator may run: local-use NAT64 (64:ff9b:1::/48, RFC 8215), IPv4-translated
    // (::ffff:0:0:0/96, RFC 2765) and Teredo (2001::/32, whose client address is obfuscated).
    if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        return Some("NAT64 local-use");
    }
    if s[..5] == [0, 0, 0, 0, 0xffff] && s[5] == 0 {
        return Some("IPv4-translated");
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("Teredo");
    }
    if s[0] == 0x2002 {
        return blocked_v4(Ipv4Addr::from(u32::from(s[1]) << 16 | u32::from(s[2])));
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] {
        return Some("IPv4-compatible");
    }
    if s[0] & 0xfe00 == 0xfc00 {
        return Some("private (unique local)");
    }
    if s[0] & 0xffc0 == 0xfe80 || s[0] & 0xffc0 == 0xfec0 {
        return Some("link-local");
    }
    if s[0] & 0xff00 == 0xff00 {
        return Some("multicast");
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("documentation");
    }
    None
}

/// The rules for one deployment.
#[derive(Debug, Clone, Copy)]
pub struct TargetPolicy {
    pub allow_insecure: bool,
}

impl TargetPolicy {
    pub fn from_config(cfg: &WebhooksConfig) -> TargetPolicy {
        TargetPolicy { allow_insecure: cfg.allow_insecure_targets }
    }

    /// The URL's form: scheme, credentials, host, and an IP literal host's address. Names are
    /// checked by [`TargetPolicy::check_resolution`] and again at every connection.
    pub fn check_url(&self, url: &url::Url, env: Environment) -> Result<(), TargetError> {
        match url.scheme() {
            "https" => {}
            "http" if self.allow_insecure || env == Environment::Test => {}
            "http" => return Err(TargetError::HttpsRequired),
            _ => return Err(TargetError::NotHttp),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TargetError::Credentials);
        }
        let host = url.host().ok_or(TargetError::NoHost)?;
        let ip = match host {
            url::Host::Ipv4(v4) => IpAddr::V4(v4),
            url::Host::Ipv6(v6) => IpAddr::V6(v6),
            url::Host::Domain(_) => return Ok(()),
        };
        self.check_addr(&ip.to_string(), ip)
    }

    fn check_addr(&self, host: &str, ip: IpAddr) -> Result<(), TargetError> {
        match blocked_reason(ip) {
            Some(why) if !self.allow_insecure => Err(TargetError::Blocked(host.to_owned(), ip, why)),
            _ => Ok(()),
        }
    }

    /// Resolves the URL's host now and checks every address (used when the URL is saved).
    pub async fn check_resolution(&self, url: &url::Url) -> Result<(), TargetError> {
        let Some(url::Host::Domain(name)) = url.host() else { return Ok(()) };
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs = tokio::net::lookup_host((name, port))
            .await
            .map_err(|e| TargetError::Unresolvable(name.to_owned(), e.to_string()))?;
        for a in addrs {
            self.check_addr(name, a.ip())?;
        }
        Ok(())
    }
}

/// The resolver of the webhook client: resolves with the system resolver and refuses the name
/// when any of its addresses is blocked.
#[derive(Debug, Clone)]
struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let policy = TargetPolicy { allow_insecure: false };
            for a in &addrs {
                policy.check_addr(&host, a.ip())?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The HTTP client of the deliverer: the attempt timeout, no redirects (a 3xx is a failed
/// attempt), no proxy from the environment, and the guarded resolver unless insecure targets
/// are allowed.
pub fn client(cfg: &WebhooksConfig) -> reqwest::Result<reqwest::Client> {
    let mut b = reqwest::Client::builder()
        .timeout(Duration::from_millis(cfg.timeout_ms))
        .connect_timeout(Duration::from_millis(cfg.timeout_ms))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("paygate-webhooks/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(256)
        .pool_idle_timeout(Duration::from_secs(60));
    if !cfg.allow_insecure_targets {
        b = b.dns_resolver(GuardedResolver);
    }
    b.build()
}

/// An error with its causes, `a: b: c` (reqwest's own message hides the cause).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_internal_ranges_and_allows_public_ones() {
        for s in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.100.100.200",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "ff02::1",
        ] {
            assert!(blocked_reason(ip(s)).is_some(), "{s} must be blocked");
        }
        for s in ["93.184.216.34", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(blocked_reason(ip(s)), None, "{s} must be allowed");
        }
        assert_eq!(blocked_reason(ip("169.254.169.254")), Some("cloud metadata"));
    }

    #[test]
    fn blocks_translation_and_tunnel_prefixes() {
        for (s, why) in [
            ("64:ff9b:1::1", "NAT64 local-use"),
            ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "NAT64 local-use"),
            ("::ffff:0:808:808", "IPv4-translated"),
            ("::ffff:0:7f00:1", "IPv4-translated"),
            ("2001::1", "Teredo"),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
            ("192.88.99.1", "6to4 relay anycast"),
            ("192.88.99.255", "6to4 relay anycast"),
        ] {
            assert_eq!(blocked_reason(ip(s)), Some(why), "{s}");
        }
        // Neighbours of those ranges stay allowed.
        for s in ["64:ff9b:2::1", "2400:cb00::1", "2001:4860:4860::8888", "192.88.98.1", "192.88.100.1"] {
            assert_eq!(blocked_reason(ip(s)), None, "{s} must be allowed");
        }
    }

    #[test]
    fn url_rules_per_environment() {
        let strict = TargetPolicy { allow_insecure: false };
        let u = |s: &str| url::Url::parse(s).unwrap();
        assert_eq!(strict.check_url(&u("http://shop.example/h"), Environment::Live), Err(TargetError::HttpsRequired));
        assert!(strict.check_url(&u("http://shop.example/h"), Environment::Test).is_ok());
        assert!(strict.check_url(&u("https://shop.example/h"), Environment::Live).is_ok());
        assert_eq!(strict.check_url(&u("ftp://shop.example/h"), Environment::Test), Err(TargetError::NotHttp));
        assert_eq!(strict.check_url(&u("https://a:b@shop.example/"), Environment::Live), Err(TargetError::Credentials));
        // IP literals, including the decimal form the URL parser normalises.
        for s in ["https://127.0.0.1/", "https://2130706433/", "https://[::1]/", "https://169.254.169.254/latest"] {
            assert!(matches!(strict.check_url(&u(s), Environment::Live), Err(TargetError::Blocked(..))), "{s}");
        }
        let dev = TargetPolicy { allow_insecure: true };
        assert!(dev.check_url(&u("http://127.0.0.1:9/"), Environment::Live).is_ok());
    }

    #[tokio::test]
    async fn resolution_is_checked_at_save_and_at_connect() {
        let strict = TargetPolicy { allow_insecure: false };
        let err = strict.check_resolution(&url::Url::parse("https://localhost:1/").unwrap()).await.unwrap_err();
        assert!(matches!(err, TargetError::Blocked(..)), "{err}");
        // At connect time: the client's resolver refuses the name before any connection.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = client(&WebhooksConfig::default()).unwrap();
        let err = client.post(format!("http://localhost:{port}/")).send().await.unwrap_err();
        let chain = super::error_chain(&err);
        assert!(chain.contains("blocked address"), "{chain}");
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "nothing may have connected");
    }
}
