//! A dashboard user's role in its merchant.

use super::wire::wire_enum;
use sea_orm::entity::prelude::StringLen;

wire_enum! {
    /// What a person may do in the merchant dashboard (`domain::users::roles` says what each
    /// grants). Ordered from most to least powerful.
    #[derive(utoipa::ToSchema)]
    #[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
    pub enum Role {
        Owner = "owner",
        Admin = "admin",
        Developer = "developer",
        Viewer = "viewer",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::wire::{assert_schema, assert_wire};

    /// Pinned: the DB rows and the invitation command depend on these strings.
    #[test]
    fn wire_strings() {
        assert_wire::<Role>("owner, admin, developer, viewer");
        assert_schema::<Role>();
    }
}
