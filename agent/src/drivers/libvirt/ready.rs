//! A guest's readiness: its `einsora-ready` unit writes `ready <token>` on the
//! `org.einsora.ready` channel every few seconds once it has booted, the token being this
//! run's (from its seed). What comes on the channel is the guest's, so hostile: lines are read
//! into a small fixed buffer, a longer one is dropped whole, and only the exact line counts.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use crate::abort_on_drop::AbortOnDrop;

/// The longest line read: anything longer isn't the ready line.
const LINE: usize = 256;
/// How soon the channel is tried again when it isn't there or closed.
const RETRY: Duration = Duration::from_millis(200);

/// Watches one run of one guest, for as long as it is held.
pub struct Readiness {
    ready: Arc<AtomicBool>,
    _task: AbortOnDrop,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("ready", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl Readiness {
    /// Reads `socket` (the run directory's, made by qemu) for the line with `token` (SECRET).
    pub fn watch(socket: PathBuf, token: String) -> Readiness {
        let ready = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ready);
        let task = tokio::spawn(async move {
            let expected = format!("ready {token}");
            loop {
                if let Ok(mut stream) = tokio::net::UnixStream::connect(&socket).await
                    && said_ready(&mut stream, expected.as_bytes()).await
                {
                    flag.store(true, Ordering::Release);
                    return;
                }
                tokio::time::sleep(RETRY).await;
            }
        });
        Readiness {
            ready,
            _task: AbortOnDrop(task),
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

/// Whether `stream` says `expected` on a line of its own before it ends.
async fn said_ready(stream: &mut (impl tokio::io::AsyncRead + Unpin), expected: &[u8]) -> bool {
    let mut line = Vec::with_capacity(LINE);
    // Past a line too long to be the ready line, until its end.
    let mut skipping = false;
    let mut chunk = [0u8; 512];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                let trimmed = line.strip_suffix(b"\r").unwrap_or(&line);
                if !skipping && trimmed == expected {
                    return true;
                }
                line.clear();
                skipping = false;
            } else if skipping {
            } else if line.len() == LINE {
                line.clear();
                skipping = true;
            } else {
                line.push(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;

    use super::*;

    async fn says(bytes: &[u8]) -> bool {
        let (mut guest, mut host) = tokio::io::duplex(64);
        let bytes = bytes.to_vec();
        tokio::spawn(async move {
            let _ = guest.write_all(&bytes).await;
        });
        said_ready(&mut host, b"ready tok").await
    }

    #[tokio::test]
    async fn only_the_exact_line_with_the_runs_token_counts() {
        assert!(says(b"booting\nready tok\n").await);
        assert!(says(b"ready tok\r\n").await);
        assert!(!says(b"ready other\n").await);
        assert!(!says(b"ready tok").await, "not a whole line");
        assert!(!says(b"ready tokx\nready to\n").await);
        assert!(!says(b"xready tok\n").await);
    }

    #[tokio::test]
    async fn a_line_too_long_is_dropped_whole_and_the_next_still_counts() {
        let mut long = vec![b'a'; 10 * LINE];
        long.extend_from_slice(b"ready tok\nready tok\n");
        assert!(says(&long).await, "the line after the long one");
        let mut tail = vec![b'a'; LINE];
        tail.extend_from_slice(b"ready tok\n");
        assert!(!says(&tail).await, "the long line's end is not a line");
    }

    #[tokio::test]
    async fn a_socket_that_comes_later_is_watched_until_it_says_ready() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("ready.sock");
        let readiness = Readiness::watch(socket.clone(), "t0k".into());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!readiness.is_ready());
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        // First a guest that closes without saying it, then one that says it.
        let (first, _) = listener.accept().await.unwrap();
        drop(first);
        let (mut second, _) = listener.accept().await.unwrap();
        second.write_all(b"ready t0k\n").await.unwrap();
        for _ in 0..50 {
            if readiness.is_ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("never ready");
    }
}
