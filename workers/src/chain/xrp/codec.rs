//! The XRP Ledger's binary format for the two transactions the hot wallet signs (a `Payment`
//! and a no-op `AccountSet` that takes a `Sequence` a refused payout leaves), their signing and
//! hashing, and the family seeds keys come from (secp256k1 `s…`, ed25519 `sEd…`). Checked
//! against xrpl-py's output (`workers/tests/fixtures/xrp_vectors.py`).
//!
//! Fields are written in canonical order (type code, then field code), as rippled requires:
//! `TransactionType`, `Flags`, `Sequence`, `DestinationTag`, `LastLedgerSequence`, `Amount`,
//! `Fee`, `SigningPubKey`, `TxnSignature`, `Account`, `Destination`.

use bitcoin::hashes::{Hash, hash160};
use bitcoin::secp256k1::{self, Message, PublicKey, Secp256k1, SecretKey, ecdsa};
use ed25519_dalek::Signer as _;
use sha2::{Digest, Sha512};

/// Prefix of the bytes a transaction's signature covers (`STX\0`).
const SIGNING_PREFIX: [u8; 4] = *b"STX\0";
/// Prefix of the bytes a transaction's hash covers (`TXN\0`).
const HASH_PREFIX: [u8; 4] = *b"TXN\0";
/// Version bytes of a family seed: secp256k1, ed25519.
const SECP256K1_SEED: &[u8] = &[0x21];
const ED25519_SEED: &[u8] = &[0x01, 0xE1, 0x4B];

/// The first half of SHA-512: the XRP Ledger's hash.
pub fn sha512_half(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha512::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()[..32].try_into().expect("32 bytes")
}

/// What a transaction does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Send `drops` to `destination` (with its tag).
    Payment { destination: [u8; 20], tag: Option<u32>, drops: u64 },
    /// Change nothing: only takes its `Sequence` (and pays its fee).
    AccountSet,
}

/// A transaction of the hot wallet, signed or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tx {
    pub kind: Kind,
    pub account: [u8; 20],
    pub sequence: u32,
    pub fee_drops: u64,
    pub last_ledger: u32,
    pub signing_pub_key: Vec<u8>,
    pub signature: Option<Vec<u8>>,
}

impl Tx {
    /// The binary form; `signed`: with `TxnSignature` (the signature covers the form without it).
    pub fn encode(&self, signed: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(200);
        let (type_code, payment) = match &self.kind {
            Kind::Payment { destination, tag, drops } => (0u16, Some((destination, tag, drops))),
            Kind::AccountSet => (3u16, None),
        };
        out.push(0x12); // TransactionType (UInt16, 2)
        out.extend(type_code.to_be_bytes());
        out.push(0x22); // Flags (UInt32, 2)
        out.extend(0u32.to_be_bytes());
        out.push(0x24); // Sequence (UInt32, 4)
        out.extend(self.sequence.to_be_bytes());
        if let Some((_, Some(tag), _)) = payment {
            out.push(0x2E); // DestinationTag (UInt32, 14)
            out.extend(tag.to_be_bytes());
        }
        out.extend([0x20, 0x1B]); // LastLedgerSequence (UInt32, 27)
        out.extend(self.last_ledger.to_be_bytes());
        if let Some((_, _, drops)) = payment {
            out.push(0x61); // Amount (Amount, 1)
            out.extend(xrp_amount(*drops));
        }
        out.push(0x68); // Fee (Amount, 8)
        out.extend(xrp_amount(self.fee_drops));
        out.push(0x73); // SigningPubKey (Blob, 3)
        push_vl(&mut out, &self.signing_pub_key);
        if let (true, Some(sig)) = (signed, &self.signature) {
            out.push(0x74); // TxnSignature (Blob, 4)
            push_vl(&mut out, sig);
        }
        out.push(0x81); // Account (AccountID, 1)
        push_vl(&mut out, &self.account);
        if let Some((destination, _, _)) = payment {
            out.push(0x83); // Destination (AccountID, 3)
            push_vl(&mut out, destination);
        }
        out
    }

