//! The HTTP error vocabulary: the `code` of the envelope `{"error": {"code", "message",
//! "request_id"}}` the gateway and the access proxy both answer with, and the HTTP status each
//! goes with (docs/api.md, "Errors"). One list, so the two never name one thing two ways. The
//! OpenAI-compatible inference routes are the one exception: they answer in the OpenAI error
//! shape their clients parse.

use hyper::StatusCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    InvalidRequest,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    QuotaExceeded,
    InvalidTransition,
    /// A change to a user that would leave their tenant without an enabled owner.
    LastOwner,
    /// Removing a user who still owns live workloads or machines.
    StillOwns,
    /// A request body over its limit (the proxy's endpoint limits).
    TooLarge,
    RateLimited,
    Internal,
    /// The workload behind the proxy isn't what it should be.
    BadGateway,
    Unavailable,
    /// The workload behind the proxy took longer than its limit.
    Timeout,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 16] = [
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::Conflict,
        ErrorCode::QuotaExceeded,
        ErrorCode::InvalidTransition,
        ErrorCode::LastOwner,
        ErrorCode::StillOwns,
        ErrorCode::TooLarge,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
        ErrorCode::BadGateway,
        ErrorCode::Unavailable,
        ErrorCode::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::LastOwner => "last_owner",
            ErrorCode::StillOwns => "still_owns",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::BadGateway => "bad_gateway",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Timeout => "timeout",
        }
    }

    /// Answered by the access proxy only, about the workload behind it; never by the gateway.
    pub fn proxy_only(self) -> bool {
        matches!(
            self,
            ErrorCode::TooLarge | ErrorCode::BadGateway | ErrorCode::Timeout
        )
    }

    /// The code's word, if it is one.
    pub fn from_word(word: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == word)
    }

    /// The code a gRPC status of the api's becomes (docs/api.md, "Errors"): `refined` is its
    /// `x-einsora-error` metadata, which names the conflict a FAILED_PRECONDITION is. `None`
    /// for a status the api never answers on purpose (the gateway logs it and answers
    /// `internal`).
    pub fn from_grpc(code: tonic::Code, refined: Option<&str>) -> Option<ErrorCode> {
        use tonic::Code;
        const PRECONDITIONS: [ErrorCode; 5] = [
            ErrorCode::Conflict,
            ErrorCode::QuotaExceeded,
            ErrorCode::InvalidTransition,
            ErrorCode::LastOwner,
            ErrorCode::StillOwns,
        ];
        Some(match code {
            Code::InvalidArgument => ErrorCode::InvalidRequest,
            Code::Unauthenticated => ErrorCode::Unauthenticated,
            Code::PermissionDenied => ErrorCode::Forbidden,
            Code::NotFound => ErrorCode::NotFound,
            Code::AlreadyExists => ErrorCode::Conflict,
            Code::FailedPrecondition => refined
                .and_then(ErrorCode::from_word)
                .filter(|c| PRECONDITIONS.contains(c))?,
            Code::ResourceExhausted => ErrorCode::RateLimited,
            Code::Unavailable | Code::DeadlineExceeded => ErrorCode::Unavailable,
            _ => return None,
        })
    }

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::Forbidden => StatusCode::FORBIDDEN,
            ErrorCode::NotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::Conflict
            | ErrorCode::QuotaExceeded
            | ErrorCode::InvalidTransition
            | ErrorCode::LastOwner
            | ErrorCode::StillOwns => StatusCode::CONFLICT,
            ErrorCode::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::BadGateway => StatusCode::BAD_GATEWAY,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/api.md's table lists every code with its status, and nothing else.
    #[test]
    fn the_documented_table_is_the_vocabulary() {
        let doc = include_str!("../../../docs/api.md");
        let table: Vec<(String, u16)> = doc
            .lines()
            .skip_while(|l| !l.starts_with("## Errors"))
            .skip_while(|l| !l.starts_with("| `"))
            .take_while(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let status = cells[2].parse().unwrap_or(0);
                (cells[1].trim_matches('`').to_owned(), status)
            })
            .collect();
        let ours: Vec<(String, u16)> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str().to_owned(), c.status().as_u16()))
            .collect();
        assert_eq!(table, ours, "docs/api.md's error table, in this order");
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_word(code.as_str()), Some(code));
        }
    }
}
