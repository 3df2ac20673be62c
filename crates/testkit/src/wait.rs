//! Waiting on a condition instead of sleeping for a guess, and timers a test sets and derives
//! its bounds from.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often [`eventually`] looks again: often enough to time what it waits on to a twentieth
/// of a second, seldom enough not to load the machine it waits on.
pub const POLL: Duration = Duration::from_millis(50);

/// Polls `probe` every [`POLL`] until it gives `Some`, and returns that. Panics naming `what`
/// (the thing that didn't happen) if it hasn't within `within`; `probe` is asked once more at
/// the deadline, so a bound is never shortened by a late poll.
#[track_caller]
pub fn eventually<T>(what: impl Display, within: Duration, probe: impl FnMut() -> Option<T>) -> T {
    eventually_or(what, within, probe, String::new)
}

/// [`eventually`], with `context()` (the last state seen, a log) in the failure's message.
#[track_caller]
pub fn eventually_or<T, C: Display>(
    what: impl Display,
    within: Duration,
    mut probe: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> C,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let last = Instant::now() >= deadline;
        if let Some(found) = probe() {
            return found;
        }
        if last {
            panic!("{what}: not within {within:?}\n{}", context());
        }
        std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// [`eventually`] for a probe that awaits (a store, a port): polls on the Tokio timer, so the
/// runtime goes on while it waits.
pub async fn eventually_async<T>(
    what: impl Display,
    within: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let last = tokio::time::Instant::now() >= deadline;
        if let Some(found) = probe().await {
            return found;
        }
        if last {
            panic!("{what}: not within {within:?}");
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::sleep(POLL.min(left)).await;
    }
}

/// `d` as an `EINSORA_*` duration setting takes it (`1500ms`), so a test states each timer once
/// and derives its bounds from the same value it configured.
pub fn setting(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_returns_what_the_probe_found_once_it_finds_it() {
        let mut tries = 0;
        let found = eventually("the third try", Duration::from_secs(10), || {
            tries += 1;
            (tries == 3).then_some(tries)
        });
        assert_eq!(found, 3);
    }

    #[test]
    fn it_fails_naming_what_did_not_happen_and_the_context() {
        let failed = std::panic::catch_unwind(|| {
            eventually_or(
                "the sky falls",
                Duration::from_millis(50),
                || None::<()>,
                || "it is still up",
            )
        })
        .unwrap_err();
        let message = failed.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with("the sky falls: not within 50ms"),
            "{message}"
        );
        assert!(message.contains("it is still up"), "{message}");
    }

    #[test]
    fn a_zero_bound_still_looks_once() {
        assert_eq!(eventually("at once", Duration::ZERO, || Some(7)), 7);
    }

    #[tokio::test]
    async fn the_async_one_waits_on_the_runtimes_timer() {
        let mut tries = 0;
        let found = eventually_async("the third try", Duration::from_secs(10), async || {
            tries += 1;
            (tries == 3).then_some(tries)
        })
        .await;
        assert_eq!(found, 3);
        let failed = tokio::spawn(eventually_async(
            "never",
            Duration::from_millis(50),
            async || None::<()>,
        ))
        .await
        .unwrap_err();
        assert!(failed.is_panic());
    }

    #[test]
    fn a_setting_is_whole_milliseconds() {
        assert_eq!(setting(Duration::from_millis(1500)), "1500ms");
        assert_eq!(setting(Duration::from_secs(3)), "3000ms");
    }
}
