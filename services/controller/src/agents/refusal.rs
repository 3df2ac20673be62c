//! Why the agents' Sync refuses or ends a stream, mapped to statuses once. `PERMISSION_DENIED`
//! is what an agent takes for "revoked: stop for good", so only a refusal of the machine's
//! identity is one; a replaced stream is `ABORTED`, after which an agent reconnects; a standby's
//! refusal is `UNAVAILABLE` marked [`STANDBY`], after which an agent tries the region's next
//! controller.

use einsora_proto::metadata::{ERROR, STANDBY};
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
    #[error("this controller stands by: another leads its region, and serves its machines")]
    Standby,
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
            Refusal::Standby => standby(message),
            Refusal::Store(e) => crate::status::store(&e, &message),
        }
    }
}

/// UNAVAILABLE, marked as a standby's: the caller tries another of the region's controllers.
pub fn standby(message: String) -> Status {
    let mut status = Status::unavailable(message);
    status
        .metadata_mut()
        .insert(ERROR, tonic::metadata::MetadataValue::from_static(STANDBY));
    status
}
