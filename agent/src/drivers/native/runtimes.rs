//! The catalog runtimes this driver runs, each from the same recipe as its image: the image's
//! lock (`images/*/requirements.lock`: every package pinned with its hashes) and its entrypoint
//! (`start.py`, `serve.py`), which read the contract in `local::contract`.

/// One runtime: what its environment is built from and what its server is started with.
#[derive(Debug, PartialEq, Eq)]
pub struct Runtime {
    pub name: &'static str,
    /// The lock its environment is installed from (`pip --require-hashes --no-deps`).
    pub lock: &'static str,
    /// Its entrypoint's file name in the launchers directory, and its text.
    pub launcher: (&'static str, &'static str),
    /// Run with the environment's interpreter once it is installed.
    pub after_install: &'static [&'static str],
}

pub(crate) const START_PY: (&str, &str) = (
    "start.py",
    include_str!("../../../../images/notebook/start.py"),
);

/// The image has no network: JupyterLab's announcements would only ask, on first open, whether
/// to fetch news it can never reach (start.py turns the server's side off).
pub(crate) const NO_ANNOUNCEMENTS: &[&str] = &[
    "-m",
    "jupyter",
    "labextension",
    "disable",
    "--level=sys_prefix",
    "@jupyterlab/apputils-extension:announcements",
];

pub const RUNTIMES: &[Runtime] = &[
    Runtime {
        name: "jupyterlab-cpu",
        lock: include_str!("../../../../images/notebook/requirements.lock"),
        launcher: START_PY,
        after_install: NO_ANNOUNCEMENTS,
    },
    Runtime {
        name: "jupyterlab-cuda",
        lock: include_str!("../../../../images/notebook-cuda/requirements.lock"),
        launcher: START_PY,
        after_install: NO_ANNOUNCEMENTS,
    },
    Runtime {
        name: "llama.cpp",
        lock: include_str!("../../../../images/llamacpp/requirements.lock"),
        launcher: (
            "llamacpp-serve.py",
            include_str!("../../../../images/llamacpp/serve.py"),
        ),
        after_install: &[],
    },
    Runtime {
        name: "vllm",
        lock: include_str!("../../../../images/vllm/requirements.lock"),
        launcher: (
            "vllm-serve.py",
            include_str!("../../../../images/vllm/serve.py"),
        ),
        after_install: &[],
    },
];

/// The runtime called `name`, if this driver runs it.
pub fn lookup(name: &str) -> Option<&'static Runtime> {
    RUNTIMES.iter().find(|r| r.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    /// Each lock says which requirements it was made from; a requirements file edited without
    /// `images/lock` run again fails here (the images and these environments would differ
    /// from what the pins say).
    #[test]
    fn each_lock_was_made_from_its_requirements_as_they_are() {
        let requirements = [
            include_str!("../../../../images/notebook/requirements.txt"),
            include_str!("../../../../images/notebook-cuda/requirements.txt"),
            include_str!("../../../../images/llamacpp/requirements.txt"),
            include_str!("../../../../images/vllm/requirements.txt"),
        ];
        for (runtime, requirements) in RUNTIMES.iter().zip(requirements) {
            let hash = crate::models::hex(&Sha256::digest(requirements.as_bytes()));
            let first = runtime.lock.lines().next().unwrap_or_default();
            assert!(
                first.starts_with(&format!("# requirements.txt sha256:{hash} ")),
                "{}: its lock is stale; run images/lock",
                runtime.name
            );
            for line in runtime.lock.lines().filter(|l| l.contains("==")) {
                assert!(
                    line.ends_with('\\'),
                    "{}: {line:?} has no hashes",
                    runtime.name
                );
            }
        }
    }

    #[test]
    fn every_runtime_the_catalog_gives_this_driver_is_here() {
        for name in ["jupyterlab-cpu", "jupyterlab-cuda", "llama.cpp", "vllm"] {
            assert!(lookup(name).is_some(), "{name}");
        }
        assert!(lookup("mlx").is_none());
    }
}
