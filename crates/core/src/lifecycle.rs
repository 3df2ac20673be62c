//! The workload lifecycle: the seeds' state diagram, the one place that says which steps exist.
//!
//! ```text
//! [*] → pending (create)          pending → queued (no capacity)
//! pending|queued → provisioning   provisioning → running | failed | stopping
//! pending|queued → failed (its class or image left the catalog: ADR 0005)
//! running → stopping | failed     stopping → stopped
//! stopped|failed → pending        every live state → deleting → deleted
//! ```

use crate::words::word_enum;

word_enum! {
    /// Where a workload is in its life.
    pub enum State ("state") {
        Pending = "pending",
        Queued = "queued",
        Provisioning = "provisioning",
        Running = "running",
        Stopping = "stopping",
        Stopped = "stopped",
        Failed = "failed",
        Deleting = "deleting",
        Deleted = "deleted",
    }
}

impl State {
    /// The state a workload is created in.
    pub const INITIAL: State = State::Pending;

    /// Counts against the tenant's quota (checked by the API at create and start).
    pub fn holds_quota(self) -> bool {
        matches!(
            self,
            State::Pending | State::Queued | State::Provisioning | State::Running | State::Stopping
        )
    }

    /// Holds devices on the runtime (counted by the controller at admission).
    pub fn holds_capacity(self) -> bool {
        matches!(
            self,
            State::Provisioning | State::Running | State::Stopping | State::Deleting
        )
    }

    /// Accrues usage.
    pub fn metered(self) -> bool {
        self == State::Running
    }

    /// Nothing more will happen to it.
    pub fn is_terminal(self) -> bool {
        self == State::Deleted
    }
}

/// Why a step was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("a workload can't go from {from} to {to}")]
    NotInDiagram { from: State, to: State },
    #[error("a workload can't be {to} before it is placed")]
    NotPlaced { to: State },
}

/// Checks one step of the diagram. `placed` says whether the workload has a recorded placement
/// (placed class, and on agents its machine): a metered state needs one, or usage would be
/// accounted to nothing.
pub fn transition(from: State, to: State, placed: bool) -> Result<(), TransitionError> {
    use State::*;
    let allowed = match (from, to) {
        (Pending, Queued) | (Pending | Queued, Provisioning | Failed) => true,
        (Provisioning, Running | Failed | Stopping) => true,
        (Running, Stopping | Failed) => true,
        (Stopping, Stopped) => true,
        (Stopped | Failed, Pending) => true,
        (Deleting, Deleted) => true,
        (from, Deleting) => !matches!(from, Deleting | Deleted),
        _ => false,
    };
    if !allowed {
        return Err(TransitionError::NotInDiagram { from, to });
    }
    if to.metered() && !placed {
        return Err(TransitionError::NotPlaced { to });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::State::*;
    use super::*;

    /// The diagram, written out edge by edge, independently of `transition`'s match.
    const DIAGRAM: &[(State, State)] = &[
        (Pending, Queued),
        (Pending, Provisioning),
        (Queued, Provisioning),
        (Pending, Failed),
        (Queued, Failed),
        (Provisioning, Running),
        (Provisioning, Failed),
        (Running, Stopping),
        (Provisioning, Stopping),
        (Stopping, Stopped),
        (Running, Failed),
        (Stopped, Pending),
        (Failed, Pending),
        (Pending, Deleting),
        (Queued, Deleting),
        (Provisioning, Deleting),
        (Running, Deleting),
        (Stopping, Deleting),
        (Stopped, Deleting),
        (Failed, Deleting),
        (Deleting, Deleted),
    ];

    #[test]
    fn exactly_the_diagram_is_allowed() {
        for &from in State::ALL {
            for &to in State::ALL {
                let expected = DIAGRAM.contains(&(from, to));
                assert_eq!(
                    transition(from, to, true).is_ok(),
                    expected,
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn running_needs_a_placement() {
        assert_eq!(
            transition(Provisioning, Running, false),
            Err(TransitionError::NotPlaced { to: Running })
        );
        assert!(transition(Pending, Provisioning, false).is_ok());
    }

    #[test]
    fn properties_match_the_seeds_table() {
        let quota: Vec<_> = State::ALL.iter().filter(|s| s.holds_quota()).collect();
        assert_eq!(
            quota,
            [&Pending, &Queued, &Provisioning, &Running, &Stopping]
        );
        let capacity: Vec<_> = State::ALL.iter().filter(|s| s.holds_capacity()).collect();
        assert_eq!(capacity, [&Provisioning, &Running, &Stopping, &Deleting]);
        let metered: Vec<_> = State::ALL.iter().filter(|s| s.metered()).collect();
        assert_eq!(metered, [&Running]);
    }

    #[test]
    fn words_round_trip() {
        for &s in State::ALL {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
        }
        let err = "Running".parse::<State>().unwrap_err();
        assert!(err.to_string().contains("\"Running\" is not one of"));
    }
}
