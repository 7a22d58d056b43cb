//! Every text a payer reads, in one catalogue per language (`messages/<code>.json`, the same
//! keys in each): the checkout page's strings, its receipt's and the payment-request e-mail's.
//! `{name}` placeholders are filled by the page's script and by [`fill`] / [`fill_in`].
//!
//! A language is added with its file next to `en.json` and a row in [`LANGUAGES`]; the test
//! below holds every catalogue to exactly English's keys.

/// English: the fallback, and the catalogue every other one must match key for key.
pub const EN: &str = include_str!("messages/en.json");
pub const DE: &str = include_str!("messages/de.json");
pub const FR: &str = include_str!("messages/fr.json");
pub const ES: &str = include_str!("messages/es.json");
pub const PT: &str = include_str!("messages/pt.json");

/// Every language a payer can read, as (ISO 639-1 code, catalogue), English first.
pub const LANGUAGES: [(&str, &str); 5] = [("en", EN), ("de", DE), ("fr", FR), ("es", ES), ("pt", PT)];

/// The catalogue of `lang` (a code of [`LANGUAGES`]); English for any other.
pub fn catalogue(lang: &str) -> &'static str {
    LANGUAGES.iter().find(|(code, _)| *code == lang).map_or(EN, |(_, c)| c)
}

/// Each catalogue of [`LANGUAGES`], parsed once (a page or a receipt looks up a dozen texts).
static PARSED: std::sync::LazyLock<Vec<(&'static str, serde_json::Map<String, serde_json::Value>)>> =
    std::sync::LazyLock::new(|| {
        LANGUAGES
            .iter()
            .map(|(code, json)| (*code, serde_json::from_str(json).expect("a messages catalogue is a JSON object")))
            .collect()
    });

/// The English text of `key` with `{name}` placeholders replaced; the key itself when missing.
pub fn fill(key: &str, args: &[(&str, &str)]) -> String {
    fill_in("en", key, args)
}

/// The text of `key` in `lang` (English for an unknown language) with `{name}` placeholders
/// replaced; the key itself when missing.
pub fn fill_in(lang: &str, key: &str, args: &[(&str, &str)]) -> String {
    let messages = PARSED.iter().find(|(code, _)| *code == lang).map_or(&PARSED[0].1, |(_, m)| m);
    let mut text = messages.get(key).and_then(serde_json::Value::as_str).unwrap_or(key).to_owned();
    for (name, value) in args {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    text
}

/// `s` with the characters HTML gives a meaning escaped, for text and attribute values: every
/// page and e-mail that puts a catalogue text or a merchant's string into HTML goes through it.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn placeholders_are_filled() {
        let s = super::fill("email_subject", &[("merchant", "Acme"), ("amount", "10"), ("currency", "EUR")]);
        assert!(s.contains("Acme") && s.contains("10 EUR") && !s.contains('{'), "{s}");
        assert_eq!(super::fill("no_such_key", &[]), "no_such_key");
        assert_eq!(fill_in("de", "method_label", &[("asset", "USDT"), ("network", "Base")]), "USDT auf Base");
        assert_eq!(fill_in("xx", "title", &[]), "Payment", "an unknown language reads English");
    }

    fn placeholders(s: &str) -> BTreeSet<String> {
        s.split('{').skip(1).filter_map(|p| p.split_once('}').map(|(n, _)| n.to_owned())).collect()
    }

    /// Every catalogue has exactly English's keys, each a non-empty text with the same
    /// placeholders.
    #[test]
    fn every_catalogue_has_englishs_keys() {
        let en: serde_json::Map<String, serde_json::Value> = serde_json::from_str(EN).unwrap();
        for (code, text) in LANGUAGES {
            let m: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("messages/{code}.json: {e}"));
            let keys: BTreeSet<&String> = m.keys().collect();
            let want: BTreeSet<&String> = en.keys().collect();
            assert_eq!(keys, want, "messages/{code}.json has other keys than en.json");
            for (key, value) in &m {
                let v = value.as_str().unwrap_or_else(|| panic!("{code}.{key} is not a string"));
                assert!(!v.trim().is_empty(), "{code}.{key} is empty");
                assert_eq!(placeholders(v), placeholders(en[key].as_str().unwrap()), "{code}.{key}: placeholders");
            }
            assert_eq!(catalogue(code), text);
        }
    }
}