    /// The bytes the signature covers.
    pub fn signing_bytes(&self) -> Vec<u8> {
        [&SIGNING_PREFIX[..], &self.encode(false)].concat()
    }

    /// The transaction's hash (uppercase hex), as rippled reports it.
    pub fn hash(&self) -> String {
        hex::encode_upper(sha512_half(&[&HASH_PREFIX, &self.encode(true)]))
    }

    /// The signed blob (uppercase hex), as `submit` takes it.
    pub fn blob(&self) -> String {
        hex::encode_upper(self.encode(true))
    }

    /// Reads a blob this module wrote (the fields above, nothing else).
    pub fn decode(blob: &str) -> Result<Tx, String> {
        let bytes = hex::decode(blob).map_err(|e| format!("not hex: {e}"))?;
        let mut r = Reader { bytes: &bytes, at: 0 };
        let (mut type_code, mut sequence, mut tag, mut last, mut amount, mut fee) =
            (None, None, None, None, None, None);
        let (mut key, mut sig, mut account, mut destination) = (None, None, None, None);
        while r.at < bytes.len() {
            let field = r.field()?;
            match field {
                (1, 2) => type_code = Some(u16::from_be_bytes(r.fixed()?)),
                (2, 2) => {
                    if u32::from_be_bytes(r.fixed()?) != 0 {
                        return Err("Flags other than 0".into());
                    }
                }
                (2, 4) => sequence = Some(u32::from_be_bytes(r.fixed()?)),
                (2, 14) => tag = Some(u32::from_be_bytes(r.fixed()?)),
                (2, 27) => last = Some(u32::from_be_bytes(r.fixed()?)),
                (6, 1) => amount = Some(drops_of(r.fixed()?)?),
                (6, 8) => fee = Some(drops_of(r.fixed()?)?),
                (7, 3) => key = Some(r.vl()?.to_vec()),
                (7, 4) => sig = Some(r.vl()?.to_vec()),
                (8, 1) => account = Some(r.account()?),
                (8, 3) => destination = Some(r.account()?),
                (t, f) => return Err(format!("unexpected field (type {t}, field {f})")),
            }
        }
        let kind = match (type_code, amount, destination) {
            (Some(0), Some(drops), Some(destination)) => Kind::Payment { destination, tag, drops },
            (Some(3), None, None) => Kind::AccountSet,
            other => return Err(format!("not a Payment or AccountSet of the hot wallet: {other:?}")),
        };
        let missing = |what: &str| format!("no {what}");
        Ok(Tx {
            kind,
            account: account.ok_or_else(|| missing("Account"))?,
            sequence: sequence.ok_or_else(|| missing("Sequence"))?,
            fee_drops: fee.ok_or_else(|| missing("Fee"))?,
            last_ledger: last.ok_or_else(|| missing("LastLedgerSequence"))?,
            signing_pub_key: key.ok_or_else(|| missing("SigningPubKey"))?,
            signature: sig,
        })
    }
}

/// A native XRP amount: bit 63 clear (not an issued currency), bit 62 set (positive), drops.
fn xrp_amount(drops: u64) -> [u8; 8] {
    (drops | 0x4000_0000_0000_0000).to_be_bytes()
}

fn drops_of(b: [u8; 8]) -> Result<u64, String> {
    let v = u64::from_be_bytes(b);
    if v & 0xC000_0000_0000_0000 != 0x4000_0000_0000_0000 {
        return Err("an amount that is not positive native XRP".into());
    }
    Ok(v & !0x4000_0000_0000_0000)
}

