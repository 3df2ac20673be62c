//! What a panic does in a role that must never half-run. Its tasks are restarted by a
//! supervisor of their own ([`supervised`]) or, anywhere else, the whole process exits so the
//! process's own supervisor (`einsora up`, systemd, a container runtime) starts it afresh:
//! never a task that dies silently while the process looks healthy.

use std::future::Future;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The exit status of a process ended by a panic, as Rust's own.
pub const PANIC_EXIT: i32 = 101;

tokio::task_local! {
    /// The name of the supervised task being polled, if any.
    static SUPERVISED: &'static str;
}

/// Logs every panic at ERROR; one outside a [`supervised`] task ends the process.
pub fn exit_on_unsupervised_panic() {
    std::panic::set_hook(Box::new(|info| {
        let supervised = SUPERVISED.try_with(|name| *name).ok();
        let (location, message) = describe(info);
        match supervised {
            Some(task) => {
                tracing::error!(task, %location, %message, "a supervised task panicked; its supervisor restarts it");
            }
            None => {
                tracing::error!(%location, %message, "panicked; exiting so this role is restarted");
                eprintln!("panicked at {location}: {message}; exiting so this role is restarted");
                std::process::exit(PANIC_EXIT);
            }
        }
    }));
}

/// Runs `task` as the supervised task `name`: a panic in it is logged and left to the caller
/// (through its `JoinHandle`), not the end of the process.
pub async fn supervised<F: Future>(name: &'static str, task: F) -> F::Output {
    SUPERVISED.scope(name, task).await
}

/// The first and the longest wait before a crashed task starts again.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// Runs the task `make` makes until it ends without panicking; each time it panics, it is
/// logged at ERROR (by the hook, and here), counted in `restarts` (for its owner to report) and
/// made again after a backoff that doubles while it keeps crashing.
pub async fn restart_on_panic<F, T>(name: &'static str, restarts: &AtomicU32, mut make: F)
where
    F: FnMut() -> T,
    T: Future<Output = ()> + Send + 'static,
{
    let mut backoff = FIRST_BACKOFF;
    loop {
        match tokio::spawn(supervised(name, make())).await {
            Err(e) if e.is_panic() => {
                tracing::error!(task = name, ?backoff, "crashed; restarting it");
            }
            _ => return,
        }
        restarts.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}

/// Where, and what it said, at most 200 characters of it (a panic's message may quote input).
fn describe(info: &PanicHookInfo<'_>) -> (String, String) {
    let location = info
        .location()
        .map_or_else(|| "an unknown place".to_owned(), ToString::to_string);
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    (location, message.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_task_that_panics_is_made_again_until_it_ends_and_each_restart_counts() {
        let made = Arc::new(AtomicU32::new(0));
        let restarts = AtomicU32::new(0);
        restart_on_panic("test", &restarts, || {
            let n = made.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n >= 2, "crash number {n}");
            }
        })
        .await;
        assert_eq!(restarts.load(Ordering::SeqCst), 2);
        assert_eq!(made.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_supervised_task_is_known_to_the_hook() {
        let inside = supervised("named", async { SUPERVISED.try_with(|n| *n).ok() }).await;
        assert_eq!(inside, Some("named"));
        assert_eq!(SUPERVISED.try_with(|n| *n).ok(), None);
    }
}
