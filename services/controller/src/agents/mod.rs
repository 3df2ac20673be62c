//! The agents' side of the controller: each machine's Sync stream (identity from its
//! certificate, inventory, liveness, revocation) and the desired state it is sent.

mod desired;
mod inventory;
mod sync;

pub use sync::SyncApi;
