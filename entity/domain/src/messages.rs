//! Every text a payer reads, in one file per language: the checkout page's strings and the
//! payment-request e-mail's. `{name}` placeholders are filled by the page's script and by
//! [`fill`]. A translation is another such file.

/// English, the only language so far.
pub const EN: &str = include_str!("messages/en.json");

/// The English text of `key` with `{name}` placeholders replaced; the key itself when missing.
pub fn fill(key: &str, args: &[(&str, &str)]) -> String {
    let messages: serde_json::Value = serde_json::from_str(EN).expect("messages/en.json is JSON");
    let mut text = messages[key].as_str().unwrap_or(key).to_owned();
    for (name, value) in args {
        text = text.replace(&format!("{{{name}}}"), value);
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_filled() {
        let s = super::fill("email_subject", &[("merchant", "Acme"), ("amount", "10"), ("currency", "EUR")]);
        assert!(s.contains("Acme") && s.contains("10 EUR") && !s.contains('{'), "{s}");
        assert_eq!(super::fill("no_such_key", &[]), "no_such_key");
    }
}
