//! `einsora images build`: the images the docker driver runs by default, built on this machine
//! from Debian packages and Python wheels, for machines with no container registry. The recipe
//! (repository `images/`) is built into the binary and unpacked into a temporary directory;
//! downloads and logs are cached in `<data dir>/images-cache` between runs.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use anyhow::{Context, bail};
use einsora_runtime::settings::Settings;

/// The recipe's files, by their path under `images/`.
const RECIPE: [(&str, &str); 21] = [
    ("build", include_str!("../../images/build")),
    ("dockerd", include_str!("../../images/dockerd")),
    ("vm-tiny.sh", include_str!("../../images/vm-tiny.sh")),
    (
        "notebook/Dockerfile",
        include_str!("../../images/notebook/Dockerfile"),
    ),
    (
        "notebook/requirements.lock",
        include_str!("../../images/notebook/requirements.lock"),
    ),
    (
        "notebook/requirements.txt",
        include_str!("../../images/notebook/requirements.txt"),
    ),
    (
        "notebook/start.py",
        include_str!("../../images/notebook/start.py"),
    ),
    (
        "llamacpp/Dockerfile",
        include_str!("../../images/llamacpp/Dockerfile"),
    ),
    (
        "llamacpp/requirements.lock",
        include_str!("../../images/llamacpp/requirements.lock"),
    ),
    (
        "llamacpp/requirements.txt",
        include_str!("../../images/llamacpp/requirements.txt"),
    ),
    (
        "llamacpp/serve.py",
        include_str!("../../images/llamacpp/serve.py"),
    ),
    (
        "notebook-cuda/requirements.lock",
        include_str!("../../images/notebook-cuda/requirements.lock"),
    ),
    (
        "notebook-cuda/requirements.txt",
        include_str!("../../images/notebook-cuda/requirements.txt"),
    ),
    (
        "vllm/Dockerfile",
        include_str!("../../images/vllm/Dockerfile"),
    ),
    (
        "vllm/requirements.lock",
        include_str!("../../images/vllm/requirements.lock"),
    ),
    (
        "vllm/requirements.txt",
        include_str!("../../images/vllm/requirements.txt"),
    ),
    ("vllm/serve.py", include_str!("../../images/vllm/serve.py")),
    (
        "server/Dockerfile",
        include_str!("../../images/server/Dockerfile"),
    ),
    (
        "server/entrypoint.sh",
        include_str!("../../images/server/entrypoint.sh"),
    ),
    (
        "postgres/Dockerfile",
        include_str!("../../images/postgres/Dockerfile"),
    ),
    (
        "postgres/start.sh",
        include_str!("../../images/postgres/start.sh"),
    ),
];

/// An image `einsora images build` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Image {
    /// JupyterLab (`einsora/notebook:local`).
    Notebook,
    /// llama.cpp's server (`einsora/llamacpp:local`).
    Llamacpp,
    /// JupyterLab with PyTorch and its CUDA wheels (`einsora/notebook-cuda:local`).
    NotebookCuda,
    /// vLLM's OpenAI server (`einsora/vllm:local`).
    Vllm,
    /// A Lab's control plane, this einsora binary (`einsora/server:local`), and its database,
    /// Debian's PostgreSQL (`einsora/postgres:local`): what compose/ runs.
    Server,
    /// The libvirt driver's Debian 12 VM image (`<data dir>/images-cache/vm-debian`: base disk,
    /// kernel, initrd), built with debootstrap; no Docker needed.
    VmDebian,
    /// A small test guest for the libvirt driver (`<data dir>/images-cache/vm-tiny`: busybox,
    /// Dropbear and Debian's cloud kernel), booted in seconds; no Docker needed.
    VmTiny,
}

impl Image {
    /// Its stage in the recipe's `build`.
    fn stage(self) -> &'static str {
        match self {
            Image::Notebook => "notebook",
            Image::Llamacpp => "llamacpp",
            Image::NotebookCuda => "notebook-cuda",
            Image::Vllm => "vllm",
            Image::Server => "server",
            Image::VmDebian => "vm-debian",
            Image::VmTiny => "vm-tiny",
        }
    }

    /// Whether it is a container image (built on the base image, with Docker).
    fn is_container(self) -> bool {
        !matches!(self, Image::VmDebian | Image::VmTiny)
    }
}

/// The recipe's stages for `images`: what was named (after the base, for a container image),
/// or, when nothing was, the base and the notebook and llama.cpp images every machine uses.
fn stages(images: &[Image]) -> Vec<&'static str> {
    let named = if images.is_empty() {
        &[Image::Notebook, Image::Llamacpp][..]
    } else {
        images
    };
    let base = named.iter().any(|i| i.is_container()).then_some("base");
    base.into_iter()
        .chain(named.iter().map(|i| i.stage()))
        .collect()
}

