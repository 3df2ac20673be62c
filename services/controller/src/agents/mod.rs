//! The agents' side of the controller: each machine's Sync stream (identity from its
//! certificate, inventory, liveness, revocation) and the desired state it is sent.

mod backend;
mod desired;
mod hub;
mod inventory;
mod renew;
mod sync;

pub use backend::AgentBackend;
pub use hub::Hub;
pub use renew::Renewals;
pub use sync::SyncApi;
