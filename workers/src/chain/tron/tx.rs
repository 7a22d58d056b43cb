//! TRON transactions the hot wallet signs: a `TransferContract` (TRX) or a
//! `TriggerSmartContract` calling a TRC-20's `transfer(address,uint256)`, encoded as protobuf
//! (`protocol.Transaction`), identified by the SHA-256 of its `raw_data` and signed with
//! secp256k1 over that id (`r ‖ s ‖ 27 + recovery id`). Checked against TronWeb's output
//! (`workers/tests/fixtures/tron_vectors.js`).

use alloy_primitives::U256;
use sha2::{Digest, Sha256};

/// The version byte of a TRON account id on the wire.
const ADDRESS_PREFIX: u8 = 0x41;
/// `transfer(address,uint256)`.
const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// What a transaction does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// Send `sun` TRX to `to`.
    Trx { to: [u8; 20], sun: u64 },
    /// Call `contract`'s `transfer(to, units)`, burning at most `fee_limit` sun for energy.
    Trc20 { contract: [u8; 20], to: [u8; 20], units: U256, fee_limit: u64 },
}

/// A transaction's `raw_data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    pub owner: [u8; 20],
    pub call: Call,
    /// The block the transaction refers to (TaPoS): its height's low 16 bits and bytes 8..16
    /// of its id go into the transaction (a decoded transaction has only the low 16 bits).
    pub ref_block: u64,
    pub ref_block_hash: [u8; 8],
    /// After this time (ms) no block may include it.
    pub expiration_ms: u64,
    pub timestamp_ms: u64,
}

impl Raw {
    /// The protobuf of `raw_data`, fields in number order as java-tron and TronWeb write them.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        bytes_field(&mut out, 1, &(self.ref_block as u16).to_be_bytes());
        bytes_field(&mut out, 4, &self.ref_block_hash);
        varint_field(&mut out, 8, self.expiration_ms);
        bytes_field(&mut out, 11, &self.contract());
        varint_field(&mut out, 14, self.timestamp_ms);
        if let Call::Trc20 { fee_limit, .. } = self.call {
            varint_field(&mut out, 18, fee_limit);
        }
        out
    }

    fn contract(&self) -> Vec<u8> {
        let owner = wire_address(&self.owner);
        let (kind, name, value) = match &self.call {
            Call::Trx { to, sun } => {
                let mut v = Vec::new();
                bytes_field(&mut v, 1, &owner);
                bytes_field(&mut v, 2, &wire_address(to));
                varint_field(&mut v, 3, *sun);
                (1, "TransferContract", v)
            }
            Call::Trc20 { contract, to, units, .. } => {
                let mut v = Vec::new();
                bytes_field(&mut v, 1, &owner);
                bytes_field(&mut v, 2, &wire_address(contract));
                bytes_field(&mut v, 4, &transfer_data(to, *units));
                (31, "TriggerSmartContract", v)
            }
        };
        let mut any = Vec::new();
        bytes_field(&mut any, 1, format!("type.googleapis.com/protocol.{name}").as_bytes());
        bytes_field(&mut any, 2, &value);
        let mut c = Vec::new();
        varint_field(&mut c, 1, kind);
        bytes_field(&mut c, 2, &any);
        c
    }

    /// The transaction id: SHA-256 of `raw_data`.
    pub fn id(&self) -> [u8; 32] {
        Sha256::digest(self.encode()).into()
    }
}

/// The signed transaction's protobuf (`raw_data` = 1, `signature` = 2), as
/// `/wallet/broadcasthex` takes it.
pub fn signed_bytes(raw: &Raw, signature: &[u8; 65]) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(&mut out, 1, &raw.encode());
    bytes_field(&mut out, 2, signature);
    out
}

