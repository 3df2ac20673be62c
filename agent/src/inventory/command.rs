//! Runs a tool (the inventory's, the linux-native driver's `ip`) with a time limit, so a hung
//! `nvidia-smi` never stalls the agent.

use std::io::ErrorKind;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;

use super::error::{InventoryError, quote};

/// What a tool printed and how it ended.
#[derive(Debug)]
pub(crate) struct ToolOutput {
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    /// Its standard output, or an error naming the command if it exited unsuccessfully.
    pub fn success(self) -> Result<String, InventoryError> {
        if self.status.success() {
            return Ok(self.stdout);
        }
        let said = if self.stderr.trim().is_empty() {
            &self.stdout
        } else {
            &self.stderr
        };
        Err(InventoryError::Failed {
            command: self.command,
            status: self.status.to_string(),
            detail: quote(said.lines().next().unwrap_or_default()),
        })
    }
}

/// `program` itself if it names a path, else the first executable file of that name in a PATH
/// directory.
fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = std::path::PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    // The search path programs are found on, as the OS's own `Command` reads it: not a setting.
    #[allow(clippy::disallowed_methods)]
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
}

/// Runs `program args…` for at most `limit`; `None` if the program isn't installed. A run
/// past the limit is killed (the child is dropped with `kill_on_drop`) and is an error.
pub(crate) async fn run_tool(
    program: &str,
    args: &[&str],
    limit: Duration,
) -> Result<Option<ToolOutput>, InventoryError> {
    let command = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    // Found on PATH here, so that a PATH directory this user can't search (EACCES from the
    // kernel's own lookup) reads as "not installed", not as a failure.
    let Some(path) = find_on_path(program) else {
        return Ok(None);
    };
    let child = Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(cause) => return Err(InventoryError::Spawn { command, cause }),
    };
    match tokio::time::timeout(limit, child.wait_with_output()).await {
        Err(_) => Err(InventoryError::Timeout { command, limit }),
        Ok(Err(cause)) => Err(InventoryError::Spawn { command, cause }),
        Ok(Ok(out)) => Ok(Some(ToolOutput {
            command,
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_missing_program_is_none() {
        let out = run_tool("/nonexistent/einsora-no-such-tool", &[], LIMIT).await;
        assert!(matches!(out, Ok(None)), "{out:?}");
    }

    #[tokio::test]
    async fn answers_stdout_or_names_the_failed_command() {
        let out = run_tool("sh", &["-c", "echo hello"], LIMIT).await.unwrap();
        assert_eq!(out.unwrap().success().unwrap(), "hello\n");

        let out = run_tool("sh", &["-c", "echo broken >&2; exit 3"], LIMIT)
            .await
            .unwrap();
        let err = out.unwrap().success().unwrap_err().to_string();
        assert!(
            err.contains("`sh -c echo broken >&2; exit 3` failed"),
            "{err}"
        );
        assert!(err.contains("broken") && err.contains('3'), "{err}");
    }

    #[tokio::test]
    async fn a_hung_tool_is_cut_off_at_its_limit() {
        let started = Instant::now();
        let limit = Duration::from_millis(200);
        let out = run_tool("sleep", &["30"], limit).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        match out {
            Err(e @ InventoryError::Timeout { .. }) => {
                assert!(e.to_string().contains("`sleep 30` did not answer"), "{e}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_tool_past_its_limit_is_killed() {
        let pid_file = std::env::temp_dir().join(format!("einsora-hung-{}", std::process::id()));
        let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
        let out = run_tool("sh", &["-c", &script], Duration::from_secs(2)).await;
        assert!(
            matches!(out, Err(InventoryError::Timeout { .. })),
            "{out:?}"
        );
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let _ = std::fs::remove_file(&pid_file);
        let stat = format!("/proc/{}/stat", pid.trim());
        let deadline = Instant::now() + Duration::from_secs(5);
        // Gone, or a zombie waiting to be reaped: either way no longer running.
        while let Ok(text) = std::fs::read_to_string(&stat) {
            if text
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the hung tool still runs: {text}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
