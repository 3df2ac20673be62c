//! What a user may do in their tenant (docs/api.md "Roles"): one place for every rule that
//! depends on a role, so the api's services ask it rather than compare roles themselves.

use crate::words::word_enum;

word_enum! {
    /// A user's role in their tenant.
    pub enum Role ("role") {
        /// Everything an admin may do, and making or unmaking admins and owners.
        Owner = "owner",
        /// Manages users (members), invites, machines, enrolment and quotas; sees and manages
        /// every workload of the tenant.
        Admin = "admin",
        /// Launches workloads and manages their own; sees the tenant's machines and users.
        Member = "member",
    }
}

impl Role {
    /// Invites people, disables and removes users, issues password resets, manages machines,
    /// enrolment tokens and quotas, and reads the activity log.
    pub fn administers(self) -> bool {
        matches!(self, Role::Owner | Role::Admin)
    }

    /// Sees and manages every workload of the tenant, not only their own.
    pub fn sees_every_workload(self) -> bool {
        self.administers()
    }

    /// Whether a user of this role may give `to` to someone, or change or remove a user who
    /// holds `target`: an admin manages members only; an owner manages anyone.
    pub fn may_manage(self, target: Role) -> bool {
        match self {
            Role::Owner => true,
            Role::Admin => target == Role::Member,
            Role::Member => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admins_manage_members_only_and_owners_anyone() {
        for target in Role::ALL {
            assert!(Role::Owner.may_manage(*target));
            assert_eq!(Role::Admin.may_manage(*target), *target == Role::Member);
            assert!(!Role::Member.may_manage(*target));
        }
        assert!(Role::Admin.administers() && !Role::Member.administers());
        assert_eq!("admin".parse::<Role>(), Ok(Role::Admin));
        assert!("root".parse::<Role>().is_err());
    }
}
