//! The second factor: RFC 6238 TOTP (SHA-1, 6 digits, 30 s steps, one step of skew either
//! way), as every authenticator app reads it from an `otpauth://` link or its QR code. A code
//! is accepted once: the user's `totp_last_step` only moves forward, with a guarded update, so
//! the same code (or an older one) is refused even when two API processes see it at once.

use chrono::{DateTime, Utc};
use entity::dashboard_user;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use totp_rs::{Algorithm, Secret, Totp};

use super::UserError;

pub const ISSUER: &str = "paygate";

/// A fresh 160-bit secret, base32 (what the person types into an app by hand).
pub fn new_secret() -> String {
    Secret::from(rand::random::<[u8; 20]>()).to_base32()
}

fn totp(secret_b32: &str, account: &str) -> Result<Totp, UserError> {
    let secret = Secret::try_from_base32(secret_b32.trim()).map_err(|_| UserError::BadCode)?;
    totp_rs::Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(6)
        .with_skew(1)
        .with_step_duration(30)
        .with_secret(secret)
        .with_issuer(Some(ISSUER))
        .with_account_name(account)
        .build()
        .map_err(|e| UserError::Internal(format!("totp: {e}")))
}

/// The `otpauth://totp/...` link an authenticator app enrols from.
pub fn otpauth_url(secret_b32: &str, account: &str) -> Result<String, UserError> {
    totp(secret_b32, account)?.to_url().map_err(|e| UserError::Internal(format!("totp url: {e}")))
}

/// The time step a code belongs to (within one step of `now`), or `None`.
pub fn matching_step(secret_b32: &str, code: &str, now: DateTime<Utc>) -> Option<i64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let secs = u64::try_from(now.timestamp()).ok()?;
    totp(secret_b32, "-").ok()?.check(&code, secs).and_then(|s| i64::try_from(s).ok())
}

/// The code of the step `now` falls in (tests and the enrolment page's self-check).
pub fn code_at(secret_b32: &str, now: DateTime<Utc>) -> Result<String, UserError> {
    let secs = u64::try_from(now.timestamp()).map_err(|_| UserError::BadCode)?;
    Ok(totp(secret_b32, "-")?.generate(secs).to_string())
}

/// Takes the code for `user`: it must match the user's secret and be of a later step than any
/// code accepted before. The step is recorded with `UPDATE … WHERE totp_last_step < step`, so
/// of two requests carrying the same code only one is accepted.
pub async fn consume(
    db: &impl ConnectionTrait,
    user: &dashboard_user::Model,
    secret_b32: &str,
    code: &str,
    now: DateTime<Utc>,
) -> Result<(), UserError> {
    let step = matching_step(secret_b32, code, now).ok_or(UserError::BadCode)?;
    let taken = dashboard_user::Entity::update_many()
        .col_expr(dashboard_user::Column::TotpLastStep, Expr::value(step))
        .filter(dashboard_user::Column::Id.eq(user.id))
        .filter(dashboard_user::Column::TotpLastStep.lt(step))
        .exec(db)
        .await?;
    if taken.rows_affected == 1 { Ok(()) } else { Err(UserError::BadCode) }
}

/// The step a secret's code at `now` would use (for a user's first `totp_last_step`).
pub fn step_at(now: DateTime<Utc>) -> i64 {
    now.timestamp().div_euclid(30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn rfc6238_sha1_vector() {
        // RFC 6238 appendix B: secret "12345678901234567890", T = 59 s -> 94287082 (8 digits);
        // its last 6 digits are the 6-digit code.
        let secret = Secret::from(*b"12345678901234567890").to_base32();
        let t = Utc.timestamp_opt(59, 0).unwrap();
        assert_eq!(code_at(&secret, t).unwrap(), "287082");
        assert_eq!(matching_step(&secret, "287082", t), Some(1));
        assert_eq!(matching_step(&secret, "287 082", t), Some(1));
        assert_eq!(matching_step(&secret, "000000", t), None);
    }

    #[test]
    fn one_step_of_skew_either_way() {
        let secret = new_secret();
        let now = Utc::now();
        let prev = code_at(&secret, now - chrono::Duration::seconds(30)).unwrap();
        let next = code_at(&secret, now + chrono::Duration::seconds(30)).unwrap();
        let old = code_at(&secret, now - chrono::Duration::seconds(90)).unwrap();
        assert!(matching_step(&secret, &prev, now).is_some());
        assert!(matching_step(&secret, &next, now).is_some());
        assert!(matching_step(&secret, &old, now).is_none_or(|s| s >= step_at(now) - 1), "a code three steps old");
        assert!(otpauth_url(&secret, "a@example.com").unwrap().starts_with("otpauth://totp/paygate:a%40example.com?"));
    }
}
