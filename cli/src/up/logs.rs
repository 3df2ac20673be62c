//! A child's readable lines on the supervisor's terminal, each prefixed by its role. (The
//! children write their own JSON lines to einsora.log, each naming its role.)

use std::io::Write;

use einsora_runtime::telemetry::terminal_prefix;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::task::JoinHandle;

/// Copies `from` line by line until the child closes it; the task answers the last line, which
/// says why a child that failed to start stopped.
pub fn forward(role: &'static str, from: Option<ChildStderr>) -> JoinHandle<Option<String>> {
    tokio::spawn(async move {
        let mut reader = BufReader::new(from?);
        let prefix = terminal_prefix(role);
        let mut last = None;
        let mut raw = Vec::new();
        loop {
            raw.clear();
            match reader.read_until(b'\n', &mut raw).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            // A terminal that went away is no reason to stop a child or the supervisor.
            let _ = writeln!(std::io::stderr().lock(), "{prefix}{line}");
            last = Some(line.to_owned());
        }
        last
    })
}
