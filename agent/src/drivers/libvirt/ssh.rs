//! SSH into a running VM: the agent listens on the VM's one socket in its run directory
//! (`<state>/run/<id>/ssh.sock`, the socket the access proxy dials here, and the relay for a
//! proxy elsewhere), and joins each connection to a free one of the guest's SSH channels (its
//! virtio-serial ports, each serving one session at a time). With every channel busy a
//! connection is closed at once. The run directory and the socket are the agent's own; the
//! channels' sockets are libvirt's, in the VM's directory: a guest writes neither.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{UnixListener, UnixStream};

use super::domain::{Domain, SSH_PORTS};
use crate::abort_on_drop::AbortOnDrop;

/// Each direction's buffer: SSH's packets are small, and a session may stay open for days.
const BUFFER: usize = 16 * 1024;
/// What the guest writes on a channel as its SSH server starts for a new session
/// (`images/build`, the guest's `ssh-channel`).
const SESSION_LINE: &[u8] = b"einsora-ssh-session\n";
/// How long the guest has to start a session on a channel.
const SESSION_START: std::time::Duration = std::time::Duration::from_secs(10);

/// One VM's SSH socket, listening for as long as it is held.
pub struct SshSocket {
    path: PathBuf,
    _task: AbortOnDrop,
}

impl std::fmt::Debug for SshSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshSocket")
            .field("path", &self.path)
            .finish()
    }
}

impl SshSocket {
    /// Listens at `socket` (replacing what is there: the run directory is the agent's own),
    /// joining connections to the channels in `vm_dir`.
    pub fn listen(socket: &Path, vm_dir: &Path) -> std::io::Result<SshSocket> {
        if let Some(dir) = socket.parent() {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        match std::fs::remove_file(socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(socket)?;
        let channels: Arc<Vec<Channel>> = Arc::new(
            (0..SSH_PORTS)
                .map(|n| Channel {
                    socket: Domain::ssh_socket(vm_dir, n),
                    busy: AtomicBool::new(false),
                })
                .collect(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Out of descriptors, say: not a hot loop.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                };
                let channels = Arc::clone(&channels);
                tokio::spawn(async move { join(client, &channels).await });
            }
        });
        Ok(SshSocket {
            path: socket.to_owned(),
            _task: AbortOnDrop(task),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SshSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

struct Channel {
    socket: PathBuf,
    busy: AtomicBool,
}

/// Joins `client` to a session on a free channel, for as long as both sides keep it open. A
/// channel whose guest starts no session in time (it missed the last one's end, say) is given
/// up on for this connection, and the next free one tried.
async fn join(client: UnixStream, channels: &[Channel]) {
    for channel in channels {
        if channel.busy.swap(true, Ordering::AcqRel) {
            continue;
        }
        let started = session(&channel.socket).await;
        if let Ok((guest, early)) = started {
            relay(client, guest, early).await;
            channel.busy.store(false, Ordering::Release);
            return;
        }
        if let Err(e) = started {
            tracing::info!(channel = %channel.socket.display(), error = %e, "a VM's SSH channel didn't start a session");
        }
        channel.busy.store(false, Ordering::Release);
    }
    tracing::info!("no SSH channel of a VM started a session; one was refused");
}

/// A new session on the channel at `socket`: connected, once the guest has said it started
/// one (its `einsora-ssh-session` line, whatever came before it dropped: a channel is a byte stream
/// that outlives sessions). Returns what came after the line.
async fn session(socket: &Path) -> std::io::Result<(UnixStream, Vec<u8>)> {
    let mut guest = UnixStream::connect(socket).await?;
    let started = tokio::time::timeout(SESSION_START, async {
        let mut read = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            let n = guest.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::Error::other("the channel closed"));
            }
            read.extend_from_slice(&chunk[..n]);
            if let Some(at) = find(&read, SESSION_LINE) {
                return Ok(read.split_off(at + SESSION_LINE.len()));
            }
            // Only the line's length is worth keeping while looking for it.
            let keep = read.len().saturating_sub(SESSION_LINE.len());
            read.drain(..keep);
        }
    });
    match started.await {
        Ok(Ok(early)) => Ok((guest, early)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other("no session line in time")),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Bytes both ways until either side ends; then both are closed, so the guest sees its host
/// leave and makes the channel ready for the next session.
async fn relay(mut client: UnixStream, mut guest: UnixStream, early: Vec<u8>) {
    if client.write_all(&early).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = client.split();
    let (mut guest_read, mut guest_write) = guest.split();
    let mut to_guest = tokio::io::BufReader::with_capacity(BUFFER, &mut client_read);
    let mut to_client = tokio::io::BufReader::with_capacity(BUFFER, &mut guest_read);
    tokio::select! {
        _ = tokio::io::copy_buf(&mut to_guest, &mut guest_write) => {}
        _ = tokio::io::copy_buf(&mut to_client, &mut client_write) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest's channel: stale bytes, its session line, then its number, then echoes.
    async fn channel(vm_dir: &Path, n: u32) {
        let listener = UnixListener::bind(Domain::ssh_socket(vm_dir, n)).unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                s.write_all(b"stale bytes of the last session")
                    .await
                    .unwrap();
                s.write_all(SESSION_LINE).await.unwrap();
                s.write_all(format!("channel {n}\n").as_bytes())
                    .await
                    .unwrap();
                let mut buf = [0u8; 64];
                while let Ok(read @ 1..) = s.read(&mut buf).await {
                    s.write_all(&buf[..read]).await.unwrap();
                }
            }
        });
    }

    async fn first_line(s: &mut UnixStream) -> String {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while s.read(&mut b).await.unwrap() == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        String::from_utf8(line).unwrap()
    }

    #[tokio::test]
    async fn each_session_gets_a_free_channel_and_one_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..SSH_PORTS {
            channel(dir.path(), n).await;
        }
        let socket = dir.path().join("run/ssh.sock");
        let listening = SshSocket::listen(&socket, dir.path()).unwrap();
        let mut sessions = Vec::new();
        for n in 0..SSH_PORTS {
            let mut s = UnixStream::connect(&socket).await.unwrap();
            assert_eq!(first_line(&mut s).await, format!("channel {n}"));
            sessions.push(s);
        }
        let mut extra = UnixStream::connect(&socket).await.unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(extra.read(&mut buf).await.unwrap(), 0, "closed at once");

        // A session ends: its channel serves the next.
        let mut second = sessions.remove(1);
        second.write_all(b"ping").await.unwrap();
        let mut echoed = [0u8; 4];
        second.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"ping");
        drop(second);
        let mut again = None;
        for _ in 0..50 {
            let mut s = UnixStream::connect(&socket).await.unwrap();
            let line = first_line(&mut s).await;
            if line == "channel 1" {
                again = Some(s);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(again.is_some(), "channel 1 free again");
        drop(listening);
        assert!(!socket.exists(), "the socket goes with it");
    }
}
