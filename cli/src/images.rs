//! `einsora images build`: the images the docker driver runs by default, built on this machine
//! from Debian packages and Python wheels, for machines with no container registry. The recipe
//! (repository `images/`) is built into the binary and unpacked into a temporary directory;
//! downloads and logs are cached in `<data dir>/images-cache` between runs.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use anyhow::{Context, bail};
use einsora_runtime::settings::Settings;

/// The recipe's files, by their path under `images/`.
const RECIPE: [(&str, &str); 8] = [
    ("build", include_str!("../../images/build")),
    ("dockerd", include_str!("../../images/dockerd")),
    (
        "notebook/Dockerfile",
        include_str!("../../images/notebook/Dockerfile"),
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
        "llamacpp/requirements.txt",
        include_str!("../../images/llamacpp/requirements.txt"),
    ),
    (
        "llamacpp/serve.py",
        include_str!("../../images/llamacpp/serve.py"),
    ),
];

pub fn build(settings: &Settings) -> anyhow::Result<()> {
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
    for script in ["build", "dockerd"] {
        std::fs::set_permissions(root.join(script), std::fs::Permissions::from_mode(0o755))?;
    }
    let status = Command::new("bash")
        .arg(root.join("build"))
        .args(["base", "notebook", "llamacpp"])
        .env("EINSORA_IMAGES_CACHE", &cache)
        // A docker engine it had to start keeps running for the agent; its PID and log here.
        .env("EINSORA_DOCKERD_DIR", data_dir.join("dockerd"))
        .status()
        .context("running the image build")?;
    if !status.success() {
        bail!("the image build failed ({status}); its output above says why");
    }
    Ok(())
}
