//! Starting the processes a test or bench runs (the `einsora` binary's roles, peers like nginx)
//! and stopping them on every way out, failures included: one spawner, its output collected
//! line by line, its stop chosen when it starts.

use std::io::{BufRead, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::POLL;

/// How long [`Spawned::exits_within`] waits for its output's last lines after it exited.
const READERS_FINISH: Duration = Duration::from_secs(2);

/// What a child process writes to its pipes, line by line, as it writes it. Clones share the
/// text.
#[derive(Debug, Clone, Default)]
pub struct Lines(Arc<Mutex<String>>);

impl Lines {
    /// Collects `from` until it closes, on a thread of its own.
    pub fn collect(from: impl Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        drop(lines.add(from));
        lines
    }

    /// Collects `from` too, into the same text; the thread ends when `from` closes.
    pub fn add(&self, from: impl Read + Send + 'static) -> JoinHandle<()> {
        let into = self.clone();
        std::thread::spawn(move || {
            // Bytes that aren't UTF-8 are kept, replaced: reading stops only when the pipe ends,
            // so the child never writes to a closed pipe.
            let mut reader = std::io::BufReader::new(from);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let mut text = into.0.lock().unwrap();
                text.push_str(String::from_utf8_lossy(&line).trim_end_matches('\n'));
                text.push('\n');
                line.clear();
            }
        })
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

/// How a [`Spawned`] process is stopped when it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM, and a wait for it.
    Term,
    /// SIGKILL: no chance to tidy up.
    Kill,
    /// SIGTERM, then SIGKILL if it hasn't stopped within the grace; a test that isn't
    /// failing already fails for it.
    TermWithin(Duration),
    /// SIGKILL to its whole process group (its command set `process_group(0)`), even once it
    /// exited itself: what it started, and waits in, goes too.
    KillGroup,
}

/// A running process and what it said on the pipes its command set up (standard error and
/// output, each when piped), stopped by its PID when dropped.
#[derive(Debug)]
pub struct Spawned {
    child: Option<Child>,
    stop: Stop,
    lines: Lines,
    readers: Vec<JoinHandle<()>>,
}

impl Spawned {
    /// Starts `cmd` with no standard input, collecting whichever of its outputs it pipes.
    pub fn start(mut cmd: Command, stop: Stop) -> std::io::Result<Spawned> {
        let mut child = cmd.stdin(Stdio::null()).spawn()?;
        let lines = Lines::default();
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(lines.add(out));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(lines.add(err));
        }
        Ok(Spawned {
            child: Some(child),
            stop,
            lines,
            readers,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Everything it said so far.
    pub fn logs(&self) -> String {
        self.lines.text()
    }

    pub fn lines(&self) -> &Lines {
        &self.lines
    }

    /// Its exit status, once it exits by itself within `within`; by then [`Spawned::logs`]
    /// holds everything it said.
    pub fn exits_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().ok()? {
                if self.stop == Stop::KillGroup {
                    // What it left running would hold its pipes open.
                    kill_group(child.id());
                }
                // Its pipes close with it, unless something it started holds them: then what
                // was said by now is what there is.
                let readers = std::mem::take(&mut self.readers);
                let until = Instant::now() + READERS_FINISH;
                for reader in readers {
                    while !reader.is_finished() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if reader.is_finished() {
                        let _ = reader.join();
                    }
                }
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Stops it now by its policy, and reaps it.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        if self.stop == Stop::KillGroup {
            // Its own PID only while it isn't reaped (a reaped one's may be another's now).
            if child.try_wait().ok().flatten().is_none() {
                send(pid, "KILL");
            }
            kill_group(pid);
            let _ = child.wait();
            return;
        }
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        match self.stop {
            Stop::Kill => {
                send(pid, "KILL");
            }
            Stop::Term => {
                send(pid, "TERM");
            }
            Stop::KillGroup => {}
            Stop::TermWithin(grace) => {
                send(pid, "TERM");
                let deadline = Instant::now() + grace;
                while child.try_wait().ok().flatten().is_none() {
                    if Instant::now() > deadline {
                        send(pid, "KILL");
                        let _ = child.wait();
                        assert!(
                            std::thread::panicking(),
                            "it didn't stop within {grace:?} of SIGTERM:\n{}",
                            self.lines.text()
                        );
                        return;
                    }
                    std::thread::sleep(POLL);
                }
            }
        }
        let _ = child.wait();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Sends `signal` (`TERM`, `KILL`, `STOP`, `CONT`) to `pid`, a process the test started or
/// one of its children: by PID, never by name. Panics if it can't (the process is gone).
#[track_caller]
pub fn signal(pid: u32, signal: &str) {
    assert!(send(pid, signal), "kill -{signal} {pid}");
}

/// SIGKILL to the process group `group` leads.
fn kill_group(group: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stderr(Stdio::null())
        .status();
}

/// Whether `signal` reached `pid`.
fn send(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_it_says_is_kept_and_a_drop_stops_it() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo said; echo out >&1; sleep 30"])
            .stdout(Stdio::piped());
        let spawned = Spawned::start(cmd, Stop::Term).unwrap();
        let pid = spawned.pid();
        crate::eventually("its lines", Duration::from_secs(10), || {
            spawned.logs().contains("out").then_some(())
        });
        drop(spawned);
        assert!(crate::process::Proc::of(pid).is_none(), "reaped");
    }

    #[test]
    fn one_that_ignores_sigterm_is_killed_after_its_grace_and_fails_the_test() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; echo ready >&2; sleep 30"])
            .stderr(Stdio::piped());
        let spawned = Spawned::start(cmd, Stop::TermWithin(Duration::from_millis(300))).unwrap();
        crate::eventually("ready", Duration::from_secs(10), || {
            spawned.logs().contains("ready").then_some(())
        });
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| spawned.stop()));
        assert!(failed.is_err(), "a process that won't stop fails the test");
    }
}
