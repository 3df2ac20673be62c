//! libvirt through `virsh`, one call per command, each time-limited (ADR 0017: why not the C
//! library's binding). Domains are transient: libvirt knows a VM only while it runs, and the
//! agent's own records and the VM's disk are what outlive it.

use std::path::Path;
use std::time::Duration;

use crate::inventory::command::run_tool;

use super::domain::{METADATA_NS, Metadata};

/// A call's time limit: libvirt answers in milliseconds; a start under TCG takes longer.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum VirshError {
    #[error("virsh isn't installed")]
    Missing,
    #[error("{0}")]
    Failed(String),
}

/// One libvirt connection's URI (`qemu:///system`).
#[derive(Debug, Clone)]
pub struct Virsh {
    uri: String,
}

impl Virsh {
    pub fn new(uri: &str) -> Virsh {
        Virsh {
            uri: uri.to_owned(),
        }
    }

    async fn run(&self, args: &[&str]) -> Result<String, VirshError> {
        let mut all = vec!["--quiet", "--connect", &self.uri];
        all.extend_from_slice(args);
        match run_tool("virsh", &all, LIMIT).await {
            Ok(Some(out)) => out.success().map_err(|e| VirshError::Failed(e.to_string())),
            Ok(None) => Err(VirshError::Missing),
            Err(e) => Err(VirshError::Failed(e.to_string())),
        }
    }

    /// Whether the daemon answers.
    pub async fn answers(&self) -> Result<(), VirshError> {
        self.run(&["version"]).await.map(drop)
    }

    /// The names of the running domains.
    pub async fn running(&self) -> Result<Vec<String>, VirshError> {
        let out = self.run(&["list", "--name"]).await?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Einsora's metadata in the running domain `name`; `None` if it has none, or none that
    /// reads (not one of ours), or it ended since it was listed.
    pub async fn metadata(&self, name: &str) -> Result<Option<Metadata>, VirshError> {
        match self.run(&["metadata", name, "--uri", METADATA_NS]).await {
            Ok(xml) => Ok(read_metadata(&xml)),
            Err(VirshError::Failed(e)) if e.contains("metadata not found") || gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Starts a transient domain from the XML in `file`.
    pub async fn create(&self, file: &Path) -> Result<(), VirshError> {
        let file = file
            .to_str()
            .ok_or_else(|| VirshError::Failed(format!("{} is not UTF-8", file.display())))?;
        self.run(&["create", file]).await.map(drop)
    }

    /// Asks the guest to shut down (ACPI power button).
    pub async fn shutdown(&self, name: &str) -> Result<(), VirshError> {
        self.ignoring_gone(self.run(&["shutdown", name]).await)
    }

    /// Ends the guest at once.
    pub async fn destroy(&self, name: &str) -> Result<(), VirshError> {
        self.ignoring_gone(self.run(&["destroy", name]).await)
    }

    /// A domain that is already gone (it shut down meanwhile) is what was asked for.
    fn ignoring_gone(&self, result: Result<String, VirshError>) -> Result<(), VirshError> {
        match result {
            Ok(_) => Ok(()),
            Err(VirshError::Failed(e)) if gone(&e) || e.contains("domain is not running") => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Whether virsh said the domain it was asked about doesn't exist (any more).
fn gone(error: &str) -> bool {
    error.contains("Domain not found") || error.contains("failed to get domain")
}

/// Reads the metadata element back as libvirt prints it (whatever prefix it gives the
/// namespace); `None` when a field is missing or doesn't read.
pub fn read_metadata(xml: &str) -> Option<Metadata> {
    Some(Metadata {
        workload: element(xml, "id")?,
        attempt: element(xml, "attempt")?.parse().ok()?,
        machine: element(xml, "machine")?,
        fingerprint: element(xml, "fingerprint")?,
    })
}

/// The text of the first element whose local name is `name`, unescaped of nothing: Einsora
/// writes only IDs, numbers and hex there.
fn element(xml: &str, name: &str) -> Option<String> {
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        let end = rest.find('>')?;
        let tag = &rest[..end];
        let local = tag.rsplit(':').next().unwrap_or(tag);
        if local == name && !tag.starts_with('/') {
            let body = &rest[end + 1..];
            let close = body.find("</")?;
            let text = body[..close].trim();
            let plain = text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
            return (plain && !text.is_empty()).then(|| text.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_reads_back_whatever_prefix_libvirt_gives_it() {
        let xml = "<einsora:workload xmlns:einsora=\"https://einsora.dev/xmlns/workload/1\">\n  \
                   <einsora:id>0190a5b2-0000-7000-8000-000000000001</einsora:id>\n  \
                   <einsora:attempt>3</einsora:attempt>\n  <einsora:machine>m-1</einsora:machine>\n  \
                   <einsora:fingerprint>00aa11bb22cc33dd</einsora:fingerprint>\n</einsora:workload>\n";
        let m = read_metadata(xml).unwrap();
        assert_eq!(m.workload, "0190a5b2-0000-7000-8000-000000000001");
        assert_eq!(m.attempt, 3);
        assert_eq!(m.machine, "m-1");
        assert_eq!(m.fingerprint, "00aa11bb22cc33dd");
        let other = xml.replace("einsora:", "e:");
        assert_eq!(read_metadata(&other), Some(m));
    }

    #[test]
    fn metadata_that_doesnt_read_is_none() {
        assert_eq!(read_metadata(""), None);
        assert_eq!(read_metadata("<workload><id>x</id></workload>"), None);
        let bad_attempt = "<w><id>a</id><attempt>-1</attempt><machine>m</machine>\
                           <fingerprint>f</fingerprint></w>";
        assert_eq!(read_metadata(bad_attempt), None);
        let odd_text = "<w><id>a b</id><attempt>1</attempt><machine>m</machine>\
                        <fingerprint>f</fingerprint></w>";
        assert_eq!(read_metadata(odd_text), None);
    }
}
