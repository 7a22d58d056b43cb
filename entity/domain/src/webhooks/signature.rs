//! `X-Service-Signature: t=<unix>,v1=<hex>` (spec 5.7): `v1` is the lowercase hex HMAC-SHA256,
//! keyed with the webhook secret, of `<t>.<raw body>`. During a secret rotation the header
//! carries one `v1` per active secret, and a receiver accepts the delivery when any of them
//! matches one of its secrets (compared in constant time) and `t` is within the tolerance of its
//! clock (300 s by the spec).
//!
//! `verify` is the function a merchant can copy: it depends only on `hmac`, `sha2`, `hex` and
//! `subtle`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The header's name.
pub const HEADER: &str = "X-Service-Signature";
/// The spec's timestamp window.
pub const TOLERANCE_SECS: u64 = 300;

/// Hex HMAC-SHA256 of `<t>.<body>` with `secret`.
pub fn v1(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    hex::encode(mac(secret, timestamp, body))
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m.finalize().into_bytes().to_vec()
}

/// The header value for a delivery signed at `timestamp` with every active secret (the current
/// one first; the previous one too while a rotation is in progress).
pub fn header(secrets: &[&[u8]], timestamp: i64, body: &[u8]) -> String {
    let mut h = format!("t={timestamp}");
    for s in secrets {
        h.push_str(",v1=");
        h.push_str(&v1(s, timestamp, body));
    }
    h
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("malformed signature header")]
    Malformed,
    #[error("timestamp outside the tolerance")]
    Stale,
    #[error("no signature matches")]
    Mismatch,
}

/// Verifies a delivery: `header` as received, the raw body bytes, the receiver's secrets (more
/// than one during a rotation), its current unix time and the tolerance in seconds.
pub fn verify(header: &str, body: &[u8], secrets: &[&[u8]], now: i64, tolerance_secs: u64) -> Result<(), VerifyError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => timestamp = Some(v.parse::<i64>().map_err(|_| VerifyError::Malformed)?),
            Some(("v1", v)) => signatures.push(hex::decode(v).map_err(|_| VerifyError::Malformed)?),
            // Other schemes (future versions) are ignored, as receivers should.
            Some(_) => {}
            None => return Err(VerifyError::Malformed),
        }
    }
    let t = timestamp.ok_or(VerifyError::Malformed)?;
    if signatures.is_empty() {
        return Err(VerifyError::Malformed);
    }
    if now.abs_diff(t) > tolerance_secs {
        return Err(VerifyError::Stale);
    }
    let mut ok = subtle::Choice::from(0u8);
    for secret in secrets {
        let expected = mac(secret, t, body);
        for sig in &signatures {
            // Constant time over the bytes; length differences are not secret.
            ok |= expected.ct_eq(sig);
        }
    }
    if bool::from(ok) { Ok(()) } else { Err(VerifyError::Mismatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test_0123456789abcdef";
    const BODY: &[u8] = br#"{"event":"invoice.paid","created_at":"2026-11-21T09:00:00Z","data":{"invoice_id":"01a1fd00-0000-7000-8000-000000000000"}}"#;
    const T: i64 = 1_795_251_600;

    #[test]
    fn matches_an_independent_reference() {
        // python3: hmac.new(secret, b"1795251600." + body, hashlib.sha256).hexdigest()
        assert_eq!(v1(SECRET, T, BODY), "d4bbe6a976c8c363d6808e157ceb9a2be6dcf9b3143118dbf40d14b997ac0960");
        assert_eq!(
            header(&[SECRET], T, BODY),
            "t=1795251600,v1=d4bbe6a976c8c363d6808e157ceb9a2be6dcf9b3143118dbf40d14b997ac0960"
        );
    }

    #[test]
    fn verifies_within_the_tolerance_only() {
        let h = header(&[SECRET], T, BODY);
        assert_eq!(verify(&h, BODY, &[SECRET], T, TOLERANCE_SECS), Ok(()));
        assert_eq!(verify(&h, BODY, &[SECRET], T + 300, TOLERANCE_SECS), Ok(()));
        assert_eq!(verify(&h, BODY, &[SECRET], T - 300, TOLERANCE_SECS), Ok(()));
        assert_eq!(verify(&h, BODY, &[SECRET], T + 301, TOLERANCE_SECS), Err(VerifyError::Stale));
        assert_eq!(verify(&h, BODY, &[SECRET], T - 301, TOLERANCE_SECS), Err(VerifyError::Stale));
    }

    #[test]
    fn rejects_tampering_and_wrong_secrets() {
        let h = header(&[SECRET], T, BODY);
        let mut body = BODY.to_vec();
        body[10] ^= 1;
        assert_eq!(verify(&h, &body, &[SECRET], T, 300), Err(VerifyError::Mismatch));
        assert_eq!(verify(&h, BODY, &[b"whsec_other"], T, 300), Err(VerifyError::Mismatch));
        // A timestamp changed after signing breaks the signature.
        let moved = h.replace("t=1795251600", "t=1795251601");
        assert_eq!(verify(&moved, BODY, &[SECRET], T, 300), Err(VerifyError::Mismatch));
        for bad in ["", "t=abc,v1=00", "v1=00", "t=1795251600", "t=1795251600,v1=zz", "garbage"] {
            assert_eq!(verify(bad, BODY, &[SECRET], T, 300), Err(VerifyError::Malformed), "{bad:?}");
        }
        // Unknown schemes are ignored.
        let extra = format!("{h},v0=deadbeef");
        assert_eq!(verify(&extra, BODY, &[SECRET], T, 300), Ok(()));
    }

    #[test]
    fn rotation_signs_with_both_secrets_and_either_verifies() {
        let new: &[u8] = b"whsec_new_secret";
        let h = header(&[new, SECRET], T, BODY);
        assert_eq!(h.matches(",v1=").count(), 2);
        // A receiver still on the old secret, one already on the new one, one holding both.
        assert_eq!(verify(&h, BODY, &[SECRET], T, 300), Ok(()));
        assert_eq!(verify(&h, BODY, &[new], T, 300), Ok(()));
        assert_eq!(verify(&h, BODY, &[new, SECRET], T, 300), Ok(()));
        // After the rotation ends only the new secret signs.
        let after = header(&[new], T, BODY);
        assert_eq!(verify(&after, BODY, &[SECRET], T, 300), Err(VerifyError::Mismatch));
    }

    /// The rotation vector the integration guide's Python and TypeScript verifiers are run on
    /// (`.ci/clients/webhook-rotation.json`) is exactly what this signer sends.
    #[test]
    fn the_published_rotation_vector_is_what_the_signer_sends() {
        let v: serde_json::Value =
            serde_json::from_str(include_str!("../../../../.ci/clients/webhook-rotation.json")).unwrap();
        let (old, new) = (v["old_secret"].as_str().unwrap(), v["new_secret"].as_str().unwrap());
        let body = v["body"].as_str().unwrap().as_bytes();
        let t = v["t"].as_i64().unwrap();
        assert_eq!(header(&[new.as_bytes(), old.as_bytes()], t, body), v["header"].as_str().unwrap());
    }
}
