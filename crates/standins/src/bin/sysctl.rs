//! `sysctl <key>…` for the Mac `STANDIN_MAC` names (default `m2-max-32gb`): Linux CI's
//! stand-in for a Mac's `sysctl` (`EINSORA_MACOS_SYSCTL`).

use std::process::ExitCode;

use einsora_standins::macs;

fn main() -> ExitCode {
    // The stand-in's own choice, not an Einsora setting.
    #[allow(clippy::disallowed_methods)]
    let name = std::env::var("STANDIN_MAC").unwrap_or_else(|_| "m2-max-32gb".to_owned());
    let Some(mac) = macs::mac(&name) else {
        eprintln!("sysctl (stand-in): no recorded Mac called {name:?}");
        return ExitCode::FAILURE;
    };
    let keys: Vec<String> = std::env::args().skip(1).collect();
    match macs::sysctl(mac, &keys) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
