//! `[email]`: the SMTP server that sends payers their payment request (an invoice with
//! `payer_email`). Without `host`, nothing is sent and the webhook deliverer's start-up says so.

use serde::{Deserialize, Serialize};

use super::{ConfigError, Redacted, invalid};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum EmailTls {
    /// Plain SMTP (a relay on localhost or a test server).
    None,
    /// STARTTLS on the submission port (587): required, never downgraded.
    #[default]
    Starttls,
    /// Implicit TLS (SMTPS, port 465).
    Tls,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// SMTP server host name. Empty: payer e-mail is off.
    pub host: String,
    pub port: u16,
    pub tls: EmailTls,
    pub username: Option<String>,
    /// Never logged.
    pub password: Option<Redacted>,
    /// The sender, `Name <address>` or `address`.
    pub from: String,
    pub timeout_ms: u64,
    /// How often the deliverer looks for invoices whose e-mail is due.
    pub sweep_interval_ms: u64,
}

impl Default for EmailConfig {
    fn default() -> Self {
        EmailConfig {
            host: String::new(),
            port: 587,
            tls: EmailTls::Starttls,
            username: None,
            password: None,
            from: String::new(),
            timeout_ms: 10_000,
            sweep_interval_ms: 1_000,
        }
    }
}

impl EmailConfig {
    pub fn configured(&self) -> bool {
        !self.host.is_empty()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !self.configured() {
            return Ok(());
        }
        // Its syntax is checked by the mailer (lettre's `Mailbox`) when the deliverer starts.
        if !self.from.contains('@') {
            return invalid("email.from", "must be an e-mail address, or `Name <address>`");
        }
        if self.password.is_some() && self.username.is_none() {
            return invalid("email.username", "must be set with email.password");
        }
        if self.timeout_ms == 0 || self.sweep_interval_ms == 0 {
            return invalid("email", "timeout_ms and sweep_interval_ms must be at least 1");
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's own signature
mod tests {
    use super::super::Config;
    use super::EmailTls;

    #[test]
    fn email_is_optional_and_checked_when_set() {
        figment::Jail::expect_with(|jail| {
            assert!(!Config::load().unwrap().email.configured());
            jail.set_env("PAYGATE_EMAIL__HOST", "smtp.example.com");
            jail.set_env("PAYGATE_EMAIL__FROM", "not an address");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("email.from"), "{err}");
            jail.set_env("PAYGATE_EMAIL__FROM", "Acme Payments <pay@acme.example>");
            jail.set_env("PAYGATE_EMAIL__PASSWORD", "hunter2");
            let err = Config::load().unwrap_err().to_string();
            assert!(err.contains("email.username"), "{err}");
            jail.set_env("PAYGATE_EMAIL__USERNAME", "pay");
            jail.set_env("PAYGATE_EMAIL__TLS", "tls");
            let cfg = Config::load().unwrap();
            assert_eq!((cfg.email.tls, cfg.email.port), (EmailTls::Tls, 587));
            assert!(!format!("{:?}", cfg.email).contains("hunter2"));
            Ok(())
        });
    }
}
