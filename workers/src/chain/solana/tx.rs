//! Solana payout transactions in the wire format (legacy message): a system transfer of SOL,
//! or an SPL token payout (the recipient's associated token account created idempotently, then
//! `TransferChecked` from the hot wallet's own), one ed25519 signature, and the reader of that
//! format. Pinned byte for byte to solders 0.29, whose LiteSVM executed each vector against the
//! real System, SPL Token and Associated Token Account programs
//! (`workers/tests/fixtures/solana_vectors.py`).

use sha2::{Digest, Sha256};

/// A 32-byte account address.
pub type Pubkey = [u8; 32];

pub const SYSTEM_PROGRAM: Pubkey = [0; 32];
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
pub const ASSOCIATED_TOKEN_PROGRAM: &str = "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL";
pub const COMPUTE_BUDGET_PROGRAM: &str = "ComputeBudget111111111111111111111111111111";

/// System program instruction `Transfer`.
const SYSTEM_TRANSFER: u32 = 2;
/// Associated Token Account program instruction `CreateIdempotent`.
const ATA_CREATE_IDEMPOTENT: u8 = 1;
/// SPL Token instruction `TransferChecked`.
const TOKEN_TRANSFER_CHECKED: u8 = 12;
/// SPL Token instruction `CloseAccount`.
const TOKEN_CLOSE_ACCOUNT: u8 = 9;
/// Compute Budget program instructions.
const SET_COMPUTE_UNIT_LIMIT: u8 = 2;
const SET_COMPUTE_UNIT_PRICE: u8 = 3;

/// A base58 address's 32 bytes.
pub fn pubkey(address: &str) -> Option<Pubkey> {
    bs58::decode(address).into_vec().ok()?.try_into().ok()
}

pub fn address(key: &Pubkey) -> String {
    bs58::encode(key).into_string()
}

/// `find_program_address`: the first `seeds ‖ [bump]` from 255 down whose
/// `sha256(seeds ‖ bump ‖ program ‖ "ProgramDerivedAddress")` is not an ed25519 point.
pub fn program_address(seeds: &[&[u8]], program: &Pubkey) -> Pubkey {
    for bump in (0..=255u8).rev() {
        let mut h = Sha256::new();
        for seed in seeds {
            h.update(seed);
        }
        h.update([bump]);
        h.update(program);
        h.update(b"ProgramDerivedAddress");
        let candidate: Pubkey = h.finalize().into();
        if curve25519_dalek::edwards::CompressedEdwardsY(candidate).decompress().is_none() {
            return candidate;
        }
    }
    unreachable!("a bump below 256 is found with overwhelming probability")
}

fn program(address: &str) -> Pubkey {
    pubkey(address).expect("a program id constant")
}

/// The associated token account of `owner` for `mint` (SPL Token program).
pub fn associated_token_account(owner: &Pubkey, mint: &Pubkey) -> Pubkey {
    program_address(&[owner, &program(TOKEN_PROGRAM), mint], &program(ASSOCIATED_TOKEN_PROGRAM))
}

/// What a payout transaction does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payment {
    /// `lamports` to `to`.
    Sol { to: Pubkey, lamports: u64 },
    /// `units` of `mint` (`decimals`) to the associated token account of `owner`.
    Spl { mint: Pubkey, decimals: u8, owner: Pubkey, units: u64 },
    /// A deposit address's sweep, the fee payer (the hot wallet) paying every fee: all `units`
    /// of `mint` from `from`'s associated token account to `to`'s (created when missing, the
    /// fee payer paying its rent), then `from`'s token account closed, its rent to the fee
    /// payer. `from` signs too.
    SplSweep { mint: Pubkey, decimals: u8, from: Pubkey, to: Pubkey, units: u64 },
}

/// A priority fee: the compute units the transaction may use and the price of each, in
/// micro-lamports (`SetComputeUnitLimit`, `SetComputeUnitPrice`, first in the message). It
/// costs `ceil(unit_limit × micro_lamports / 10^6)` lamports on top of the signature fee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub unit_limit: u32,
    pub micro_lamports: u64,
}

