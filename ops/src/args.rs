//! Parsers of command-line values shared by several commands.

use chrono::{DateTime, Utc};

/// `90s`, `30m`, `6h`, `2d`.
pub fn parse_span(s: &str) -> Result<chrono::Duration, String> {
    let s = s.trim();
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = n.parse().map_err(|_| format!("expected a number and a unit (s, m, h, d), got {s:?}"))?;
    match unit {
        "s" => Ok(chrono::Duration::seconds(n)),
        "m" => Ok(chrono::Duration::minutes(n)),
        "h" => Ok(chrono::Duration::hours(n)),
        "d" => Ok(chrono::Duration::days(n)),
        _ => Err(format!("expected a unit s, m, h or d, got {s:?}")),
    }
}

pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.to_utc());
    }
    parse_span(s).map(|age| Utc::now() - age).map_err(|e| format!("{e}, or an RFC 3339 time"))
}