/// Reads a signed transaction this module wrote (hex of [`signed_bytes`]): its `raw_data` and
/// signature.
pub fn decode(signed_hex: &str) -> Result<(Raw, [u8; 65]), String> {
    let bytes = hex::decode(signed_hex).map_err(|e| format!("not hex: {e}"))?;
    let top = fields(&bytes)?;
    let field = |n: u64| top.iter().find(|(k, _)| *k == n).and_then(|(_, v)| v.bytes());
    let signature = field(2).and_then(|s| <[u8; 65]>::try_from(s).ok()).ok_or("no 65-byte signature")?;
    let raw = fields(field(1).ok_or("no raw_data")?)?;
    let (mut block, mut hash, mut expiration, mut timestamp, mut fee_limit, mut contract) =
        (None, None, None, None, 0, None);
    for (n, value) in raw {
        match (n, value) {
            (1, Value::Bytes(b)) => block = <[u8; 2]>::try_from(b).ok().map(u16::from_be_bytes),
            (4, Value::Bytes(b)) => hash = <[u8; 8]>::try_from(b).ok(),
            (8, Value::Varint(v)) => expiration = Some(v),
            (11, Value::Bytes(b)) => contract = Some(b),
            (14, Value::Varint(v)) => timestamp = Some(v),
            (18, Value::Varint(v)) => fee_limit = v,
            (n, _) => return Err(format!("unexpected raw_data field {n}")),
        }
    }
    let contract = fields(contract.ok_or("no contract")?)?;
    let kind = contract.iter().find_map(|(n, v)| match (n, v) {
        (1, Value::Varint(k)) => Some(*k),
        _ => None,
    });
    let any = fields(contract.iter().find(|(n, _)| *n == 2).and_then(|(_, v)| v.bytes()).ok_or("no parameter")?)?;
    let value = fields(any.iter().find(|(n, _)| *n == 2).and_then(|(_, v)| v.bytes()).ok_or("no parameter value")?)?;
    let get = |n: u64| value.iter().find(|(k, _)| *k == n).map(|(_, v)| v);
    let address = |n: u64| -> Result<[u8; 20], String> {
        let b = get(n).and_then(Value::bytes).ok_or(format!("no address field {n}"))?;
        match b.split_first() {
            Some((&ADDRESS_PREFIX, id)) => id.try_into().map_err(|_| "an address that is not 21 bytes".into()),
            _ => Err("an address without the 0x41 prefix".into()),
        }
    };
    let call = match kind {
        Some(1) => {
            let sun = match get(3) {
                Some(Value::Varint(v)) => *v,
                _ => return Err("no amount".into()),
            };
            Call::Trx { to: address(2)?, sun }
        }
        Some(31) => {
            let data = get(4).and_then(Value::bytes).ok_or("no call data")?;
            if data.len() != 68 || data[..4] != TRANSFER_SELECTOR || data[4..16] != [0u8; 12] {
                return Err("not a transfer(address,uint256) call".into());
            }
            let to: [u8; 20] = data[16..36].try_into().expect("20 bytes");
            Call::Trc20 { contract: address(2)?, to, units: U256::from_be_slice(&data[36..]), fee_limit }
        }
        other => return Err(format!("contract type {other:?}")),
    };
    let block = block.ok_or("no ref_block_bytes")?;
    Ok((
        Raw {
            owner: address(1)?,
            call,
            ref_block: u64::from(block),
            ref_block_hash: hash.ok_or("no ref_block_hash")?,
            expiration_ms: expiration.ok_or("no expiration")?,
            timestamp_ms: timestamp.ok_or("no timestamp")?,
        },
        signature,
    ))
}

/// `transfer(to, units)` call data (the address as its 20 bytes, left-padded).
fn transfer_data(to: &[u8; 20], units: U256) -> Vec<u8> {
    let mut data = TRANSFER_SELECTOR.to_vec();
    data.extend([0u8; 12]);
    data.extend(to);
    data.extend(units.to_be_bytes::<32>());
    data
}

fn wire_address(id: &[u8; 20]) -> [u8; 21] {
    let mut a = [0u8; 21];
    a[0] = ADDRESS_PREFIX;
    a[1..].copy_from_slice(id);
    a
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, b.len() as u64);
    out.extend(b);
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Value<'a> {
    fn bytes(&self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            Value::Varint(_) => None,
        }
    }
}

