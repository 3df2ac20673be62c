//! `einsora`: one binary whose subcommand picks the role.

mod commands;
mod migrate;
mod role;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("einsora: {err:#}");
            ExitCode::FAILURE
        }
    }
}
