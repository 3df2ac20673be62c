//! The one base URL's routing decision, apart from any I/O: which of the endpoints serving a
//! request's `model` (its replicas) answers it, in what order the others are tried when one
//! refuses, and which refusals allow that. `gateway.rs` does what this decides.
//!
//! - Replicas on a GPU class come first; one on a CPU class is tried only once no GPU replica
//!   is left to try (none is up, or each refused): the CPU fallback.
//! - Among replicas of one kind, the least queue depth first (requests waiting plus in
//!   flight); ties are taken in turn, so an idle pool is used evenly.
//! - A replica is tried at most once per request, and the next only while nothing of an answer
//!   has reached the client: a refused connection, or an engine's 5xx before its body.

use axum::http::StatusCode;

/// One replica, as the choice weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replica {
    /// It runs on a CPU class (the catalog's `cpu` accelerator).
    pub(crate) cpu: bool,
    /// Requests of the proxy's waiting for it or in flight to it.
    pub(crate) depth: usize,
}

/// The indexes of `replicas` in the order to try them: GPU before CPU, least depth first,
/// ties in turn from `turn` (a counter the caller moves on each request).
pub(crate) fn order(replicas: &[Replica], turn: usize) -> Vec<usize> {
    let n = replicas.len();
    let mut order: Vec<usize> = (0..n).collect();
    // Where among equals it starts: the tie-break rotates with `turn`.
    let rotated = |i: usize| (i + n - turn % n.max(1)) % n.max(1);
    order.sort_by_key(|&i| (replicas[i].cpu, replicas[i].depth, rotated(i)));
    order
}

/// What became of trying one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// No answer came: the connection was refused or broke before a response head (a stopped
    /// engine, a killed container, a socket gone, the relay down).
    Refused,
    /// Its head came with this status; nothing has been sent to the client yet.
    Answered(StatusCode),
    /// One of the proxy's own limits refused it or ran out (its queue full, the wait or the
    /// answer's time limit past): the least busy replica was chosen, another would fare no
    /// better.
    Limited,
}

/// Whether the request may go on to the next replica after `attempt`. An answer the client
/// gets (anything but an engine's 5xx) never is retried, nor is one the proxy's limits refused.
pub(crate) fn retry(attempt: Attempt) -> bool {
    match attempt {
        Attempt::Refused => true,
        Attempt::Answered(status) => status.is_server_error(),
        Attempt::Limited => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(depth: usize) -> Replica {
        Replica { cpu: false, depth }
    }

    fn cpu(depth: usize) -> Replica {
        Replica { cpu: true, depth }
    }

    #[test]
    fn the_least_queue_depth_goes_first() {
        assert_eq!(order(&[gpu(3), gpu(0), gpu(1)], 0), [1, 2, 0]);
        assert_eq!(order(&[gpu(2), gpu(2), gpu(1)], 0)[0], 2);
        assert!(order(&[], 7).is_empty());
        assert_eq!(order(&[gpu(5)], 3), [0]);
    }

    #[test]
    fn ties_are_taken_in_turn() {
        let idle = [gpu(0), gpu(0), gpu(0)];
        let firsts: Vec<usize> = (0..6).map(|turn| order(&idle, turn)[0]).collect();
        assert_eq!(firsts, [0, 1, 2, 0, 1, 2]);
        // Each order still holds every replica once.
        for turn in 0..6 {
            let mut all = order(&idle, turn);
            all.sort_unstable();
            assert_eq!(all, [0, 1, 2]);
        }
    }

    /// A CPU replica comes after every GPU one, however busy they are: it serves only when
    /// none of them is up or each refused.
    #[test]
    fn a_cpu_replica_is_the_fallback_only() {
        assert_eq!(order(&[cpu(0), gpu(9), gpu(4)], 0), [2, 1, 0]);
        for turn in 0..4 {
            assert_eq!(order(&[cpu(0), gpu(100)], turn), [1, 0], "turn {turn}");
        }
        // With no GPU replica up, the CPU ones serve, least depth first.
        assert_eq!(order(&[cpu(2), cpu(1)], 0), [1, 0]);
    }

    #[test]
    fn only_refusals_before_any_answer_byte_are_retried() {
        assert!(retry(Attempt::Refused));
        for status in [500, 502, 503, 504] {
            let status = StatusCode::from_u16(status).unwrap();
            assert!(retry(Attempt::Answered(status)), "{status}");
        }
        for status in [200, 400, 401, 404, 429] {
            let status = StatusCode::from_u16(status).unwrap();
            assert!(!retry(Attempt::Answered(status)), "{status}");
        }
        assert!(!retry(Attempt::Limited));
    }
}
