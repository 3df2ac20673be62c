//! The agents' side of the controller: each machine's Sync stream (identity from its
//! certificate, one live stream per machine, inventory, liveness, revocation, renewal) and the
//! desired state it is sent.

mod backend;
mod desired;
pub(crate) mod hub;
mod identity;
mod inventory;
pub(crate) mod limits;
mod refusal;
pub(crate) mod relay;
mod renew;
mod statuses;
mod streams;
mod sync;
pub(crate) mod trust;

pub use backend::AgentBackend;
pub use hub::Hub;
pub use refusal::standby;
pub use relay::Relays;
pub use renew::Renewals;
pub use sync::{StreamTimers, SyncApi};
pub use trust::Trust;

#[cfg(test)]
pub(crate) use limits::MAX_MESSAGE;
