//! Completion scripts and man pages, generated from the command line's own definitions, so
//! they never drift from it (the packages ship them; `einsora completion` prints one).

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::commands::Cli;

/// The completion script for `shell`. A reader that stops early (`| head`) is no error.
pub fn completion(shell: clap_complete::Shell, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "einsora", &mut script);
    match out.write_all(&script).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the completion script")
        }
        _ => Ok(()),
    }
}

/// `einsora.1` and a page per subcommand (`einsora-up.1`, `einsora-agent-join.1`, …), hidden
/// ones left out, into `dir`.
pub fn man_pages(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut command = Cli::command();
    command.build();
    write_pages(&command, dir)
}

fn write_pages(command: &clap::Command, dir: &Path) -> anyhow::Result<()> {
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name())
        .to_owned();
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .title(name.to_uppercase())
        .render(&mut page)
        .with_context(|| format!("rendering {}", path.display()))?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    for sub in command
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
    {
        write_pages(sub, dir)?;
    }
    Ok(())
}
