//! Whether KVM runs guests here. `/dev/kvm` answering isn't enough: under nested
//! virtualisation that doesn't work, a guest hangs early in its boot. So a probe guest boots
//! an image's kernel with no disk and `panic=-1`: where KVM works it reaches its root mount,
//! panics and resets within a second or two (a reset ends the domain), and where it doesn't
//! it is still running at the time limit and is destroyed.

use std::time::{Duration, Instant};

use super::config::LibvirtConfig;
use super::virsh::Virsh;

/// A working KVM boots a kernel to its root mount in about a second.
const LIMIT: Duration = Duration::from_secs(10);

pub async fn kvm_works(virsh: &Virsh, config: &LibvirtConfig) -> Result<(), String> {
    if !std::path::Path::new("/dev/kvm").exists() {
        return Err("there is no /dev/kvm".to_owned());
    }
    let Some(built) = config
        .images
        .values()
        .map(|dir| dir.join("vmlinuz"))
        .find(|k| k.is_file())
    else {
        return Err("no VM image is built to probe with (einsora images build vm-debian)".into());
    };
    // Where qemu's user can read it (the image cache may be the agent's own).
    let dir = config.vm_dir.join("probe");
    super::reconcile::passable_dir(&dir)?;
    let kernel = dir.join("vmlinuz");
    std::fs::copy(&built, &kernel).map_err(|e| format!("{}: {e}", built.display()))?;
    let name = format!("einsora-probe-{}", std::process::id());
    let console = dir.join("console.log");
    let _ = std::fs::remove_file(&console);
    let xml = format!(
        "<domain type='kvm'><name>{name}</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>\
         <os><type arch='x86_64' machine='q35'>hvm</type><kernel>{}</kernel>\
         <cmdline>console=ttyS0 panic=-1</cmdline></os><on_reboot>destroy</on_reboot>\
         <devices><serial type='file'><source path='{}'/><target port='0'/></serial>\
         <memballoon model='none'/></devices></domain>",
        kernel.display(),
        console.display()
    );
    let file = dir.join("probe.xml");
    std::fs::write(&file, xml).map_err(|e| format!("{}: {e}", file.display()))?;
    virsh
        .create(&file)
        .await
        .map_err(|e| format!("a KVM guest didn't start: {e}"))?;
    let started = Instant::now();
    while started.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(250)).await;
        match virsh.running().await {
            Ok(names) if !names.contains(&name) => {
                let said = std::fs::read(&console).unwrap_or_default();
                let booted = String::from_utf8_lossy(&said).contains("Kernel panic");
                return if booted {
                    Ok(())
                } else {
                    Err("a KVM guest ended before its kernel booted".to_owned())
                };
            }
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let _ = virsh.destroy(&name).await;
    Err(format!(
        "a KVM guest didn't boot within {} s",
        LIMIT.as_secs()
    ))
}
