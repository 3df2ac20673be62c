//! A throwaway system user for running Einsora unprivileged.

use std::process::Command;

/// A throwaway system user, in the engine socket's group; deleted when dropped.
pub struct SystemUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl SystemUser {
    pub fn create(group: &str) -> SystemUser {
        let name = format!("einsora-test-{}", std::process::id());
        let made = Command::new("useradd")
            .args(["-r", "-M", "-s", "/usr/sbin/nologin", "-G", group, &name])
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "useradd: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        // Made: from here on, dropping it deletes it.
        let mut user = SystemUser {
            name,
            uid: 0,
            gid: 0,
        };
        let id = |flag: &str| {
            let out = Command::new("id")
                .args([flag, &user.name])
                .output()
                .unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        (user.uid, user.gid) = (id("-u"), id("-g"));
        user
    }

    /// Its processes still running.
    pub fn processes(&self) -> Vec<u32> {
        let uid = self.uid.to_string();
        einsora_testkit::process::processes()
            .filter(|p| {
                p.status("Uid")
                    .is_some_and(|u| u.split_whitespace().next() == Some(uid.as_str()))
            })
            .map(|p| p.pid)
            .collect()
    }
}

impl Drop for SystemUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        // Its own group, if userdel left it.
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}