/// The top-level fields of a protobuf message (varints and length-delimited only).
fn fields(mut b: &[u8]) -> Result<Vec<(u64, Value<'_>)>, String> {
    fn read_varint(b: &mut &[u8]) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first().ok_or("cut short")?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = read_varint(&mut b)?;
        let value = match key & 7 {
            0 => Value::Varint(read_varint(&mut b)?),
            2 => {
                let n = usize::try_from(read_varint(&mut b)?).map_err(|_| "length")?;
                if n > b.len() {
                    return Err("cut short".into());
                }
                let (v, rest) = b.split_at(n);
                b = rest;
                Value::Bytes(v)
            }
            w => return Err(format!("wire type {w}")),
        };
        out.push((key >> 3, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From `workers/tests/fixtures/tron_vectors.js` (TronWeb 6.5): key, owner, raw_data and txID
    /// and signature of a TRX transfer and of a USDT transfer.
    const KEY: &str = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
    const OWNER: &str = "70997970c51812dc3a010c7d01b50e0d17dc79c8";
    const TO: &str = "fd4f6f7d1ad5dfd4b4e4bd0a8f6a2e8b6b3b1d2c";
    const USDT: &str = "a614f803b6fd780986a42c78ec9c7f77e6ded13c";
    const TRX_RAW: &str = "0A02303922080123456789ABCDEF40C0F99CFFBC315A67080112630A2D747970652E676F6F676C65617069732E636F6D2F70726F746F636F6C2E5472616E73666572436F6E747261637412320A154170997970C51812DC3A010C7D01B50E0D17DC79C8121541FD4F6F7D1AD5DFD4B4E4BD0A8F6A2E8B6B3B1D2C1887AD4B7080D095FFBC31";
    const TRX_ID: &str = "4486106a2180f39bd68720cacf149b219621d32fccee1971874e89f22582c48b";
    const TRX_SIG: &str = "63a1592ac47177d46cee88e8c2dce3ebc89c27cbd66e7b5aa0c1c1ddba81b690434e5b8fee9713352a31a5d78739e231bad624d6571a12abd9090013f51cee8e1C";
    const TRC20_RAW: &str = "0A02303922080123456789ABCDEF40C0F99CFFBC315AAE01081F12A9010A31747970652E676F6F676C65617069732E636F6D2F70726F746F636F6C2E54726967676572536D617274436F6E747261637412740A154170997970C51812DC3A010C7D01B50E0D17DC79C8121541A614F803B6FD780986A42C78EC9C7F77E6DED13C2244A9059CBB000000000000000000000000FD4F6F7D1AD5DFD4B4E4BD0A8F6A2E8B6B3B1D2C00000000000000000000000000000000000000000000000000000000018519607080D095FFBC31900180E1EB17";
    const TRC20_ID: &str = "946fff0f1783c0b42d027046eb2b809faf2a4bc2d0a0c40be51a7083209481a8";
    const TRC20_SIG: &str = "604b8bb2a1be26b7a0d1745c075ad80f86fe677a4e3c68b0d28210a9a5f3cab753dd4b7c434f475566963e0eedea707cfd5cce39fd1eebe46279ee39d04f9f501B";

    fn id20(h: &str) -> [u8; 20] {
        hex::decode(h).unwrap().try_into().unwrap()
    }

    fn raw(call: Call) -> Raw {
        Raw {
            owner: id20(OWNER),
            call,
            ref_block: 0x0001_3039,
            ref_block_hash: hex::decode("0123456789abcdef").unwrap().try_into().unwrap(),
            expiration_ms: 1_700_000_120_000,
            timestamp_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn trx_and_trc20_transfers_are_encoded_identified_and_signed_as_tronweb_does() {
        let key: alloy_signer_local::PrivateKeySigner = KEY.parse().unwrap();
        let trc20 =
            Call::Trc20 { contract: id20(USDT), to: id20(TO), units: U256::from(25_500_000u64), fee_limit: 50_000_000 };
        for (call, want_raw, want_id, want_sig) in [
            (Call::Trx { to: id20(TO), sun: 1_234_567 }, TRX_RAW, TRX_ID, TRX_SIG),
            (trc20, TRC20_RAW, TRC20_ID, TRC20_SIG),
        ] {
            let raw = raw(call);
            assert_eq!(hex::encode_upper(raw.encode()), want_raw);
            assert_eq!(hex::encode(raw.id()), want_id);
            let sig = super::super::wallet::sign_id(&key, &raw.id());
            assert_eq!(hex::encode(sig), want_sig.to_ascii_lowercase());
            // Read back: only the height's low 16 bits travel.
            let (back, back_sig) = decode(&hex::encode(signed_bytes(&raw, &sig))).unwrap();
            assert_eq!((back.ref_block, back_sig), (0x3039, sig));
            assert_eq!(Raw { ref_block: raw.ref_block, ..back }, raw);
        }
        assert!(decode("0a02").is_err(), "cut short");
    }
}
