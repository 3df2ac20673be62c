//! What a gRPC call's test checks.

use tonic::{Code, Status};

/// The status of a call that failed with `code`; panics on success or another code.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(result: Result<T, Status>, code: Code) -> Status {
    match result {
        Err(status) if status.code() == code => status,
        other => panic!("expected {code:?}, got {other:?}"),
    }
}
