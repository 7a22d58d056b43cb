//! `Amount`: an exact decimal money value as stored in the database.
//!
//! PostgreSQL stores it as `NUMERIC`. SQLite has no exact decimal type and sea-orm reads
//! `Decimal` back from SQLite through `f64`, which silently loses digits (18-decimal EVM
//! amounts). So on SQLite the column has TEXT affinity and this type decodes the text
//! exactly. Arithmetic on these columns is never done in SQL: the services read, compute
//! with checked `Decimal` arithmetic and write back inside a transaction.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use sea_orm::sea_query::{ArrayType, ColumnType, Nullable, ValueType, ValueTypeErr};
use sea_orm::{ColIdx, QueryResult, TryGetError, TryGetable, Value};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Amount(pub Decimal);

/// Why a decimal string is not an exact [`Amount`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseAmountError {
    /// Not a decimal number at all.
    Malformed,
    /// More significant digits (or a larger magnitude) than a `Decimal` holds exactly
    /// (28 significant digits): parsing would round or overflow, so it is refused.
    TooPrecise,
}

impl fmt::Display for ParseAmountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseAmountError::Malformed => f.write_str("is not a valid decimal"),
            ParseAmountError::TooPrecise => {
                f.write_str("has more significant digits than can be stored exactly (at most 28)")
            }
        }
    }
}

impl std::error::Error for ParseAmountError {}

impl Amount {
    pub const ZERO: Amount = Amount(Decimal::ZERO);

    pub fn new(d: Decimal) -> Self {
        Amount(d.normalize())
    }

    /// A fiat value: rounded half away from zero to exactly two decimals (`"60.00"`).
    pub fn fiat(d: Decimal) -> Self {
        let mut r = d.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
        r.rescale(2);
        Amount(r)
    }

    pub fn value(self) -> Decimal {
        self.0
    }

    /// Parses a decimal string exactly: a value that does not fit a `Decimal` without rounding
    /// (e.g. 30 significant digits) is an error, never silently rounded. Plain notation, or
    /// scientific notation as stored by some drivers.
    pub fn parse_exact(s: &str) -> Result<Amount, ParseAmountError> {
        let t = s.trim();
        let plain = !t.is_empty()
            && t.bytes()
                .enumerate()
                .all(|(i, b)| b.is_ascii_digit() || b == b'.' || (i == 0 && (b == b'-' || b == b'+')))
            && t.bytes().filter(|b| *b == b'.').count() <= 1
            && t.bytes().any(|b| b.is_ascii_digit());
        if plain {
            return Decimal::from_str_exact(t)
                .or_else(|_| match t.contains('.') {
                    // Trailing zeros of the fraction are not significant: `5.000…0` is 5.
                    true => Decimal::from_str_exact(t.trim_end_matches('0').trim_end_matches('.')),
                    false => Err(rust_decimal::Error::Underflow),
                })
                .map(Amount)
                .map_err(|_| ParseAmountError::TooPrecise);
        }
        if t.contains(['e', 'E']) {
            // Scientific notation: the mantissa must be exact too (`from_scientific` would round it).
            let mantissa = t.split(['e', 'E']).next().unwrap_or_default();
            if !mantissa.is_empty() && !mantissa.contains(['e', 'E']) {
                Amount::parse_exact(mantissa)?;
            }
            return Decimal::from_scientific(t).map(Amount).map_err(|_| ParseAmountError::TooPrecise);
        }
        Err(ParseAmountError::Malformed)
    }
}

impl FromStr for Amount {
    type Err = ParseAmountError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Amount::parse_exact(s)
    }
}

/// From a JSON string or number, exactly (see [`Amount::parse_exact`]).
impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Amount;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a decimal string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Amount, E> {
                Amount::parse_exact(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Amount, E> {
                Ok(Amount(Decimal::from(v)))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Amount, E> {
                Ok(Amount(Decimal::from(v)))
            }
        }
        d.deserialize_any(V)
    }
}

