//! What each dashboard role may do. The same rules bound the API keys a person creates: a key
//! never carries a permission its creator's role does not allow (`key_permissions`).
//!
//! | role      | sees everything | invoices (cancel, refund, resolve) | payouts (create, approve) | keys, webhooks | exports | settings | team |
//! |-----------|-----------------|------------------------------------|---------------------------|----------------|---------|----------|------|
//! | owner     | yes             | yes                                | yes                       | yes            | yes     | yes      | yes, every role |
//! | admin     | yes             | yes                                | yes                       | yes            | yes     | yes      | yes, but never an owner |
//! | developer | yes             | no                                 | no                        | yes            | yes     | no       | no |
//! | viewer    | yes             | no                                 | no                        | no             | yes     | no       | no |

use entity::Role;

use crate::keys::Permission;

/// A dashboard action class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Cancel, refund and resolve invoices.
    ManageInvoices,
    /// Create, approve and cancel payouts.
    ManagePayouts,
    ManageKeys,
    ManageWebhooks,
    Export,
    ManageSettings,
    ManageTeam,
}

pub fn allows(role: Role, cap: Capability) -> bool {
    match role {
        Role::Owner | Role::Admin => true,
        Role::Developer => match cap {
            Capability::ManageKeys | Capability::ManageWebhooks | Capability::Export => true,
            Capability::ManageInvoices
            | Capability::ManagePayouts
            | Capability::ManageSettings
            | Capability::ManageTeam => false,
        },
        Role::Viewer => match cap {
            Capability::Export => true,
            Capability::ManageInvoices
            | Capability::ManagePayouts
            | Capability::ManageKeys
            | Capability::ManageWebhooks
            | Capability::ManageSettings
            | Capability::ManageTeam => false,
        },
    }
}

/// Whether `actor` may invite, change or remove a member holding (or given) `role`: owners
/// manage everyone, admins everyone but owners, nobody else anyone.
pub fn may_manage_member(actor: Role, role: Role) -> bool {
    match actor {
        Role::Owner => true,
        Role::Admin => role != Role::Owner,
        Role::Developer | Role::Viewer => false,
    }
}

/// The permissions an API key created by this role may carry.
pub fn key_permissions(role: Role) -> Vec<Permission> {
    Permission::ALL.into_iter().filter(|p| key_permission_allowed(role, *p)).collect()
}

fn key_permission_allowed(role: Role, p: Permission) -> bool {
    match role {
        Role::Owner | Role::Admin => true,
        Role::Developer => match p {
            Permission::PayoutsWrite | Permission::RefundsWrite | Permission::SettingsWrite => false,
            Permission::InvoicesRead
            | Permission::InvoicesWrite
            | Permission::PayoutsRead
            | Permission::BalancesRead
            | Permission::RefundsRead
            | Permission::AddressesRead
            | Permission::AddressesWrite
            | Permission::EventsRead
            | Permission::SettingsRead
            | Permission::KeysRead
            | Permission::KeysWrite
            | Permission::WebhooksRead
            | Permission::WebhooksWrite
            | Permission::ExportsRead => true,
        },
        Role::Viewer => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_viewer_changes_nothing_and_creates_no_key() {
        for cap in [
            Capability::ManageInvoices,
            Capability::ManagePayouts,
            Capability::ManageKeys,
            Capability::ManageWebhooks,
            Capability::ManageSettings,
            Capability::ManageTeam,
        ] {
            assert!(!allows(Role::Viewer, cap), "{cap:?}");
        }
        assert!(allows(Role::Viewer, Capability::Export));
        assert!(key_permissions(Role::Viewer).is_empty());
    }

    #[test]
    fn a_developer_moves_no_money() {
        assert!(!allows(Role::Developer, Capability::ManagePayouts));
        assert!(!allows(Role::Developer, Capability::ManageInvoices));
        let perms = key_permissions(Role::Developer);
        assert!(!perms.contains(&Permission::PayoutsWrite));
        assert!(!perms.contains(&Permission::RefundsWrite));
        assert!(perms.contains(&Permission::KeysWrite));
    }

    #[test]
    fn admins_never_touch_owners() {
        assert!(may_manage_member(Role::Owner, Role::Owner));
        assert!(!may_manage_member(Role::Admin, Role::Owner));
        assert!(may_manage_member(Role::Admin, Role::Admin));
        assert!(!may_manage_member(Role::Developer, Role::Viewer));
        assert_eq!(key_permissions(Role::Owner).len(), Permission::ALL.len());
    }
}
