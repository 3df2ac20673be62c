//! `einsora images build` run the way the README says, `sudo ./target/release/einsora images
//! build`: here the debug binary the other tests use, as root. Each image carries a label of
//! its inputs and is rebuilt only when they change, and the downloads it was built from are
//! kept in the build's cache; on a machine that built them (`./scripts/test` runs `images/build
//! all`, into `target/images-cache`) this build, given that cache, finds them and is quick.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use einsora_testkit::eventually_or;

use einsora_testkit::spawn::{Spawned, Stop};

use crate::harness::support::{Einsora, finish, stderr};

/// What `einsora images build` makes, by tag.
const IMAGES: [&str; 3] = [
    "einsora/base:bookworm",
    "einsora/notebook:local",
    "einsora/llamacpp:local",
];

/// The cache `images/build` fills by default (EINSORA_IMAGES_CACHE when set).
fn images_cache() -> PathBuf {
    let cache = std::env::var_os("EINSORA_IMAGES_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/images-cache")
        });
    assert!(
        cache.join("wheels").is_dir(),
        "no image build cache at {}: ./scripts/test builds the images into it",
        cache.display()
    );
    cache
}

/// The label of the inputs `tag` was built from; `None` if there is no such image.
fn inputs_label(tag: &str) -> Option<String> {
    let out = Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            r#"{{index .Config.Labels "einsora.inputs"}}"#,
            tag,
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn einsora_images_build_as_the_readme_says() {
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!(
        uid, 0,
        "the README runs it with sudo: run this test as root"
    );
    let cache = images_cache();
    let e = Einsora::new();
    // The build caches under <data dir>/images-cache: this installation's is that cache.
    std::os::unix::fs::symlink(&cache, e.dir().join("images-cache")).unwrap();
    // Cached, the build takes seconds; a change to an image's recipe rebuilds it offline.
    let out = finish(
        e.spawn(&["images", "build"], &[]),
        Duration::from_secs(1200),
    );
    let said = stderr(&out);
    assert!(out.status.success(), "{}\n{said}", out.status);
    for tag in IMAGES {
        let cached = format!("{tag}: cached");
        let built = format!("{tag}: docker build");
        let bootstrapped = format!("{tag}: debootstrap");
        assert!(
            said.lines()
                .any(|l| l.ends_with(&cached) || l.contains(&built) || l.contains(&bootstrapped)),
            "{tag} was neither found cached nor built:\n{said}"
        );
        assert!(
            said.contains(&format!("{tag} done in ")),
            "{tag}'s stage didn't finish:\n{said}"
        );
        let label = inputs_label(tag);
        assert!(
            label.as_ref().is_some_and(|l| !l.is_empty()),
            "{tag} exists, labelled with its inputs: {label:?}"
        );
    }
}

/// A build's output, read as it comes, and the process: in a process group of its own, killed
/// whole when dropped (the build script and what it waits in).
struct Running(Spawned);

impl Running {
    fn start(e: &Einsora, env: &[(&str, &str)]) -> Running {
        use std::os::unix::process::CommandExt;
        let mut cmd = e.command(&["images", "build"], env);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        Running(Spawned::start(cmd, Stop::KillGroup).unwrap())
    }

    fn said(&self) -> String {
        self.0.logs()
    }

    fn running(&mut self) -> bool {
        self.0.running()
    }

    /// Its exit status and everything it said, within `within`.
    fn finish(mut self, within: Duration) -> (std::process::ExitStatus, String) {
        match self.0.exits_within(within) {
            Some(status) => (status, self.said()),
            None => panic!("still running after {within:?}:\n{}", self.said()),
        }
    }
}

/// The engine a build started for this installation, stopped by its recorded PID.
struct PrivateEngine<'a> {
    e: &'a Einsora,
    host: String,
}

impl Drop for PrivateEngine<'_> {
    fn drop(&mut self) {
        let dockerd = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../images/dockerd");
        let _ = Command::new(dockerd)
            .arg("stop")
            .env("DOCKER_HOST", &self.host)
            .env("EINSORA_DOCKERD_DIR", self.e.dir().join("dockerd"))
            .status();
    }
}

/// The issue's newcomer bug: `einsora images build` started a Docker engine that inherited the
/// cache's lock, so every later build waited on it forever, silently. Here, from no engine at
/// all (a private one, its own socket and data, so the suite's engine is untouched): a first
/// build starts the engine and builds everything; a second, started while the first really
/// runs, says it waits, then proceeds when the first is done; a third finds everything cached at
/// once; and one that can't get the lock gives up with a line saying so.
#[test]
fn builds_from_no_engine_wait_for_each_other_never_for_the_engine() {
    let cache = images_cache();
    let e = Einsora::new();
    // The downloads, shared by hard links; the lock is this installation's own, so the suite's
    // other image build doesn't take part.
    let own = e.dir().join("images-cache");
    let copied = Command::new("cp")
        .arg("-al")
        .arg(&cache)
        .arg(&own)
        .status()
        .unwrap();
    assert!(copied.success(), "cp -al {}", cache.display());
    let _ = std::fs::remove_file(own.join(".lock"));
    let host = format!("unix://{}", e.dir().join("docker.sock").display());
    let _engine = PrivateEngine {
        e: &e,
        host: host.clone(),
    };
    let env = [("DOCKER_HOST", host.as_str())];

    let mut first = Running::start(&e, &env);
    eventually_or(
        "the first build to start the private engine and a stage",
        Duration::from_secs(120),
        || first.said().contains("einsora/base:bookworm").then_some(()),
        || first.said(),
    );
    assert!(
        first.running(),
        "the first build is still at work:\n{}",
        first.said()
    );
    let mut second = Running::start(&e, &env);
    eventually_or(
        "the second build to say it waits for the first",
        Duration::from_secs(60),
        || {
            second
                .said()
                .contains("waiting for another images build to finish")
                .then_some(())
        },
        || format!("second:\n{}\nfirst:\n{}", second.said(), first.said()),
    );
    assert!(second.running());
    let (status, said) = first.finish(Duration::from_secs(1500));
    assert!(status.success(), "the first build: {status}\n{said}");
    let (status, said) = second.finish(Duration::from_secs(300));
    assert!(status.success(), "the second build: {status}\n{said}");
    for tag in IMAGES {
        assert!(
            said.contains(&format!("{tag}: cached")),
            "{tag} after the first:\n{said}"
        );
    }

    // The engine the first build started still runs: a third build doesn't wait for it.
    let (status, said) = Running::start(&e, &env).finish(Duration::from_secs(300));
    assert!(status.success(), "the third build: {status}\n{said}");
    assert!(!said.contains("waiting for another"), "{said}");

    // Another holder of the lock that never lets go: a build gives up, saying why.
    let mut holder = {
        use std::os::unix::process::CommandExt;
        Command::new("flock")
            .arg(own.join(".lock"))
            .args(["sleep", "600"])
            .process_group(0)
            .spawn()
            .unwrap()
    };
    std::thread::sleep(Duration::from_millis(500));
    let waits = [
        ("DOCKER_HOST", host.as_str()),
        ("EINSORA_IMAGES_LOCK_WAIT", "2"),
    ];
    let (status, said) = Running::start(&e, &waits).finish(Duration::from_secs(60));
    // flock and the sleep that holds the lock, by their group's ID.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", holder.id())])
        .status();
    let _ = holder.wait();
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("gave up after 2 s waiting for another build's"),
        "{said}"
    );
}
