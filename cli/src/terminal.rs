//! Questions asked in the terminal: a line, or a secret with the echo off.

use std::io::{BufRead, Write};

use anyhow::{Context, bail};
use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};

pub fn prompt(question: &str) -> anyhow::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush().ok();
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the terminal")?;
    if read == 0 {
        bail!("the terminal closed before an answer was given");
    }
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// [`prompt`] with the terminal's echo off, restored even when reading fails.
pub fn prompt_hidden(question: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).context("reading the terminal's settings")?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Now, &quiet).context("turning the echo off")?;
    let answer = prompt(question);
    let restored = tcsetattr(&stdin, OptionalActions::Now, &saved);
    eprintln!();
    restored.context("turning the echo back on")?;
    answer
}
