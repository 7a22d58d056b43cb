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

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Amount(pub Decimal);

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
            Decimal::from_str(&text).or_else(|_| Decimal::from_scientific(&text)).map(Amount).map_err(|e| {
                TryGetError::DbErr(sea_orm::DbErr::Type(format!("column {idx:?} holds {text:?}, not a decimal: {e}")))
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
    }
}
