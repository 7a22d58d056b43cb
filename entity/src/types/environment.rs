//! Test or live.

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// `test` (sandbox, no real funds) or `live`. Chosen by the API key.
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(8))")]
    pub enum Environment {
        Test = "test",
        Live = "live",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};

    /// Pinned: the DB rows and the JSON API depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<Environment>("test, live");
        assert_schema::<Environment>();
    }
}
