//! Why the agents' Sync refuses or ends a stream, mapped to statuses once. `PERMISSION_DENIED`
//! is what an agent takes for "revoked: stop for good", so only a refusal of the machine's
//! identity is one; a replaced stream is `ABORTED`, after which an agent reconnects.

use einsora_store::StoreError;
use tonic::Status;

#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("Sync needs the machine's certificate")]
    NoCertificate,
    #[error("only a machine certificate may sync")]
    NotAMachine,
    #[error("this machine's certificate is unknown or revoked")]
    Revoked,
    #[error("a newer stream with this machine's identity replaced this one")]
    Replaced,
    #[error("this machine opens streams faster than allowed; try again shortly")]
    TooManyStreams,
    #[error("the store failed a Sync request")]
    Store(#[from] StoreError),
}

impl From<Refusal> for Status {
    fn from(refusal: Refusal) -> Status {
        let message = refusal.to_string();
        match refusal {
            Refusal::NoCertificate => Status::unauthenticated(message),
            Refusal::NotAMachine | Refusal::Revoked => Status::permission_denied(message),
            Refusal::Replaced => Status::aborted(message),
            Refusal::TooManyStreams => Status::resource_exhausted(message),
            Refusal::Store(e) => crate::status::store(&e, &message),
        }
    }
}
