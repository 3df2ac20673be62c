//! The command line: every role, and the operator's commands.

use clap::{Parser, Subcommand};
use einsora_runtime::grpc::InternalTls;
use einsora_runtime::settings::Settings;

use crate::{
    backup, client, healthcheck, images, join, machine_check, migrate, role, setup, shell_docs,
    system, up,
};

/// Einsora turns the machines you own into a small GPU cloud. Every setting is an EINSORA_*
/// environment variable with a Solo default (docs/operations.md).
#[derive(Debug, Parser)]
#[command(name = "einsora", version = env!("VERSION_AND_COMMIT"))]
pub struct Cli {
    #[command(flatten)]
    pub global: client::Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the embedded database migrations (safe to run again).
    Migrate,
    /// Write everything this installation needs (its database, its certificates and CA, its
    /// catalog) into a new owner-only archive, while it runs. The archive holds the CA's keys.
    Backup {
        /// The archive to write (a new file).
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Restore an archive of `einsora backup` into this installation's database (SQLite or
    /// Postgres, whichever the backup came from) and certificate directory, both empty.
    Restore {
        /// The archive to read.
        #[arg(long)]
        from: std::path::PathBuf,
    },
    /// Exit 0 if the role this environment's settings place answers now (gRPC health over
    /// mutual TLS, or a connection): a container's health check in a Lab (compose/).
    Healthcheck {
        #[arg(value_enum)]
        role: healthcheck::Checked,
    },
    /// Manage the installation's certificate authority.
    Pki {
        #[command(subcommand)]
        command: PkiCommand,
    },
    /// Run the api role: authn/z, validation, quotas, recording intent.
    Api,
    /// Run the controller role: admission, placement, reconcile, agents' Sync.
    Controller,
    /// Run the metering role: hourly usage records.
    Metering,
    /// Run the access proxy role.
    Access,
    /// Run the gateway role: the public HTTP edge.
    Gateway,
    /// Run a node agent on this machine, or join it to a controller first (`agent join`).
    Agent {
        #[command(subcommand)]
        command: Option<AgentCommand>,
    },
    /// Run Einsora on this machine: every role, supervised, on 127.0.0.1, with its data in
    /// one owner-only directory; asks for the owner account on the first run.
    Up,
    /// Run the development all-in-one: like `up`, on a throwaway SQLite database (or
    /// EINSORA_DATABASE_URL), with the fake backend and the seeded dev accounts.
    Dev,
    /// Create the owner account, tenant and default quotas (migrating the database first);
    /// at least 12 characters of password, asked for in the terminal. Run as root where the
    /// system service is installed (/etc/einsora/einsora.env), it sets up that installation,
    /// as the `einsora` user, and starts the service.
    Setup {
        /// The owner's email, used to log in.
        #[arg(long)]
        email: String,
        /// Read the password from standard input instead of asking for it.
        #[arg(long)]
        password_stdin: bool,
        /// Set a new password for an existing account, ending its sessions.
        #[arg(long)]
        reset_password: bool,
    },
    /// Container images for the docker driver, built on this machine with no registry.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// Print a completion script for a shell: `einsora completion bash > /etc/bash_completion.d/einsora`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (einsora.1 and one per subcommand) into a directory: for packaging.
    #[command(hide = true)]
    Man {
        #[arg(long)]
        out: std::path::PathBuf,
    },
    #[command(flatten)]
    Client(client::ClientCommand),
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Build the notebook (JupyterLab) and endpoint (llama.cpp) images from Debian packages
    /// and Python wheels (needs root and a Docker engine; started if none answers). Name
    /// `notebook-cuda` (PyTorch with CUDA) or `vllm` to build those instead: several GB each,
    /// for machines with NVIDIA GPUs; or `server` for a Lab's control plane (this binary) and
    /// its Postgres, which compose/ runs.
    Build {
        #[arg(value_enum)]
        images: Vec<images::Image>,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Enrol this machine with a one-time enrolment token; its identity is kept in
    /// EINSORA_AGENT_STATE_DIR.
    Join {
        /// The enrolment token, as created (it ends with the controller's CA fingerprint).
        #[arg(long)]
        token: String,
        /// The controller's agents' port: `https://host:port`.
        #[arg(long)]
        controller: String,
    },
    /// Print what this machine's agent would report of it (its NVIDIA GPUs from nvidia-smi
    /// among them), as JSON; with `--nvidia-smi-recording FILE`, also save nvidia-smi's own
    /// answer to the agent's query there (a recording for the inventory's tests).
    Inventory {
        #[arg(long)]
        nvidia_smi_recording: Option<std::path::PathBuf>,
    },
    /// Run a Python script in the sandbox a linux-native notebook gets, with exactly the GPUs
    /// named (by UUID) and no others, with the interpreter given: to check a machine
    /// (scripts/gpu-check). Its exit status is the script's.
    Sandbox {
        /// An interpreter that has what the script imports (EINSORA_NATIVE_PYTHON's kind).
        #[arg(long)]
        python: std::path::PathBuf,
        /// A GPU it may see, by UUID (repeat for more; none: no GPU).
        #[arg(long = "gpu")]
        gpus: Vec<String>,
        script: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PkiCommand {
    /// Create the CA (if there is none) and a certificate for every service role.
    Init,
}

impl Cli {
    pub fn run(self) -> anyhow::Result<()> {
        let settings = Settings::from_env();
        match self.command {
            Command::Client(command) => {
                let http_addr =
                    settings.socket_addr(einsora_gateway::HTTP_ADDR, "127.0.0.1:8080")?;
                client::run(self.global, command, &http_addr.to_string())
            }
            Command::Migrate if system::applies(&settings) => {
                system::rerun_as_service_user().map(drop)
            }
            Command::Migrate => migrate::run(&settings),
            Command::Backup { .. } | Command::Restore { .. } if system::applies(&settings) => {
                system::rerun_as_service_user().map(drop)
            }
            Command::Backup { to } => backup::backup(&settings, &to),
            Command::Healthcheck { role } => healthcheck::run(&settings, role),
            Command::Restore { from } => backup::restore(&settings, &from),
            Command::Up => up::run(up::Profile::Solo),
            Command::Dev => up::run(up::Profile::Dev),
            Command::Setup { .. } if system::applies(&settings) => system::setup(),
            Command::Setup {
                email,
                password_stdin,
                reset_password,
            } => setup::run(&settings, &email, password_stdin, reset_password),
            Command::Completion { shell } => {
                shell_docs::completion(shell, &mut std::io::stdout().lock())
            }
            Command::Man { out } => shell_docs::man_pages(&out),
            Command::Images {
                command: ImagesCommand::Build { images },
            } => images::build(&settings, &images),
            Command::Pki {
                command: PkiCommand::Init,
            } => {
                let dir = InternalTls::from_settings(&settings)?;
                eprintln!("certificates are in {}", dir.init()?.display());
                if let Some(root) = up::issue_access_certificate(&settings)? {
                    eprintln!("the access proxy's root for browsers: {}", root.display());
                }
                Ok(())
            }
            Command::Api => role::run(
                &settings,
                "api",
                einsora_api::Config::from_settings,
                einsora_api::run,
            ),
            Command::Controller => role::run(
                &settings,
                "controller",
                einsora_controller::Config::from_settings,
                einsora_controller::run,
            ),
            Command::Metering => role::run(
                &settings,
                "metering",
                einsora_metering::Config::from_settings,
                einsora_metering::run,
            ),
            Command::Access => role::run(
                &settings,
                "access",
                einsora_access::Config::from_settings,
                einsora_access::run,
            ),
            Command::Gateway => role::run(
                &settings,
                "gateway",
                einsora_gateway::Config::from_settings,
                einsora_gateway::run,
            ),
            Command::Agent {
                command: Some(AgentCommand::Join { token, controller }),
            } => join::run(&settings, token, controller),
            Command::Agent {
                command:
                    Some(AgentCommand::Inventory {
                        nvidia_smi_recording,
                    }),
            } => machine_check::inventory(&settings, nvidia_smi_recording.as_deref()),
            Command::Agent {
                command:
                    Some(AgentCommand::Sandbox {
                        python,
                        gpus,
                        script,
                    }),
            } => machine_check::sandbox(&settings, python, gpus, script),
            Command::Agent { command: None } => role::run(
                &settings,
                "agent",
                einsora_agent::Config::from_settings,
                einsora_agent::run,
            ),
        }
    }
}
