//! The container a workload becomes: its sandbox (no network, or the fenced egress network for
//! the owner's notebooks: egress.rs; a read-only root, no
//! capabilities, no new privileges, the class's CPU, memory and pids limits, a non-root user, a
//! bounded log), the mounts (its private run directory, where its server listens on a Unix
//! socket; its token, read-only, from outside any directory it can write; its data; its model),
//! and the fingerprint of all that, kept as a label so an adopted container is one with the
//! same sandbox.

use std::path::{Path, PathBuf};

use super::egress::Network;
use super::gpus::GpuPath;
use crate::drivers::local::PIDS_LIMIT;
use crate::drivers::local::contract::Serves;
use crate::drivers::local::contract::{DATA_DIR, HOME, RUN_DIR};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const LABEL_MACHINE: &str = "einsora.machine";
pub const LABEL_WORKLOAD: &str = "einsora.workload";
pub const LABEL_ATTEMPT: &str = "einsora.attempt";
pub const LABEL_FINGERPRINT: &str = "einsora.fingerprint";
/// Its network (`none` or the egress network), so a container adopted as it was made keeps
/// its fence up.
pub const LABEL_NETWORK: &str = "einsora.network";

/// Everything a workload's container is made from.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub machine: String,
    pub workload: String,
    pub attempt: u32,
    pub image: String,
    /// The image's ID when the container was made: part of the fingerprint.
    pub image_id: String,
    /// `uid:gid` the server runs as.
    pub user: (u32, u32),
    pub cpus: u32,
    pub memory_bytes: u64,
    /// What its container's log keeps, in all: two files of half as much.
    pub log_bytes: u64,
    /// NVIDIA GPUs by UUID, reserved exactly.
    pub gpus: Vec<String>,
    /// How the engine is asked for them (gpus.rs); `None` when it can't give them.
    pub gpu_path: Option<GpuPath>,
    pub network: Network,
    pub run_dir: PathBuf,
    /// The agent's own directory holding the token file.
    pub secret_dir: PathBuf,
    pub serves: Serves,
}

impl Sandbox {
    /// Where the server listens, on this machine.
    pub fn socket(&self) -> PathBuf {
        self.run_dir.join(self.serves.socket_name())
    }

    /// The file, in the agent's own secret directory, that hands the server its token.
    pub fn token_file(&self) -> PathBuf {
        self.secret_dir.join(self.serves.token_name())
    }

    pub fn name(&self) -> String {
        format!("einsora-{}-{}", self.workload, self.attempt)
    }

    /// The Engine API's create body, labelled with its fingerprint.
    pub fn create_body(&self) -> Value {
        let mut body = self.body_without_labels();
        body["Labels"] = json!({
            LABEL_MACHINE: self.machine,
            LABEL_WORKLOAD: self.workload,
            LABEL_ATTEMPT: self.attempt.to_string(),
            LABEL_FINGERPRINT: self.fingerprint(),
            LABEL_NETWORK: self.network.mode(),
        });
        body
    }

    /// SHA-256 of the image ID and everything that makes the sandbox, not the attempt.
    pub fn fingerprint(&self) -> String {
        let mut body = self.body_without_labels();
        body["Image"] = json!(self.image_id);
        let digest = Sha256::digest(body.to_string().as_bytes());
        crate::models::hex(&digest)
    }