/// Length-prefixed bytes (every blob here is under 193 bytes: a one-byte length).
fn push_vl(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(bytes.len() < 193);
    out.push(bytes.len() as u8);
    out.extend(bytes);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len()).ok_or("blob cut short")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// A field header: (type code, field code).
    fn field(&mut self) -> Result<(u8, u8), String> {
        let b = self.take(1)?[0];
        let (mut t, mut f) = (b >> 4, b & 0x0F);
        if t == 0 {
            t = self.take(1)?[0];
        }
        if f == 0 {
            f = self.take(1)?[0];
        }
        Ok((t, f))
    }

    fn vl(&mut self) -> Result<&'a [u8], String> {
        let n = self.take(1)?[0];
        if n > 192 {
            return Err("a blob longer than 192 bytes".into());
        }
        self.take(n as usize)
    }

    fn account(&mut self) -> Result<[u8; 20], String> {
        self.vl()?.try_into().map_err(|_| "an account id that is not 20 bytes".to_owned())
    }
}

/// A hot wallet key, from its family seed.
pub enum Keypair {
    Secp256k1 { secret: SecretKey, public: PublicKey },
    Ed25519(ed25519_dalek::SigningKey),
}

impl Keypair {
    /// The key of a family seed (`s…`: secp256k1 with the XRP Ledger's root/account derivation,
    /// account 0; `sEd…`: ed25519, the seed's SHA-512 half as private key).
    pub fn from_seed(seed: &str) -> Result<Keypair, String> {
        let bytes = bs58::decode(seed.trim())
            .with_alphabet(bs58::Alphabet::RIPPLE)
            .with_check(None)
            .into_vec()
            .map_err(|_| "not an XRP Ledger family seed (base58 `s…`)".to_owned())?;
        if bytes.len() == 19 && bytes.starts_with(ED25519_SEED) {
            let key = sha512_half(&[&bytes[3..]]);
            return Ok(Keypair::Ed25519(ed25519_dalek::SigningKey::from_bytes(&key)));
        }
        if bytes.len() != 17 || !bytes.starts_with(SECP256K1_SEED) {
            return Err("not an XRP Ledger family seed (`s…` or `sEd…`)".into());
        }
        let secp = Secp256k1::signing_only();
        let root = scalar(&bytes[1..]);
        let root_public = PublicKey::from_secret_key(&secp, &root).serialize();
        let account = scalar(&[&root_public[..], &0u32.to_be_bytes()].concat());
        let secret = root
            .add_tweak(&secp256k1::Scalar::from(account))
            .map_err(|_| "the seed derives no valid key".to_owned())?;
        Ok(Keypair::Secp256k1 { secret, public: PublicKey::from_secret_key(&secp, &secret) })
    }

    /// `SigningPubKey`: 33 bytes (ed25519 keys prefixed with `0xED`).
    pub fn public_key(&self) -> Vec<u8> {
        match self {
            Keypair::Secp256k1 { public, .. } => public.serialize().to_vec(),
            Keypair::Ed25519(k) => [&[0xED][..], k.verifying_key().as_bytes()].concat(),
        }
    }

    /// The account id: RIPEMD-160 of SHA-256 of the public key.
    pub fn account_id(&self) -> [u8; 20] {
        account_id(&self.public_key())
    }

    /// Signs `tx` (its `SigningPubKey` set to this key's).
    pub fn sign(&self, mut tx: Tx) -> Tx {
        tx.signing_pub_key = self.public_key();
        tx.signature = None;
        let message = tx.signing_bytes();
        tx.signature = Some(match self {
            Keypair::Secp256k1 { secret, .. } => {
                let digest = Message::from_digest(sha512_half(&[&message]));
                // libsecp256k1 signs deterministically (RFC 6979) with a low S: canonical.
                Secp256k1::signing_only().sign_ecdsa(&digest, secret).serialize_der().to_vec()
            }
            Keypair::Ed25519(k) => k.sign(&message).to_bytes().to_vec(),
        });
        tx
    }
}

/// The account id of a public key.
pub fn account_id(public_key: &[u8]) -> [u8; 20] {
    hash160::Hash::hash(public_key).to_byte_array()
}

