//! `wire_enum!`: an enum whose variants are stored and sent as strings, each string written once.
//!
//! ```ignore
//! wire_enum! {
//!     /// `test` (sandbox, no real funds) or `live`.
//!     #[derive(utoipa::ToSchema)]
//!     #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(8))")]
//!     pub enum Environment {
//!         /// Sandbox.
//!         Test = "test",
//!         Live = "live",
//!     }
//! }
//! ```
//!
//! From the one string per variant it generates:
//! - the enum with `Debug, Clone, Copy, PartialEq, Eq, Hash`, sea-orm's `EnumIter` and
//!   `DeriveActiveEnum` (the string is the variant's `string_value`, the column type comes from
//!   the `#[sea_orm(...)]` attribute passed in) and serde's `Serialize`/`Deserialize` (the string
//!   is the variant's `rename`); any further derive (`utoipa::ToSchema`) is passed in;
//! - `as_str()`, `parse(&str) -> Option<Self>` and `Display` (the string);
//! - `ALL` (every variant, in declaration order), `wire_values()` (their strings) and
//!   `WIRE_LIST` (`"a, b, c"`, for OpenAPI descriptions and error messages).

/// What `wire_enum!` gives every enum, for tests generic over them (callers use the inherent items).
#[cfg(test)]
pub(crate) trait WireEnum: Sized + Copy + 'static {
    const ALL: &'static [Self];
    const WIRE_LIST: &'static str;
    fn as_str(self) -> &'static str;
    fn parse(s: &str) -> Option<Self>;
}

macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                // `tt`, not `literal`: a `literal` fragment reaches the derives wrapped in an
                // invisible group, which utoipa's `ToSchema` does not read as a serde rename (the
                // OpenAPI enum then lists the variant names).
                $variant:ident = $wire:tt
            ),+ $(,)?
        }
    ) => {
        // The derives come first: `#[sea_orm(...)]` among `$meta` is a helper of `DeriveActiveEnum`.
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            Hash,
            ::sea_orm::EnumIter,
            ::sea_orm::DeriveActiveEnum,
            ::serde::Serialize,
            ::serde::Deserialize,
        )]
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                #[sea_orm(string_value = $wire)]
                #[serde(rename = $wire)]
                $variant,
            )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The wire strings, comma-separated in declaration order (`"a, b, c"`).
            pub const WIRE_LIST: &'static str = $crate::types::wire::wire_enum!(@join $($wire),+);

            /// The string stored in the database and sent in JSON.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }

            /// The variant whose wire string is `s`.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($wire => Some(Self::$variant),)+
                    _ => None,
                }
            }

            /// The wire strings, in declaration order.
            pub fn wire_values() -> &'static [&'static str] {
                &[$($wire),+]
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[cfg(test)]
        impl $crate::types::wire::WireEnum for $name {
            const ALL: &'static [Self] = $name::ALL;
            const WIRE_LIST: &'static str = $name::WIRE_LIST;
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
            fn parse(s: &str) -> Option<Self> {
                $name::parse(s)
            }
        }
    };
    (@join $first:tt $(, $rest:tt)*) => {
        concat!($first $(, ", ", $rest)*)
    };
}

pub(crate) use wire_enum;

/// Checks one `wire_enum!` enum against what the database and the JSON API depend on: every
/// variant's serde form, sea-orm value and `parse` agree with `as_str`, `ALL` is `EnumIter`'s
/// order, and the strings are exactly `expected` (pinned in the tests, so a changed string fails).
#[cfg(test)]
pub(crate) fn assert_wire<T>(expected: &str)
where
    T: WireEnum
        + sea_orm::ActiveEnum<Value = String>
        + sea_orm::Iterable
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + std::fmt::Display
        + PartialEq,
{
    let iter: Vec<T> = <T as sea_orm::Iterable>::iter().collect();
    assert_eq!(T::ALL, iter.as_slice(), "ALL lists every variant in EnumIter's order");
    assert_eq!(T::WIRE_LIST, expected, "wire strings changed: the DB rows and the JSON API depend on them");
    let strings: Vec<&str> = T::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(strings.join(", "), expected);
    for (i, s) in strings.iter().enumerate() {
        assert!(!strings[..i].contains(s), "{s:?} used twice");
    }
    for &v in T::ALL {
        let s = v.as_str();
        assert_eq!(T::parse(s), Some(v), "{v:?}");
        assert_eq!(v.to_string(), s, "{v:?}");
        let json = serde_json::to_value(v).unwrap();
        assert_eq!(json, serde_json::json!(s), "{v:?}");
        assert_eq!(serde_json::from_value::<T>(json).unwrap(), v, "{v:?}");
        assert_eq!(sea_orm::ActiveEnum::to_value(&v), s, "{v:?}");
        assert_eq!(<T as sea_orm::ActiveEnum>::try_from_value(&s.to_owned()).ok(), Some(v), "{v:?}");
    }
    assert_eq!(T::parse("nope"), None);
    assert_eq!(T::parse(""), None);
    assert!(serde_json::from_value::<T>(serde_json::json!("nope")).is_err());
}

/// Checks that the OpenAPI schema of a `wire_enum!` enum with `utoipa::ToSchema` lists exactly its
/// wire strings.
#[cfg(test)]
pub(crate) fn assert_schema<T: WireEnum + utoipa::ToSchema>() {
    let schema = serde_json::to_value(T::schema()).unwrap();
    let strings: Vec<&str> = T::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(schema["type"], "string", "{schema}");
    assert_eq!(schema["enum"], serde_json::json!(strings), "{schema}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::entity::prelude::StringLen;

    wire_enum! {
        /// A test enum.
        #[derive(utoipa::ToSchema)]
        #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(8))")]
        enum Sample {
            /// First.
            First = "first",
            SecondOne = "second_one",
        }
    }

    #[test]
    fn generated_items() {
        assert_eq!(Sample::ALL, &[Sample::First, Sample::SecondOne]);
        assert_eq!(Sample::wire_values(), &["first", "second_one"]);
        assert_eq!(Sample::WIRE_LIST, "first, second_one");
        assert_eq!(format!("{}", Sample::SecondOne), "second_one");
        assert_wire::<Sample>("first, second_one");
        assert_schema::<Sample>();
        let schema = serde_json::to_value(<Sample as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(schema["description"], "A test enum.");
    }
}