impl Priority {
    /// The lamports it adds to the fee.
    pub fn lamports(&self) -> u64 {
        let micro = u128::from(self.unit_limit) * u128::from(self.micro_lamports);
        u64::try_from(micro.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

/// Compute units a payout transaction is given: a SOL transfer uses about 450 with the budget
/// instructions; a USDC payout that creates the recipient's token account about 30,000.
/// Checked on the real programs in LiteSVM by the vectors.
pub fn unit_limit(payment: &Payment) -> u32 {
    match payment {
        Payment::Sol { .. } => 1_000,
        Payment::Spl { .. } | Payment::SplSweep { .. } => 60_000,
    }
}

/// An account an instruction uses.
#[derive(Debug, Clone, Copy)]
struct Meta {
    key: Pubkey,
    signer: bool,
    writable: bool,
}

struct Instruction {
    program: Pubkey,
    accounts: Vec<Meta>,
    data: Vec<u8>,
}

fn meta(key: Pubkey, signer: bool, writable: bool) -> Meta {
    Meta { key, signer, writable }
}

fn instructions(payer: &Pubkey, payment: &Payment, priority: Option<Priority>) -> Vec<Instruction> {
    let mut out = Vec::new();
    if let Some(p) = priority {
        let budget = program(COMPUTE_BUDGET_PROGRAM);
        let mut limit = vec![SET_COMPUTE_UNIT_LIMIT];
        limit.extend_from_slice(&p.unit_limit.to_le_bytes());
        let mut price = vec![SET_COMPUTE_UNIT_PRICE];
        price.extend_from_slice(&p.micro_lamports.to_le_bytes());
        out.push(Instruction { program: budget, accounts: Vec::new(), data: limit });
        out.push(Instruction { program: budget, accounts: Vec::new(), data: price });
    }
    out.extend(payment_instructions(payer, payment));
    out
}

fn payment_instructions(payer: &Pubkey, payment: &Payment) -> Vec<Instruction> {
    match payment {
        Payment::Sol { to, lamports } => {
            let mut data = SYSTEM_TRANSFER.to_le_bytes().to_vec();
            data.extend_from_slice(&lamports.to_le_bytes());
            vec![Instruction {
                program: SYSTEM_PROGRAM,
                accounts: vec![meta(*payer, true, true), meta(*to, false, true)],
                data,
            }]
        }
        Payment::Spl { mint, decimals, owner, units } => {
            let token = program(TOKEN_PROGRAM);
            let (source, destination) = (associated_token_account(payer, mint), associated_token_account(owner, mint));
            let mut data = vec![TOKEN_TRANSFER_CHECKED];
            data.extend_from_slice(&units.to_le_bytes());
            data.push(*decimals);
            vec![
                Instruction {
                    program: program(ASSOCIATED_TOKEN_PROGRAM),
                    accounts: vec![
                        meta(*payer, true, true),
                        meta(destination, false, true),
                        meta(*owner, false, false),
                        meta(*mint, false, false),
                        meta(SYSTEM_PROGRAM, false, false),
                        meta(token, false, false),
                    ],
                    data: vec![ATA_CREATE_IDEMPOTENT],
                },
                Instruction {
                    program: token,
                    accounts: vec![
                        meta(source, false, true),
                        meta(*mint, false, false),
                        meta(destination, false, true),
                        meta(*payer, true, false),
                    ],
                    data,
                },
            ]
        }
        Payment::SplSweep { mint, decimals, from, to, units } => {
            let mut out = payment_instructions(
                payer,
                &Payment::Spl { mint: *mint, decimals: *decimals, owner: *to, units: *units },
            );
            let source = associated_token_account(from, mint);
            // The transfer's authority is the deposit address, not the fee payer.
            out[1].accounts[0] = meta(source, false, true);
            out[1].accounts[3] = meta(*from, true, false);
            out.push(Instruction {
                program: program(TOKEN_PROGRAM),
                accounts: vec![meta(source, false, true), meta(*payer, false, true), meta(*from, true, false)],
                data: vec![TOKEN_CLOSE_ACCOUNT],
            });
            out
        }
    }
}

/// Solana's compact-u16 length prefix.
fn compact(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The message `payer` signs: the fee payer first, then signers (writable before read-only),
/// then the other accounts (writable before read-only), each group in byte order, as the
/// Solana SDK compiles it; every instruction's accounts and program as indices into that list.
pub fn message(payer: &Pubkey, payment: &Payment, priority: Option<Priority>, blockhash: &[u8; 32]) -> Vec<u8> {
    let ixs = instructions(payer, payment, priority);
    let mut metas: std::collections::BTreeMap<Pubkey, (bool, bool)> = std::collections::BTreeMap::new();
    for ix in &ixs {
        metas.entry(ix.program).or_default();
        for a in &ix.accounts {
            let m = metas.entry(a.key).or_default();
            m.0 |= a.signer;
            m.1 |= a.writable;
        }
    }
    metas.remove(payer);
    let group =
        |signer: bool, writable: bool| metas.iter().filter(move |(_, m)| **m == (signer, writable)).map(|(k, _)| *k);
    let keys: Vec<Pubkey> = std::iter::once(*payer)
        .chain(group(true, true))
        .chain(group(true, false))
        .chain(group(false, true))
        .chain(group(false, false))
        .collect();
    let signed_readonly = group(true, false).count();
    let unsigned_readonly = group(false, false).count();
    let index = |k: &Pubkey| keys.iter().position(|x| x == k).expect("every key listed") as u8;

    let mut out =
        vec![(1 + group(true, true).count() + signed_readonly) as u8, signed_readonly as u8, unsigned_readonly as u8];
    compact(&mut out, keys.len());
    for k in &keys {
        out.extend_from_slice(k);
    }
    out.extend_from_slice(blockhash);
    compact(&mut out, ixs.len());
    for ix in &ixs {
        out.push(index(&ix.program));
        compact(&mut out, ix.accounts.len());
        out.extend(ix.accounts.iter().map(|a| index(&a.key)));
        compact(&mut out, ix.data.len());
        out.extend_from_slice(&ix.data);
    }
    out
}

/// The wire transaction: one signature, then the message.
pub fn signed(message: &[u8], signature: &[u8; 64]) -> Vec<u8> {
    signed_by(message, &[*signature])
}

/// The wire transaction: the signatures in the order of the message's signer keys (the fee
/// payer first), then the message.
pub fn signed_by(message: &[u8], signatures: &[[u8; 64]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 64 * signatures.len() + message.len());
    compact(&mut out, signatures.len());
    for signature in signatures {
        out.extend_from_slice(signature);
    }
    out.extend_from_slice(message);
    out
}

/// An instruction read back: (program, accounts, data), the keys resolved.
pub type DecodedInstruction = (Pubkey, Vec<Pubkey>, Vec<u8>);

/// A transaction read back from the wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub signatures: Vec<[u8; 64]>,
    /// The signed bytes.
    pub message: Vec<u8>,
    /// Signers among `keys`: the first `required_signatures`.
    pub required_signatures: u8,
    pub keys: Vec<Pubkey>,
    pub blockhash: [u8; 32],
    pub instructions: Vec<DecodedInstruction>,
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("truncated transaction".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn compact(&mut self) -> Result<usize, String> {
        let mut n = 0usize;
        for shift in [0, 7, 14] {
            let b = self.take(1)?[0];
            n |= usize::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err("a compact-u16 longer than 3 bytes".into())
    }
}

/// Reads a legacy transaction (versioned messages are not ours).
pub fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    let mut r = Reader(bytes);
    let signatures = (0..r.compact()?)
        .map(|_| r.take(64).map(|s| s.try_into().expect("64 bytes")))
        .collect::<Result<Vec<[u8; 64]>, _>>()?;
    let message = r.0.to_vec();
    let header = r.take(3)?;
    if header[0] & 0x80 != 0 {
        return Err("a versioned message".into());
    }
    let keys = (0..r.compact()?)
        .map(|_| r.take(32).map(|k| k.try_into().expect("32 bytes")))
        .collect::<Result<Vec<Pubkey>, _>>()?;
    let key = |i: u8| keys.get(usize::from(i)).copied().ok_or_else(|| format!("account index {i} out of range"));
    let blockhash = r.take(32)?.try_into().expect("32 bytes");
    let mut instructions = Vec::new();
    for _ in 0..r.compact()? {
        let program = key(r.take(1)?[0])?;
        let n = r.compact()?;
        let accounts = r.take(n)?.iter().map(|i| key(*i)).collect::<Result<Vec<_>, _>>()?;
        let n = r.compact()?;
        instructions.push((program, accounts, r.take(n)?.to_vec()));
    }
    if !r.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(Decoded { signatures, message, required_signatures: header[0], keys, blockhash, instructions })
}

impl Decoded {
    /// The compute budget instructions first in the message, and the rest.
    fn split_budget(&self) -> (&[DecodedInstruction], &[DecodedInstruction]) {
        let budget = program(COMPUTE_BUDGET_PROGRAM);
        let n = self.instructions.iter().take_while(|(p, _, _)| *p == budget).count();
        self.instructions.split_at(n)
    }

    /// The priority fee it pays (`None`: none set).
    pub fn priority(&self) -> Option<Priority> {
        let (mut limit, mut price) = (None, None);
        for (_, _, data) in self.split_budget().0 {
            match data.split_first() {
                Some((&SET_COMPUTE_UNIT_LIMIT, rest)) => limit = rest.try_into().ok().map(u32::from_le_bytes),
                Some((&SET_COMPUTE_UNIT_PRICE, rest)) => price = rest.try_into().ok().map(u64::from_le_bytes),
                _ => {}
            }
        }
        Some(Priority { unit_limit: limit?, micro_lamports: price? })
    }

    /// The payment a payout transaction of ours makes (`None`: not one of our shapes).
    pub fn payment(&self) -> Option<Payment> {
        match self.split_budget().1 {
            [(p, accounts, data)] if *p == SYSTEM_PROGRAM && data.len() == 12 && accounts.len() == 2 => {
                (data[..4] == SYSTEM_TRANSFER.to_le_bytes()).then(|| Payment::Sol {
                    to: accounts[1],
                    lamports: u64::from_le_bytes(data[4..].try_into().expect("8 bytes")),
                })
            }
            [(ata, create, _), (token, accounts, data)]
                if *ata == program(ASSOCIATED_TOKEN_PROGRAM)
                    && *token == program(TOKEN_PROGRAM)
                    && create.len() == 6
                    && accounts.len() == 4
                    && data.len() == 10
                    && data[0] == TOKEN_TRANSFER_CHECKED =>
            {
                Some(Payment::Spl {
                    mint: accounts[1],
                    decimals: data[9],
                    owner: create[2],
                    units: u64::from_le_bytes(data[1..9].try_into().expect("8 bytes")),
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use ed25519_dalek::{Signer, SigningKey};
    use serde_json::Value;

    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../../tests/fixtures/solana_vectors.json")).unwrap()
    }

    fn key(v: &Value) -> SigningKey {
        let bytes: Vec<u8> = v["keypair"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
        SigningKey::from_bytes(&bytes[..32].try_into().unwrap())
    }

    #[test]
    fn associated_token_accounts_are_derived_as_the_spl_programs_do() {
        for a in vectors()["associated_token_accounts"].as_array().unwrap() {
            let (owner, mint) =
                (pubkey(a["owner"].as_str().unwrap()).unwrap(), pubkey(a["mint"].as_str().unwrap()).unwrap());
            assert_eq!(address(&associated_token_account(&owner, &mint)), a["address"].as_str().unwrap());
        }
    }

    #[test]
    fn payout_transactions_match_solders_byte_for_byte() {
        let v = vectors();
        let key = key(&v);
        let payer = key.verifying_key().to_bytes();
        assert_eq!(address(&payer), v["hot_wallet"].as_str().unwrap());
        let mint = pubkey(v["mint"].as_str().unwrap()).unwrap();
        for t in v["vectors"].as_array().unwrap() {
            let to = pubkey(t["to"].as_str().unwrap()).unwrap();
            let units = t["units"].as_u64().unwrap();
            let payment = match t["kind"].as_str().unwrap() {
                "sol" => Payment::Sol { to, lamports: units },
                _ => Payment::Spl { mint, decimals: 6, owner: to, units },
            };
            let blockhash = pubkey(t["blockhash"].as_str().unwrap()).unwrap();
            let priority = (!t["priority"].is_null()).then(|| Priority {
                unit_limit: t["priority"]["unit_limit"].as_u64().unwrap() as u32,
                micro_lamports: t["priority"]["micro_lamports"].as_u64().unwrap(),
            });
            if let Some(p) = priority {
                assert_eq!(p.unit_limit, unit_limit(&payment), "the limits the vectors ran with");
            }
            let msg = message(&payer, &payment, priority, &blockhash);
            let sig = key.sign(&msg).to_bytes();
            let wire = signed(&msg, &sig);
            assert_eq!(base64::engine::general_purpose::STANDARD.encode(&wire), t["tx"].as_str().unwrap(), "{t}");
            assert_eq!(bs58::encode(sig).into_string(), t["signature"].as_str().unwrap());
            let back = decode(&wire).unwrap();
            assert_eq!((back.payment(), back.blockhash, back.keys[0]), (Some(payment), blockhash, payer));
            assert_eq!(back.priority(), priority);
            let fee = 5_000 + priority.map_or(0, |p| p.lamports());
            let rent = t["hot_wallet_lamports_spent"].as_u64().unwrap() - fee;
            assert!(rent == 0 || rent == 2_039_280 || rent == units, "{t}: spent = fee (+ rent or the SOL sent)");
            assert_eq!(back.message, msg);
        }
    }

    #[test]
    fn malformed_transactions_are_refused() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[1, 0, 0]).is_err());
        let v = vectors();
        let wire = base64::engine::general_purpose::STANDARD.decode(v["vectors"][0]["tx"].as_str().unwrap()).unwrap();
        assert!(decode(&wire[..wire.len() - 1]).is_err());
        let mut longer = wire.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}
