//! The catalog runtimes macos-native runs. A Mac's notebooks, Metal and CPU alike, run
//! JupyterLab with PyTorch from one environment (`images/notebook-metal/requirements.lock`,
//! resolved for macOS 14 on Apple Silicon): a CPU notebook's code can use Metal too, which is
//! why it holds the Apple GPU (the controller's placement). Its entrypoint is the images' own
//! `start.py`. Endpoints: MLX models on the GPU (`images/mlx/serve.py`, mlx-lm), GGUF models
//! with llama.cpp (its image's `serve.py`, the same xllamacpp resolved for macOS, Metal).
//!
//! On the stand-in (Linux CI) the same runtimes are built from Linux locks (macOS wheels don't
//! install on Linux): MLX's is `images/mlx-linux`, mlx-lm on MLX's CPU backend, running the same
//! `serve.py`.

use crate::drivers::native::runtimes::{self, NO_ANNOUNCEMENTS, Runtime, START_PY};

const NOTEBOOK: Runtime = Runtime {
    name: "jupyterlab-metal",
    lock: include_str!("../../../../images/notebook-metal/requirements.lock"),
    launcher: START_PY,
    after_install: NO_ANNOUNCEMENTS,
};

const STANDIN_NOTEBOOK: Runtime = Runtime {
    name: "jupyterlab-metal",
    lock: include_str!("../../../../images/notebook/requirements.lock"),
    launcher: START_PY,
    after_install: NO_ANNOUNCEMENTS,
};

const MLX: Runtime = Runtime {
    name: "mlx",
    lock: include_str!("../../../../images/mlx/requirements.lock"),
    launcher: (
        "mlx-serve.py",
        include_str!("../../../../images/mlx/serve.py"),
    ),
    after_install: &[],
};

const STANDIN_MLX: Runtime = Runtime {
    name: "mlx",
    lock: include_str!("../../../../images/mlx-linux/requirements.lock"),
    launcher: MLX.launcher,
    after_install: &[],
};

const LLAMA_CPP: Runtime = Runtime {
    name: "llama.cpp",
    lock: include_str!("../../../../images/llamacpp-macos/requirements.lock"),
    launcher: (
        "llamacpp-serve.py",
        include_str!("../../../../images/llamacpp/serve.py"),
    ),
    after_install: &[],
};

/// Every runtime this driver's environments are built for (their launchers are written at
/// start; the stand-in's are linux-native's, with the same launchers).
pub const RUNTIMES: &[Runtime] = &[NOTEBOOK, MLX, LLAMA_CPP];

/// The runtime called `name`, if this driver runs it; `standin`: on Linux.
pub fn lookup(name: &str, standin: bool) -> Option<&'static Runtime> {
    match name {
        "jupyterlab-metal" | "jupyterlab-cpu" if standin => Some(&STANDIN_NOTEBOOK),
        "jupyterlab-metal" | "jupyterlab-cpu" => Some(&NOTEBOOK),
        "mlx" if standin => Some(&STANDIN_MLX),
        "llama.cpp" if standin => runtimes::lookup("llama.cpp"),
        "mlx" => Some(&MLX),
        "llama.cpp" => Some(&LLAMA_CPP),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn cpu_and_metal_notebooks_share_one_environment_from_a_fresh_macos_lock() {
        let metal = lookup("jupyterlab-metal", false).unwrap();
        assert!(std::ptr::eq(
            metal,
            lookup("jupyterlab-cpu", false).unwrap()
        ));
        assert!(lookup("jupyterlab-cuda", false).is_none());
        assert!(lookup("vllm", false).is_none());
        assert_eq!(lookup("mlx", false).unwrap().launcher.0, "mlx-serve.py");
        assert_eq!(lookup("mlx", true).unwrap().launcher.0, "mlx-serve.py");
        assert!(lookup("mlx", true).unwrap().lock.contains("\nmlx-cpu=="));
        let requirements = include_str!("../../../../images/notebook-metal/requirements.txt");
        let hash = crate::models::hex(&Sha256::digest(requirements.as_bytes()));
        assert!(
            metal
                .lock
                .starts_with(&format!("# requirements.txt sha256:{hash} ")),
            "images/notebook-metal/requirements.lock is stale: run images/lock notebook-metal"
        );
        assert!(metal.lock.contains("\ntorch==") && metal.lock.contains("\njupyterlab=="));
        let standin = lookup("jupyterlab-cpu", true).unwrap();
        assert_eq!(standin.name, metal.name);
        assert!(!standin.lock.contains("\ntorch=="));
    }

    /// Each macOS lock was made from its requirements as they are (`images/lock`).
    #[test]
    fn the_macos_locks_are_fresh() {
        let pairs = [
            (
                MLX.lock,
                include_str!("../../../../images/mlx/requirements.txt"),
            ),
            (
                STANDIN_MLX.lock,
                include_str!("../../../../images/mlx-linux/requirements.txt"),
            ),
            (
                LLAMA_CPP.lock,
                include_str!("../../../../images/llamacpp/requirements.txt"),
            ),
        ];
        for (lock, requirements) in pairs {
            let hash = crate::models::hex(&Sha256::digest(requirements.as_bytes()));
            assert!(
                lock.starts_with(&format!("# requirements.txt sha256:{hash} ")),
                "stale: run images/lock mlx mlx-linux llamacpp@macos"
            );
            assert!(lock.contains("\\\n"), "hashes");
        }
        assert!(MLX.lock.contains("\nmlx-lm==") && MLX.lock.contains("\nmlx-metal=="));
    }
}
