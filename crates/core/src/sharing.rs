//! Who besides its owner may run workloads on a machine (the seeds' sharing levels, planned).

use crate::words::word_enum;

word_enum! {
    /// A machine's sharing level. Until sharing lands, invite-only counts as private.
    pub enum SharingLevel ("sharing level") {
        Private = "private",
        InviteOnly = "invite-only",
        Community = "community",
    }
}
