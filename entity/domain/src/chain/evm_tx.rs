//! What a signed EVM transaction says (nonce, fees), read without any key: the executor signs
//! (`workers::chain::evm`), the API and `ops` only read what was stored.

/// EIP-1559 fees per unit of gas, in the network's smallest unit (wei).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fees {
    pub max_fee_per_gas: u128,
    pub priority_fee_per_gas: u128,
}

/// The nonce and fees of a signed EIP-1559 transaction (`raw`: 0x-hex of its 2718 encoding).
pub fn signed_terms(raw: &str) -> Option<(u64, Fees)> {
    use alloy_consensus::TxEnvelope;
    use alloy_eips::eip2718::Decodable2718;
    let bytes = hex::decode(raw.trim_start_matches("0x")).ok()?;
    match TxEnvelope::decode_2718(&mut bytes.as_slice()).ok()? {
        TxEnvelope::Eip1559(signed) => {
            let tx = signed.tx();
            Some((
                tx.nonce,
                Fees { max_fee_per_gas: tx.max_fee_per_gas, priority_fee_per_gas: tx.max_priority_fee_per_gas },
            ))
        }
        _ => None,
    }
}
