//! The language a payer reads the checkout page in: a `?lang=xx` query parameter (the page's
//! language links), else the best of the browser's `Accept-Language` (q-values honoured), else
//! English. Only the languages of `domain::messages::LANGUAGES`.

use domain::messages::LANGUAGES;
use serde::Deserialize;

/// The `?lang=` query parameter (any other parameter is ignored).
#[derive(Debug, Default, Deserialize)]
pub struct LangQuery {
    pub lang: Option<String>,
}

/// The code in `LANGUAGES` for a language tag's primary subtag (`de-AT` → `de`).
fn known(tag: &str) -> Option<&'static str> {
    let primary = tag.trim().split(['-', '_']).next()?.to_ascii_lowercase();
    LANGUAGES.iter().map(|(code, _)| *code).find(|code| *code == primary)
}

/// The page's language: `query` when it names a language we have, else the highest-weighted
/// language of `accept_language` that we have (the first of equal weights), else `en`.
pub fn pick(query: Option<&str>, accept_language: Option<&str>) -> &'static str {
    if let Some(code) = query.and_then(known) {
        return code;
    }
    let mut best: Option<(&'static str, f32)> = None;
    for item in accept_language.unwrap_or_default().split(',') {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or_default();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q.is_nan() || q <= 0.0 {
            continue;
        }
        if let Some(code) = known(tag)
            && best.is_none_or(|(_, b)| q > b)
        {
            best = Some((code, q));
        }
    }
    best.map_or("en", |(code, _)| code)
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn query_then_accept_language_then_english() {
        assert_eq!(pick(None, None), "en");
        assert_eq!(pick(None, Some("de-DE,de;q=0.9,en;q=0.8")), "de");
        assert_eq!(pick(None, Some("en;q=0.5, fr-CA;q=0.9, de;q=0.7")), "fr", "the highest q wins, not the first");
        assert_eq!(pick(None, Some("ja, pt-BR;q=0.4")), "pt", "unknown languages are skipped");
        assert_eq!(pick(None, Some("es;q=0, de;q=0.1")), "de", "q=0 means not acceptable");
        assert_eq!(pick(None, Some("it, nl")), "en");
        assert_eq!(pick(None, Some("*")), "en");
        assert_eq!(pick(Some("de"), Some("fr")), "de", "?lang= overrides the header");
        assert_eq!(pick(Some("ES"), None), "es");
        assert_eq!(pick(Some("xx"), Some("pt")), "pt", "an unknown ?lang= falls back to the header");
    }
}
