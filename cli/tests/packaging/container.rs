//! A throwaway container of one of the project's own images (images/build), with no network,
//! removed when dropped.

use std::path::Path;

use super::built::{ok, run};

pub struct Container {
    name: String,
}

impl Container {
    /// A container of `image` named for this test, `mount` at /pkgs read-only.
    pub fn start(image: &str, test: &str, mount: &Path) -> Container {
        let name = format!("einsora-packaging-{test}-{}", std::process::id());
        let _ = run("docker", &["rm", "-f", &name]);
        let volume = format!("{}:/pkgs:ro", mount.display());
        ok(
            "docker",
            &[
                "run",
                "-d",
                "--name",
                &name,
                "--network",
                "none",
                "-v",
                &volume,
                image,
                "sleep",
                "infinity",
            ],
        );
        Container { name }
    }

    /// `script` run by sh as root: its exit status, standard output and error.
    pub fn sh(&self, script: &str) -> (bool, String, String) {
        run("docker", &["exec", &self.name, "sh", "-c", script])
    }

    /// `script` started by sh as root, in the background.
    pub fn spawn(&self, script: &str) {
        ok("docker", &["exec", "-d", &self.name, "sh", "-c", script]);
    }

    /// [`Container::sh`], which must succeed; its standard output and error together.
    pub fn ok(&self, script: &str) -> String {
        let (success, out, err) = self.sh(script);
        assert!(success, "in the container: {script}\n{out}\n{err}");
        out + &err
    }

    /// [`Container::sh`], which must fail; its standard error.
    pub fn fails(&self, script: &str) -> String {
        let (success, out, err) = self.sh(script);
        assert!(
            !success,
            "in the container, this succeeded: {script}\n{out}\n{err}"
        );
        err
    }

    /// Waits until `script` succeeds (a minute at most).
    pub fn wait_for(&self, what: &str, script: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if self.sh(script).0 {
                return;
            }
            if std::time::Instant::now() > deadline {
                let log = self.sh("cat /var/log/einsora/up.out 2>/dev/null").1;
                panic!("{what}: not within a minute; einsora up said:\n{log}");
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = run("docker", &["rm", "-f", &self.name]);
    }
}
