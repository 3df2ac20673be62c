//! What a workload's server is started with, whichever driver runs it: the places it sees
//! (its run directory, its notebook's data, its model, its token file) at the same paths, and
//! the same arguments and environment, in a container and in a native sandbox. The images'
//! entrypoints (`images/*/start.py`, `serve.py`) read exactly this.

use std::path::PathBuf;

use einsora_core::run_dirs;

/// Inside the sandbox: the run directory, the notebook's data, the server's home.
pub const RUN_DIR: &str = "/run/einsora";
pub const DATA_DIR: &str = "/work";
pub const HOME: &str = "/home/einsora";
/// Where an endpoint's model is mounted: llama.cpp's GGUF file at `/model/model.gguf`, vLLM's
/// model directory at `/model`.
pub const MODEL_MOUNT: &str = "/model";
/// The most tokens one request may hold, prompt and answer: each of llama.cpp's slots gets this
/// much of its context (`--ctx-size` is the total, split over its `--parallel` slots), and
/// vLLM and MLX are held to the same.
const CONTEXT_PER_REQUEST: u32 = 1024;
/// Where the token file is mounted, read-only: not in a directory the workload can write.
pub const SECRETS_DIR: &str = "/run/secrets/einsora";

/// What the workload's server serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serves {
    /// JupyterLab, its notebooks in `data` (kept while the workload is stopped).
    Notebook { data: PathBuf },
    /// An OpenAI-compatible server with one fixed model, read-only.
    Endpoint {
        model: PathBuf,
        /// The name it serves its model under (`EndpointParams.served_name`): the engine's
        /// `--alias` (`--served-model-name`), so its own `/v1/models` says what the proxy
        /// routes by.
        alias: String,
        server: ModelServer,
        /// Requests it serves at once, whichever its server (`EndpointParams.slots`); the
        /// access proxy lets no more than this many through to it.
        slots: u32,
    },
}

impl Serves {
    /// Its socket's name in its run directory.
    pub fn socket_name(&self) -> &'static str {
        match self {
            Serves::Notebook { .. } => run_dirs::NOTEBOOK_SOCKET,
            Serves::Endpoint { .. } => run_dirs::ENDPOINT_SOCKET,
        }
    }

    /// Its token file's name, in the agent's secret directory and in [`SECRETS_DIR`].
    pub fn token_name(&self) -> &'static str {
        match self {
            Serves::Notebook { .. } => "token",
            Serves::Endpoint { .. } => "api-key",
        }
    }

    /// Where its token file is, inside the sandbox.
    pub fn token_path(&self) -> String {
        format!("{SECRETS_DIR}/{}", self.token_name())
    }

    /// The environment and arguments its entrypoint is started with, at the contract's paths;
    /// `cpus` are its class's. No token or key is in either: only its file's path.
    pub fn launch(&self, cpus: u32) -> (Vec<String>, Vec<String>) {
        self.launch_at(cpus, &ServerPaths::contract(self))
    }

    /// [`Serves::launch`], with its places where `paths` says: where there is no mount
    /// namespace to put them at the contract's paths (a Mac).
    pub fn launch_at(&self, cpus: u32, paths: &ServerPaths) -> (Vec<String>, Vec<String>) {
        let ServerPaths {
            run_dir,
            token_file,
            data_dir,
            home,
            model,
        } = paths;
        match self {
            Serves::Notebook { .. } => {
                let env = vec![
                    format!("EINSORA_RUN_DIR={run_dir}"),
                    format!("EINSORA_TOKEN_FILE={token_file}"),
                    format!("EINSORA_NOTEBOOK_DIR={data_dir}"),
                    format!("HOME={home}"),
                ];
                (env, Vec::new())
            }
            Serves::Endpoint {
                alias,
                server,
                slots,
                ..
            } => {
                let socket = format!("{run_dir}/{}", self.socket_name());
                let mut env = vec![
                    format!("EINSORA_LLM_SOCKET={socket}"),
                    format!("EINSORA_LLM_API_KEY_FILE={token_file}"),
                    format!("HOME={home}"),
                ];
                let slots = (*slots).max(1);
                let parallel = slots.to_string();
                let args = match server {
                    ModelServer::LlamaCpp => {
                        let threads = cpus.max(1).to_string();
                        let args = ["--alias", alias, "--threads", &threads, "--parallel"];
                        let mut args: Vec<String> = args.map(str::to_owned).to_vec();
                        args.push(parallel);
                        // The total context: each slot's share is one request's.
                        let context = CONTEXT_PER_REQUEST.saturating_mul(slots);
                        args.push(format!("--ctx-size={context}"));
                        // Where its model isn't at the contract's path (a Mac: no mounts).
                        if *model != server.model_path() {
                            args.push(format!("--model={model}"));
                        }
                        args
                    }
                    ModelServer::Mlx => {
                        // Offline, its hub's credentials gone (serve.py sets and removes them
                        // itself too); one model, the one given.
                        env.extend(
                            [
                                "HF_HUB_OFFLINE=1",
                                "TRANSFORMERS_OFFLINE=1",
                                "HF_HUB_DISABLE_TELEMETRY=1",
                            ]
                            .map(str::to_owned),
                        );
                        vec![
                            format!("--model={model}"),
                            format!("--alias={alias}"),
                            format!("--ctx-size={CONTEXT_PER_REQUEST}"),
                            format!("--parallel={parallel}"),
                        ]
                    }
                    ModelServer::Vllm => {
                        // Offline, and nothing phoned home; its caches in the tmpfs. Remote
                        // code stays off (vLLM's default: no --trust-remote-code), and the
                        // agent refused a model that asks for it.
                        env.extend(
                            [
                                "HF_HUB_OFFLINE=1",
                                "TRANSFORMERS_OFFLINE=1",
                                "VLLM_NO_USAGE_STATS=1",
                                "VLLM_CACHE_ROOT=/tmp/vllm",
                            ]
                            .map(str::to_owned),
                        );
                        // One argument per flag: no value can read as a flag.
                        vec![
                            format!("--model={model}"),
                            format!("--served-model-name={alias}"),
                            format!("--uds={socket}"),
                            format!("--max-num-seqs={parallel}"),
                            format!("--max-model-len={CONTEXT_PER_REQUEST}"),
                        ]
                    }
                };
                (env, args)
            }
        }
    }
}