/// Whether `tx`'s signature is valid for its `SigningPubKey`, which belongs to its `Account`.
pub fn verify(tx: &Tx) -> bool {
    let (Some(sig), true) = (&tx.signature, account_id(&tx.signing_pub_key) == tx.account) else { return false };
    let message = tx.signing_bytes();
    match tx.signing_pub_key.split_first() {
        Some((0xED, key)) => {
            let (Ok(key), Ok(sig)) = (<[u8; 32]>::try_from(key), <[u8; 64]>::try_from(sig.as_slice())) else {
                return false;
            };
            ed25519_dalek::VerifyingKey::from_bytes(&key)
                .is_ok_and(|k| k.verify_strict(&message, &ed25519_dalek::Signature::from_bytes(&sig)).is_ok())
        }
        _ => {
            let (Ok(key), Ok(sig)) = (PublicKey::from_slice(&tx.signing_pub_key), ecdsa::Signature::from_der(sig))
            else {
                return false;
            };
            let digest = Message::from_digest(sha512_half(&[&message]));
            Secp256k1::verification_only().verify_ecdsa(&digest, &sig, &key).is_ok()
        }
    }
}

/// The first SHA-512 half of `input ‖ n` (n = 0, 1, …) that is a valid secp256k1 secret key.
fn scalar(input: &[u8]) -> SecretKey {
    (0u32..)
        .find_map(|n| SecretKey::from_slice(&sha512_half(&[input, &n.to_be_bytes()])).ok())
        .expect("a valid scalar within a few tries")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESTINATION: &str = "rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe";

    /// (seed, public key, classic address, the Payment's blob and hash, the AccountSet's blob
    /// and hash), from `workers/tests/fixtures/xrp_vectors.py` (xrpl-py 4).
    const VECTORS: [(&str, &str, &str, &str, &str, &str, &str); 2] = [
        (
            "sn3nxiW7v8KXzPzAqzyHXbSSKNuN9",
            "039543A0D3004CDA0904A09FB3710251C652D69EA338589279BC849D47A7B019A1",
            "rMCcNuTcajgw7YTgBy1sys3b89QqjUrMpH",
            "120000220000000024000000072EFFFFFFFF201B055D4A9461400000000012D68768400000000000000C7321039543A0D3004CDA0904A09FB3710251C652D69EA338589279BC849D47A7B019A174473045022100CAACAA924735BF66C9003F1CD4112D9255CC053CD21C7F51400D298CC736FE8E0220359F13B0262651FD4599B01E6ACF791136234726CAC496428AE34D30E45E91098114E2AFBD269D7DA5E2B9931CCBD62FAB5118A366188314F667B0CA50CC7709A220B0561B85E53A48461FA8",
            "47D7385DDD47E3785D129EA826C46A0BFBDBD46B5F7B84C3CD7C3E041DE6D6FC",
            "12000322000000002400000008201B055D4A9568400000000000000F7321039543A0D3004CDA0904A09FB3710251C652D69EA338589279BC849D47A7B019A174473045022100A989E39897282287B6A7C6F6F579714BD34C893106A0F21CD1E79726E51D648702206A1020B376070DED4839CB6316F641ADA9DB8FE572BD2E71FA52DC35B4A99C788114E2AFBD269D7DA5E2B9931CCBD62FAB5118A36618",
            "00626C47C1583A2E2D5DB6AA91536A091DA156EE11764C0C04E67CDC1188C552",
        ),
        (
            "sEdTM1uX8pu2do5XvTnutH6HsouMaM2",
            "EDA57EBBCB502C2009EFE17229E8DC865DCCB192C52D7888D624DC9EBADDB815F0",
            "rG31cLyErnqeVj2eomEjBZtq7PYaupGYzL",
            "120000220000000024000000072EFFFFFFFF201B055D4A9461400000000012D68768400000000000000C7321EDA57EBBCB502C2009EFE17229E8DC865DCCB192C52D7888D624DC9EBADDB815F07440A7095B81A76011BD24F2008DBD65EF79AE50489C2D96A7348564B845402AE69E468ECCEFB6116E8F7374E0DB3606C8B7F3F49FDBA3731E504B1D4E974A0ECB008114A6070B8A1822E3322676A99F0C804EE2D15B82708314F667B0CA50CC7709A220B0561B85E53A48461FA8",
            "E944F4A67393188673CEEBA6F8ABBF5C3D6FD8D0589127B0FFFCF6699CE6B15B",
            "12000322000000002400000008201B055D4A9568400000000000000F7321EDA57EBBCB502C2009EFE17229E8DC865DCCB192C52D7888D624DC9EBADDB815F07440E89A50C73946C5BD35FDAD93D03C3F615C0665B904A1612D4837EF1E4AF11F19CD9F5BFC8A1B65495CBB330AAACF738A87362CD1C094D320A1C621D378225B0F8114A6070B8A1822E3322676A99F0C804EE2D15B8270",
            "718801AEF555AA931FA2EE46EC90C6EE9565EE6920F1C0A70F8CC25DE4A1063E",
        ),
    ];

    fn destination() -> [u8; 20] {
        domain::chain::address::xrp::account_id_of(DESTINATION).unwrap()
    }

    #[test]
    fn payments_and_account_sets_are_encoded_signed_and_hashed_as_xrpl_py_does() {
        for (seed, public, address, pay_blob, pay_hash, set_blob, set_hash) in VECTORS {
            let keys = Keypair::from_seed(seed).unwrap();
            assert_eq!(hex::encode_upper(keys.public_key()), public, "{seed}");
            assert_eq!(domain::chain::address::xrp::address_of(&keys.account_id()), address, "{seed}");
            let unsigned = |kind, sequence, fee_drops, last_ledger| Tx {
                kind,
                account: keys.account_id(),
                sequence,
                fee_drops,
                last_ledger,
                signing_pub_key: Vec::new(),
                signature: None,
            };
            let pay = Kind::Payment { destination: destination(), tag: Some(u32::MAX), drops: 1_234_567 };
            let signed = keys.sign(unsigned(pay, 7, 12, 90_000_020));
            assert_eq!((signed.blob().as_str(), signed.hash().as_str()), (pay_blob, pay_hash), "{seed}");
            assert!(verify(&signed));
            assert_eq!(Tx::decode(pay_blob).unwrap(), signed, "decoded back");
            let set = keys.sign(unsigned(Kind::AccountSet, 8, 15, 90_000_021));
            assert_eq!((set.blob().as_str(), set.hash().as_str()), (set_blob, set_hash), "{seed}");
            assert_eq!(Tx::decode(set_blob).unwrap(), set);
        }
    }

    #[test]
    fn a_tampered_or_foreign_signature_does_not_verify_and_odd_blobs_are_refused() {
        let keys = Keypair::from_seed(VECTORS[0].0).unwrap();
        let mut tx = Tx::decode(VECTORS[0].3).unwrap();
        assert!(verify(&tx));
        tx.sequence += 1;
        assert!(!verify(&tx), "the signature covers the Sequence");
        let other = Keypair::from_seed(VECTORS[1].0).unwrap();
        let mut foreign = other.sign(tx.clone());
        assert!(!verify(&foreign) || foreign.account != keys.account_id());
        foreign.account = keys.account_id();
        assert!(!verify(&foreign), "signed by a key that is not the account's");
        assert!(Tx::decode("12000022").is_err());
        assert!(Tx::decode(&VECTORS[0].3[..40]).is_err(), "cut short");
        assert!(Keypair::from_seed("rPT1Sjq2YGrBMTttX4GZHjKu9dyfzbpAYe").is_err(), "an address is no seed");
    }
}