impl From<Decimal> for Amount {
    fn from(d: Decimal) -> Self {
        Amount(d)
    }
}

impl From<Amount> for Decimal {
    fn from(a: Amount) -> Self {
        a.0
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<Amount> for Value {
    fn from(a: Amount) -> Self {
        Value::Decimal(Some(a.0))
    }
}

impl Nullable for Amount {
    fn null() -> Value {
        Value::Decimal(None)
    }
}

impl ValueType for Amount {
    fn try_from(v: Value) -> Result<Self, ValueTypeErr> {
        match v {
            Value::Decimal(Some(d)) => Ok(Amount(d)),
            _ => Err(ValueTypeErr),
        }
    }

    fn type_name() -> String {
        "Amount".to_owned()
    }

    fn array_type() -> ArrayType {
        ArrayType::Decimal
    }

    fn column_type() -> ColumnType {
        ColumnType::Decimal(None)
    }
}

impl TryGetable for Amount {
    fn try_get_by<I: ColIdx>(res: &QueryResult, idx: I) -> Result<Self, TryGetError> {
        if res.try_as_sqlite_row().is_some() {
            let text = String::try_get_by(res, idx)?;
            Amount::parse_exact(&text).map_err(|e| {
                TryGetError::DbErr(sea_orm::DbErr::Type(format!("column {idx:?} holds {text:?}, which {e}")))
            })
        } else {
            Decimal::try_get_by(res, idx).map(Amount)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_normalizes_and_display_is_exact() {
        let a = Amount::new(Decimal::from_str("1.123456789012345678000").unwrap());
        assert_eq!(a.to_string(), "1.123456789012345678");
        assert_eq!(Amount(Decimal::new(6000, 2)).to_string(), "60.00");
        assert_eq!(Amount::fiat(Decimal::new(60, 0)).to_string(), "60.00");
        assert_eq!(Amount::fiat(Decimal::new(27777778, 6)).to_string(), "27.78");
        assert_eq!(Amount::fiat(Decimal::new(1005, 3)).to_string(), "1.01");
        let a = Amount(Decimal::from_str("1.123456789012345678000").unwrap());
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"1.123456789012345678000\"");
        assert_eq!(serde_json::from_str::<Amount>("\"1.123456789012345678000\"").unwrap(), a);
    }

    #[test]
    fn parsing_is_exact_never_rounded() {
        assert_eq!(Amount::parse_exact("12.50").unwrap().to_string(), "12.50");
        assert_eq!(Amount::parse_exact("-3").unwrap().to_string(), "-3");
        assert_eq!(Amount::parse_exact("1.5e-7").unwrap(), Amount(Decimal::new(15, 8)));
        // 28 significant digits fit; 30 would be rounded by `Decimal::from_str`, so are refused.
        assert!(Amount::parse_exact("1.000000000000000000000000001").is_ok());
        let zeros = format!("5.{}", "0".repeat(48));
        assert_eq!(
            Amount::parse_exact(&zeros).unwrap(),
            Amount(Decimal::from(5)),
            "trailing zeros are not significant"
        );
        for too_precise in [
            "1.00000000000000000000000000001",
            "0.000000000000000000000000000001",
            "123456789012345678901234567890",
            "3.14159265358979323846264338327950",
        ] {
            assert_eq!(Amount::parse_exact(too_precise), Err(ParseAmountError::TooPrecise), "{too_precise}");
            assert!(too_precise.parse::<Amount>().is_err());
            assert!(serde_json::from_str::<Amount>(&format!("\"{too_precise}\"")).is_err(), "{too_precise}");
        }
        for malformed in ["", "abc", "1.2.3", "--1", "1,5"] {
            assert_eq!(Amount::parse_exact(malformed), Err(ParseAmountError::Malformed), "{malformed:?}");
        }
    }
}