    fn body_without_labels(&self) -> Value {
        let (uid, gid) = self.user;
        let token_file = self.serves.token_path();
        let mut binds = vec![
            bind(&self.run_dir, RUN_DIR, false),
            format!("{}:{token_file}:ro", self.token_file().display()),
        ];
        match &self.serves {
            Serves::Notebook { data } => binds.push(bind(data, DATA_DIR, false)),
            Serves::Endpoint { model, server, .. } => {
                binds.push(bind(model, &server.model_path(), true));
            }
        }
        // The notebook's image starts JupyterLab by itself: no command of its own.
        let (env, args) = self.serves.launch(self.cpus);
        let cmd = if args.is_empty() {
            Value::Null
        } else {
            json!(args)
        };
        let memory = i64::try_from(self.memory_bytes).unwrap_or(i64::MAX);
        let mut host = json!({
            "NetworkMode": self.network.mode(),
            "ReadonlyRootfs": true,
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "PidsLimit": PIDS_LIMIT,
            "Memory": memory,
            "MemorySwap": memory,
            "NanoCpus": i64::from(self.cpus.max(1)) * 1_000_000_000,
            "Binds": binds,
            "Tmpfs": {
                "/tmp": "rw,nosuid,nodev,size=256m",
                HOME: format!("rw,nosuid,nodev,size=64m,uid={uid},gid={gid}"),
            },
            "RestartPolicy": { "Name": "no" },
            "LogConfig": {
                "Type": "json-file",
                "Config": {
                    "max-size": (self.log_bytes / 2).max(1).to_string(),
                    "max-file": "2",
                },
            },
        });
        if let Some(path) = self.gpu_path
            && !self.gpus.is_empty()
        {
            host["DeviceRequests"] = path.device_requests(&self.gpus);
        }
        let mut body = json!({
            "Image": self.image,
            "User": format!("{uid}:{gid}"),
            "Env": env,
            "HostConfig": host,
            "NetworkDisabled": self.network == Network::None,
        });
        if !cmd.is_null() {
            body["Cmd"] = cmd;
        }
        body
    }
}

