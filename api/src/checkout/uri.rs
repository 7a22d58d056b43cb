//! Payment URIs for the checkout page's QR code, in each chain's usual form: BIP21 for bitcoin,
//! EIP-681 for EVM assets and tokens, Solana Pay, the `tron:` and `ripple:` forms wallets read.

use rust_decimal::Decimal;

use domain::chain::address::AddressFamily;
use domain::gates::{self, Gate};

/// `amount` in the gate's smallest unit (wei, ...), or `None` on overflow or sub-unit dust.
fn base_units(gate: &Gate, amount: Decimal) -> Option<String> {
    let scale = Decimal::from_i128_with_scale(10i128.checked_pow(gate.decimals)?, 0);
    let units = amount.checked_mul(scale)?;
    (units.fract().is_zero()).then(|| units.trunc().normalize().to_string())
}

/// The URI a wallet opens to pay `amount` of `gate`'s asset to `address` (with `tag`, for XRP).
pub fn payment_uri(gate: &Gate, address: &str, tag: Option<&str>, amount: Decimal) -> String {
    let amount_text = amount.normalize().to_string();
    match gate.family {
        AddressFamily::Bitcoin => format!("bitcoin:{address}?amount={amount_text}"),
        AddressFamily::Evm => {
            let chain = gates::evm_chain_id(gate).unwrap_or(1);
            let units = base_units(gate, amount).unwrap_or_default();
            match gates::token_contract(gate) {
                Some(token) => format!("ethereum:{token}@{chain}/transfer?address={address}&uint256={units}"),
                None => format!("ethereum:{address}@{chain}?value={units}"),
            }
        }
        AddressFamily::Tron => match gates::token_contract(gate) {
            Some(token) => format!("tron:{address}?token={token}&amount={amount_text}"),
            None => format!("tron:{address}?amount={amount_text}"),
        },
        AddressFamily::Solana => match gates::token_contract(gate) {
            Some(mint) => format!("solana:{address}?amount={amount_text}&spl-token={mint}"),
            None => format!("solana:{address}?amount={amount_text}"),
        },
        AddressFamily::Xrp => match tag {
            Some(t) => format!("ripple:{address}?dt={t}&amount={amount_text}"),
            None => format!("ripple:{address}?amount={amount_text}"),
        },
    }
}

/// The QR code of `data` as a standalone SVG document.
pub fn qr_svg(data: &str) -> Option<String> {
    let code = qrcode::QrCode::with_error_correction_level(data.as_bytes(), qrcode::EcLevel::M).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color<'_>>()
            .min_dimensions(240, 240)
            .quiet_zone(true)
            .dark_color(qrcode::render::svg::Color("#000000"))
            .light_color(qrcode::render::svg::Color("#ffffff"))
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn uri(gate: &str, address: &str, tag: Option<&str>, amount: &str) -> String {
        payment_uri(gates::find(gate).unwrap(), address, tag, Decimal::from_str(amount).unwrap())
    }

    #[test]
    fn each_family_uses_its_usual_form() {
        // EIP-681: native value in wei; tokens through transfer(address, uint256) in base units.
        let cases: &[(&str, &str, Option<&str>, &str, &str)] = &[
            ("bitcoin", "bc1qxyz", None, "0.0100", "bitcoin:bc1qxyz?amount=0.01"),
            ("ethereum", "0xabc", None, "1.5", "ethereum:0xabc@1?value=1500000000000000000"),
            ("base", "0xabc", None, "0.001", "ethereum:0xabc@8453?value=1000000000000000"),
            (
                "polygon_usdc",
                "0xabc",
                None,
                "12.34",
                "ethereum:0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359@137/transfer?address=0xabc&uint256=12340000",
            ),
            (
                "bsc_usdt",
                "0xabc",
                None,
                "1",
                "ethereum:0x55d398326f99059fF775485246999027B3197955@56/transfer?address=0xabc&uint256=1000000000000000000",
            ),
            ("tron", "TAbc", None, "10", "tron:TAbc?amount=10"),
            ("tron_usdt", "TAbc", None, "10", "tron:TAbc?token=TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t&amount=10"),
            (
                "solana_usdc",
                "So1",
                None,
                "5",
                "solana:So1?amount=5&spl-token=EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
            ),
            ("xrp", "rAbc", Some("42"), "20", "ripple:rAbc?dt=42&amount=20"),
        ];
        for (gate, address, tag, amount, expected) in cases {
            assert_eq!(uri(gate, address, *tag, amount), *expected, "{gate}");
        }
    }

    #[test]
    fn the_qr_code_is_an_svg() {
        let svg = qr_svg("bitcoin:bc1qxyz?amount=0.01").unwrap();
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{svg}");
    }
}
