//! `einsora`: one binary whose subcommand picks the role.

mod backup;
mod client;
mod commands;
mod healthcheck;
mod images;
mod join;
mod machine_check;
mod migrate;
mod role;
mod setup;
mod shell_docs;
mod system;
mod terminal;
mod up;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match cli.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("einsora: {err:#}");
            ExitCode::FAILURE
        }
    }
}
