//! The Docker engine's containers, as tests and benches look for and clear them: by the labels
//! the docker driver puts on every container it makes (`einsora.workload`, `einsora.machine`).

use std::process::Command;

/// The containers labelled `label=value`, stopped ones included; none if the engine doesn't
/// answer.
pub fn labelled(label: &str, value: &str) -> Vec<String> {
    let filter = format!("label={label}={value}");
    let out = Command::new("docker")
        .args(["ps", "-aq", "--filter", &filter])
        .output();
    out.map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// A workload's containers, stopped ones included.
pub fn containers_of(workload: &str) -> Vec<String> {
    labelled("einsora.workload", workload)
}

/// Removes every container a machine's agent made (what a test or bench leaves when it ends
/// early), by force.
pub fn remove_machines(machine: &str) {
    for id in labelled("einsora.machine", machine) {
        let _ = Command::new("docker").args(["rm", "-f", &id]).output();
    }
}