fn bind(host: &Path, container: &str, read_only: bool) -> String {
    let mode = if read_only { "ro" } else { "rw" };
    format!("{}:{container}:{mode}", host.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::local::contract::ModelServer;

    fn notebook() -> Sandbox {
        Sandbox {
            machine: "m1".into(),
            workload: "w1".into(),
            attempt: 1,
            image: "einsora/notebook:local".into(),
            image_id: "sha256:aa".into(),
            user: (1000, 1000),
            cpus: 1,
            memory_bytes: 2 << 30,
            log_bytes: 20 << 20,
            gpus: Vec::new(),
            gpu_path: None,
            network: Network::None,
            run_dir: "/state/run/w1".into(),
            secret_dir: "/state/secrets/w1".into(),
            serves: Serves::Notebook {
                data: "/state/data/w1".into(),
            },
        }
    }

    #[test]
    fn the_sandbox_has_no_network_no_capabilities_and_the_class_limits() {
        let body = notebook().create_body();
        let host = &body["HostConfig"];
        assert_eq!(host["NetworkMode"], "none");
        assert_eq!(host["ReadonlyRootfs"], true);
        assert_eq!(host["CapDrop"], json!(["ALL"]));
        assert_eq!(host["SecurityOpt"], json!(["no-new-privileges"]));
        assert_eq!(host["Memory"], 2_i64 << 30);
        assert_eq!(host["NanoCpus"], 1_000_000_000_i64);
        assert_eq!(
            host["LogConfig"],
            json!({ "Type": "json-file", "Config": { "max-size": "10485760", "max-file": "2" } }),
            "its log keeps 20 MiB at most"
        );
        assert_eq!(body["User"], "1000:1000");
        assert!(
            host.get("DeviceRequests").is_none(),
            "a CPU class gets no GPU"
        );
        let env = body["Env"].to_string();
        assert!(
            env.contains("EINSORA_TOKEN_FILE=/run/secrets/einsora/token"),
            "{env}"
        );
        let binds = host["Binds"].to_string();
        assert!(
            binds.contains("/state/secrets/w1/token:/run/secrets/einsora/token:ro"),
            "the token is mounted read-only from the agent's own directory: {binds}"
        );
        assert!(binds.contains("/state/run/w1:/run/einsora:rw"), "{binds}");
    }

    #[test]
    fn the_fingerprint_follows_the_sandbox_and_the_image_not_the_attempt() {
        let a = notebook();
        let mut next = a.clone();
        next.attempt = 2;
        assert_eq!(a.fingerprint(), next.fingerprint());
        let mut rebuilt = a.clone();
        rebuilt.image_id = "sha256:bb".into();
        assert_ne!(a.fingerprint(), rebuilt.fingerprint());
        let mut bigger = a.clone();
        bigger.memory_bytes *= 2;
        assert_ne!(a.fingerprint(), bigger.fingerprint());
        let mut longer_logs = a.clone();
        longer_logs.log_bytes *= 2;
        assert_ne!(a.fingerprint(), longer_logs.fingerprint());
        let mut networked = a.clone();
        networked.network = Network::Egress;
        assert_ne!(a.fingerprint(), networked.fingerprint());
    }

    #[test]
    fn an_egress_notebook_joins_the_fenced_network_and_nothing_else_changes() {
        let mut s = notebook();
        s.network = Network::Egress;
        let body = s.body_without_labels();
        assert_eq!(body["HostConfig"]["NetworkMode"], "einsora-egress");
        assert_eq!(body["NetworkDisabled"], false);
        assert!(
            body["HostConfig"].get("PortBindings").is_none(),
            "it publishes no port"
        );
        let mut closed = body.clone();
        closed["HostConfig"]["NetworkMode"] = json!("none");
        closed["NetworkDisabled"] = json!(true);
        assert_eq!(closed, notebook().body_without_labels());
    }

    /// What a machine without a GPU can check of a vLLM endpoint: its exact GPUs, its model
    /// read-only, its socket, and no key in its environment or arguments.
    #[test]
    fn a_vllm_endpoint_gets_its_gpus_its_model_and_its_socket() {
        let mut s = notebook();
        s.gpus = vec!["GPU-aaaa".into(), "GPU-bbbb".into()];
        s.gpu_path = Some(GpuPath::Runtime);
        s.serves = Serves::Endpoint {
            model: "/state/models/w1/model".into(),
            alias: "org/model".into(),
            server: ModelServer::Vllm,
            slots: 2,
        };
        let body = s.create_body();
        let host = &body["HostConfig"];
        assert_eq!(
            host["DeviceRequests"][0]["DeviceIDs"],
            json!(["GPU-aaaa", "GPU-bbbb"])
        );
        assert_eq!(host["DeviceRequests"][0]["Capabilities"], json!([["gpu"]]));
        assert_eq!(host["NetworkMode"], "none");
        let binds = host["Binds"].to_string();
        assert!(
            binds.contains("\"/state/models/w1/model:/model:ro\""),
            "the model directory, read-only: {binds}"
        );
        assert!(!binds.contains("model.gguf"), "{binds}");
        assert!(
            !binds.contains("/work"),
            "an endpoint has no notebook data: {binds}"
        );
        assert_eq!(
            body["Cmd"],
            json!([
                "--model=/model",
                "--served-model-name=org/model",
                "--uds=/run/einsora/llm.sock",
                "--max-num-seqs=2",
                "--max-model-len=1024",
            ]),
            "its slots (two at once), a request's context each; no remote code"
        );
        assert_eq!(s.socket(), PathBuf::from("/state/run/w1/llm.sock"));
        let env = body["Env"].to_string();
        assert!(
            env.contains("EINSORA_LLM_API_KEY_FILE=/run/secrets/einsora/api-key"),
            "{env}"
        );
        assert!(
            binds.contains("/state/secrets/w1/api-key:/run/secrets/einsora/api-key:ro"),
            "the key is mounted read-only from the agent's own directory: {binds}"
        );
        for offline in ["HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1"] {
            assert!(env.contains(offline), "served offline: {env}");
        }
        assert!(
            !env.to_lowercase().contains("api_key="),
            "only the key file's path: {env}"
        );
        assert_eq!(ModelServer::for_runtime("vllm"), Some(ModelServer::Vllm));
        assert_eq!(ModelServer::for_runtime("mlx"), Some(ModelServer::Mlx));
        assert_eq!(ModelServer::for_runtime("sglang"), None);
    }

    /// Exactly its GPUs, whichever way the engine gives them; a change of way is a change of
    /// sandbox (another fingerprint), so an adopted container is one made the same way.
    #[test]
    fn nvidia_classes_reserve_exact_gpus() {
        let mut s = notebook();
        s.gpus = vec!["GPU-1234".into()];
        s.gpu_path = Some(GpuPath::Runtime);
        let by_runtime = s.create_body();
        assert_eq!(
            by_runtime["HostConfig"]["DeviceRequests"][0]["DeviceIDs"],
            json!(["GPU-1234"])
        );
        let runtime_print = s.fingerprint();
        s.gpu_path = Some(GpuPath::Cdi);
        assert_eq!(
            s.create_body()["HostConfig"]["DeviceRequests"],
            json!([{ "Driver": "cdi", "DeviceIDs": ["nvidia.com/gpu=GPU-1234"] }])
        );
        assert_ne!(s.fingerprint(), runtime_print);
    }
}