pub fn build(settings: &Settings, images: &[Image]) -> anyhow::Result<()> {
    let data_dir = settings.data_dir()?;
    let cache = data_dir.join("images-cache");
    let recipe = tempfile::Builder::new()
        .prefix("einsora-images-")
        .tempdir()
        .context("making a directory for the image recipe")?;
    let root = recipe.path().join("images");
    for (path, text) in RECIPE {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().expect("a parent"))?;
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    for script in [
        "build",
        "dockerd",
        "server/entrypoint.sh",
        "postgres/start.sh",
    ] {
        std::fs::set_permissions(root.join(script), std::fs::Permissions::from_mode(0o755))?;
    }
    let status = Command::new("bash")
        .arg(root.join("build"))
        .args(stages(images))
        .env("EINSORA_IMAGES_CACHE", &cache)
        // A docker engine it had to start keeps running for the agent; its PID and log here.
        .env("EINSORA_DOCKERD_DIR", data_dir.join("dockerd"))
        // The server image runs the binary that builds it.
        .env(
            "EINSORA_SERVER_BINARY",
            std::env::current_exe().context("finding this program")?,
        )
        .status()
        .context("running the image build")?;
    if !status.success() {
        bail!("the image build failed ({status}); its output above says why");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_named_builds_what_every_machine_uses_and_the_gpu_images_only_when_named() {
        assert_eq!(stages(&[]), ["base", "notebook", "llamacpp"]);
        assert_eq!(stages(&[Image::Vllm]), ["base", "vllm"]);
        assert_eq!(
            stages(&[Image::NotebookCuda, Image::Vllm]),
            ["base", "notebook-cuda", "vllm"]
        );
        assert_eq!(stages(&[Image::VmDebian]), ["vm-debian"]);
        assert_eq!(
            stages(&[Image::VmDebian, Image::Notebook]),
            ["base", "vm-debian", "notebook"]
        );
    }

    /// vLLM's entrypoint, run with a stand-in for vLLM: the key reaches it in its own
    /// environment only, it is served offline, and what would trust remote code or open a TCP
    /// port is refused.
    #[test]
    fn the_vllm_entrypoint_keeps_its_key_out_of_argv_and_serves_offline() {
        let dir = tempfile::tempdir().unwrap();
        let serve = dir.path().join("serve.py");
        std::fs::write(&serve, include_str!("../../images/vllm/serve.py")).unwrap();
        let stand_in = dir.path().join("vllm");
        std::fs::write(
            &stand_in,
            "#!/bin/sh\necho \"argv: $*\"\necho \"key: $VLLM_API_KEY\"\necho \"offline: $HF_HUB_OFFLINE\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let model = dir.path().join("model");
        std::fs::create_dir(&model).unwrap();
        std::fs::write(model.join("config.json"), "{}").unwrap();
        let key = dir.path().join("api-key");
        std::fs::write(&key, "s3cret-key\n").unwrap();
        let socket = dir.path().join("llm.sock");
        let run = |extra: &[&str]| {
            Command::new("python3")
                .arg(&serve)
                .args(["--model", model.to_str().unwrap()])
                .args(["--uds", socket.to_str().unwrap()])
                .args(extra)
                .env("EINSORA_VLLM_BIN", &stand_in)
                .env("EINSORA_LLM_API_KEY_FILE", &key)
                .output()
                .unwrap()
        };
        // A value that looks like a flag is passed on as the value it is.
        let out = run(&["--served-model-name", "--trust-remote-code"]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        let argv = format!(
            "argv: serve {} --uds={} --served-model-name=--trust-remote-code",
            model.display(),
            socket.display()
        );
        assert!(said.contains(&argv), "{said}");
        assert!(
            said.contains("key: s3cret-key") && said.contains("offline: 1"),
            "{said}"
        );
        assert_eq!(
            said.matches("s3cret-key").count(),
            1,
            "only in its environment: {said}"
        );
        let refused: [&[&str]; 7] = [
            &["--trust-remote-code"],
            &["--trust_remote_code"],
            &["--trust-remote"],
            &["--port=8000"],
            &["--config", "x.yaml"],
            &["--max-num-seqs", "two"],
            &["--served-model-name", "a", "--served-model-name=b"],
        ];
        for args in refused {
            let out = run(args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && err.contains("serve.py:"),
                "{args:?}: {err}"
            );
            let ran = String::from_utf8_lossy(&out.stdout).contains("argv:");
            assert!(!ran, "{args:?}: vLLM never ran");
        }
        std::fs::write(&socket, "not a socket").unwrap();
        let out = run(&[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("not a socket"),
            "{err}"
        );
    }

    /// Every file of the recipe directory is built into the binary, so what `einsora images
    /// build` unpacks is the recipe the repository holds.
    #[test]
    fn the_recipe_holds_every_file_of_images() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../images");
        let mut wanted = Vec::new();
        for image in ["notebook", "llamacpp", "notebook-cuda", "vllm"] {
            for entry in std::fs::read_dir(root.join(image)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                wanted.push(format!("{image}/{name}"));
            }
        }
        for path in wanted {
            let bundled = RECIPE.iter().find(|(p, _)| *p == path);
            let text = std::fs::read_to_string(root.join(&path)).unwrap();
            assert_eq!(bundled.map(|(_, t)| *t), Some(text.as_str()), "{path}");
        }
    }
}
