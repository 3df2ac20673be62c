//! A VM's NoCloud seed: cloud-init's `user-data` (the `einsora` user with the SSH keys from its
//! create request) and `meta-data` (its instance ID, so cloud-init's first-boot steps run once
//! per VM, not once per boot) with the run's token as `einsora-token`, which cloud-init reads
//! again at every boot and the guest's `einsora-ready` unit says back on its ready channel (the
//! guest's contract: `images/build`, `build_vm_debian`). Written as an ISO 9660 image labelled
//! `cidata` by `genisoimage`.

use std::path::Path;
use std::time::Duration;

use crate::inventory::command::run_tool;

/// The guest's user, whom the SSH keys log in as.
pub const GUEST_USER: &str = "einsora";
const LIMIT: Duration = Duration::from_secs(30);

/// cloud-init's `user-data`. Each key is written as a JSON string (YAML reads those), so no
/// character of one can end its line or start a YAML construct.
pub fn user_data(keys: &[String]) -> String {
    let mut text = format!(
        "#cloud-config\n\
         disable_root: true\n\
         ssh_pwauth: false\n\
         users:\n  \
         - name: {GUEST_USER}\n    \
         shell: /bin/bash\n    \
         lock_passwd: true\n    \
         sudo: ALL=(ALL) NOPASSWD:ALL\n    \
         ssh_authorized_keys:"
    );
    if keys.is_empty() {
        text.push_str(" []");
    }
    text.push('\n');
    for key in keys {
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| "\"\"".to_owned());
        text.push_str(&format!("      - {quoted}\n"));
    }
    text
}

/// cloud-init's `meta-data`: the instance is the workload; the token is this run's (hex).
pub fn meta_data(workload: &str, token: &str) -> String {
    let host: String = workload.chars().take(8).collect();
    format!("instance-id: {workload}\nlocal-hostname: vm-{host}\neinsora-token: {token}\n")
}

/// Writes the seed for `workload`'s run with `token` to `iso`, through the scratch directory
/// `scratch` (emptied first, removed after).
pub async fn write(
    iso: &Path,
    scratch: &Path,
    workload: &str,
    keys: &[String],
    token: &str,
) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let files = [
        ("user-data", user_data(keys)),
        ("meta-data", meta_data(workload, token)),
    ];
    for (name, text) in &files {
        let path = scratch.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let (Some(out), Some(dir)) = (iso.to_str(), scratch.to_str()) else {
        return Err("the VM's directory is not UTF-8".to_owned());
    };
    let made = run_tool(
        "genisoimage",
        &[
            "-quiet", "-output", out, "-volid", "cidata", "-joliet", "-rock", dir,
        ],
        LIMIT,
    )
    .await;
    let _ = std::fs::remove_dir_all(scratch);
    match made {
        Ok(Some(o)) => o.success().map(drop).map_err(|e| e.to_string())?,
        Ok(None) => return Err("genisoimage isn't installed".to_owned()),
        Err(e) => return Err(e.to_string()),
    }
    super::reconcile::owner_only(iso)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_quoted_so_none_can_break_out_of_its_line() {
        let keys = vec![
            "ssh-ed25519 AAAAC3Nz alice@laptop".to_owned(),
            "ssh-rsa AAAA x\" # - evil: [1]".to_owned(),
        ];
        let text = user_data(&keys);
        assert!(text.starts_with("#cloud-config\n"));
        assert!(text.contains("      - \"ssh-ed25519 AAAAC3Nz alice@laptop\"\n"));
        assert!(
            text.contains("      - \"ssh-rsa AAAA x\\\" # - evil: [1]\"\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 11, "{text}");
        assert!(text.contains("ssh_pwauth: false"));
    }

    #[test]
    fn no_keys_is_an_empty_list() {
        assert!(user_data(&[]).contains("ssh_authorized_keys: []\n"));
    }

    #[test]
    fn the_instance_is_the_workload() {
        let m = meta_data("0190a5b2-0000-7000-8000-000000000001", "00ff");
        assert_eq!(
            m,
            "instance-id: 0190a5b2-0000-7000-8000-000000000001\nlocal-hostname: vm-0190a5b2\n\
             einsora-token: 00ff\n"
        );
    }
}
