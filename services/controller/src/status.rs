//! The controller's one mapping from store errors to statuses, for every service it serves
//! (Sync, Enroll, the internal API): an unavailable database is worth a retry; anything else
//! (corrupt data, a lost lease, a refused write) is the operator's to look at, logged at ERROR,
//! and the caller is told only that. No database text reaches a caller.

use einsora_store::StoreError;
use tonic::Status;

pub const UNAVAILABLE: &str = "the database is unavailable; try again shortly";
pub const INTERNAL: &str = "internal error: the operator's log has the details";

/// `err`, met while doing `what` (for the log), as the caller sees it.
pub fn store(err: &StoreError, what: &str) -> Status {
    match err {
        StoreError::Unavailable(_) => {
            tracing::warn!(error = %err, what, "the store is unavailable");
            Status::unavailable(UNAVAILABLE)
        }
        _ => {
            tracing::error!(error = %err, what, "the store failed");
            Status::internal(INTERNAL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn only_an_unavailable_store_is_worth_a_retry_and_no_database_text_leaks() {
        let unavailable = store(
            &StoreError::Unavailable("pool timed out: pg said x".into()),
            "t",
        );
        assert_eq!(
            (unavailable.code(), unavailable.message()),
            (Code::Unavailable, UNAVAILABLE)
        );
        let corrupt = StoreError::Corrupt {
            what: "region",
            value: "sel\u{e9}ct".into(),
        };
        for err in [
            corrupt,
            StoreError::Migration("relation x".into()),
            StoreError::NotFound,
        ] {
            let status = store(&err, "t");
            assert_eq!(
                (status.code(), status.message()),
                (Code::Internal, INTERNAL),
                "{err}"
            );
        }
    }
}
