//! Dashboard passwords: argon2id (the crate's defaults: 19 MiB, 2 passes), stored as the PHC
//! string, verified in constant time by the crate.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

use super::UserError;

pub const MIN_LEN: usize = 12;
pub const MAX_LEN: usize = 256;

/// The length rule (NIST SP 800-63B: length, no composition rules).
pub fn check_policy(password: &str) -> Result<(), UserError> {
    let n = password.chars().count();
    if n < MIN_LEN {
        return Err(UserError::WeakPassword(format!("must be at least {MIN_LEN} characters")));
    }
    if n > MAX_LEN {
        return Err(UserError::WeakPassword(format!("must be at most {MAX_LEN} characters")));
    }
    Ok(())
}

/// The PHC string of `password`, computed on the blocking pool: argon2 takes tens of
/// milliseconds of CPU, which would stall every request sharing the async worker thread.
pub async fn hash(password: &str) -> Result<String, UserError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || hash_now(&password))
        .await
        .map_err(|e| UserError::Internal(format!("argon2 task: {e}")))?
}

/// Whether `password` matches `phc`, checked on the blocking pool (as [`hash`]).
pub async fn verify(password: &str, phc: &str) -> bool {
    let (password, phc) = (password.to_owned(), phc.to_owned());
    tokio::task::spawn_blocking(move || verify_now(&password, &phc)).await.unwrap_or(false)
}

/// Spends the time of one verification for a login whose account does not exist, so the
/// answer's timing does not tell which e-mail addresses have accounts.
pub async fn verify_nothing(password: &str) {
    let password = password.to_owned();
    let _ = tokio::task::spawn_blocking(move || {
        static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let phc = DUMMY.get_or_init(|| hash_now("paygate-no-such-account").unwrap_or_default());
        verify_now(&password, phc)
    })
    .await;
}

fn hash_now(password: &str) -> Result<String, UserError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| UserError::Internal(format!("argon2: {e}")))
}

fn verify_now(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_are_argon2id_and_verify() {
        let h = hash("correct horse battery").await.unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify("correct horse battery", &h).await);
        assert!(!verify("correct horse batterY", &h).await);
        assert!(!verify("x", "not a phc string").await);
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_policy("short").is_err());
        assert!(check_policy("twelve chars").is_ok());
    }
}
