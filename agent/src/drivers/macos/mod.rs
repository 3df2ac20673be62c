//! The macos-native driver's parts (issue 17, in progress): JupyterLab and MLX servers as
//! processes of the owner's, under `sandbox-exec`. Built so far: the sandbox profile, written
//! from a typed description ([`profile::Profile`]) and judged, on any OS, by an evaluator of the
//! rules it writes ([`profile::check`]). Not yet: the driver itself, its environments (uv), the
//! stand-in `sandbox-exec` and MLX server, and `scripts/mac-check`. Nothing here has run on a
//! Mac (docs/hardware.md).

pub mod profile;