/// Where a server finds its places: the contract's paths ([`ServerPaths::contract`]) inside a
/// container or bubblewrap; the host's own on a Mac.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPaths {
    pub run_dir: String,
    pub token_file: String,
    /// A notebook's files.
    pub data_dir: String,
    pub home: String,
    /// An endpoint's model, as its server takes it.
    pub model: String,
}

impl ServerPaths {
    pub fn contract(serves: &Serves) -> ServerPaths {
        let model = match serves {
            Serves::Endpoint { server, .. } => server.model_path(),
            Serves::Notebook { .. } => String::new(),
        };
        ServerPaths {
            run_dir: RUN_DIR.to_owned(),
            token_file: serves.token_path(),
            data_dir: DATA_DIR.to_owned(),
            home: HOME.to_owned(),
            model,
        }
    }
}

/// Which server an endpoint runs: each takes the socket and the key file's path from the
/// environment (the entrypoint reads the key; it is never in env or argv).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelServer {
    /// llama.cpp's server (any accelerator it supports, CPU included).
    LlamaCpp,
    /// vLLM's OpenAI server, on NVIDIA GPUs.
    Vllm,
    /// An MLX model directory, served by `images/mlx/serve.py` on a Mac's GPU.
    Mlx,
}

impl ModelServer {
    /// The model's name in the endpoint's private directory: a file, or a directory.
    pub fn model_name(self) -> &'static str {
        match self {
            ModelServer::LlamaCpp => crate::models::MODEL_FILE,
            ModelServer::Vllm | ModelServer::Mlx => crate::models::weights::MODEL_DIR,
        }
    }

    /// Where the server finds its model, inside the sandbox.
    pub fn model_path(self) -> String {
        match self {
            ModelServer::LlamaCpp => format!("{MODEL_MOUNT}/{}", crate::models::MODEL_FILE),
            ModelServer::Vllm | ModelServer::Mlx => MODEL_MOUNT.to_owned(),
        }
    }

    /// The server for a catalog runtime, if Einsora runs endpoints with it.
    pub fn for_runtime(runtime: &str) -> Option<ModelServer> {
        match runtime {
            "llama.cpp" => Some(ModelServer::LlamaCpp),
            "vllm" => Some(ModelServer::Vllm),
            "mlx" => Some(ModelServer::Mlx),
            _ => None,
        }
    }

    /// The server an endpoint's runtime names; llama.cpp when it names none Einsora has.
    pub fn of_runtime(runtime: &str) -> ModelServer {
        ModelServer::for_runtime(runtime).unwrap_or(ModelServer::LlamaCpp)
    }
}
