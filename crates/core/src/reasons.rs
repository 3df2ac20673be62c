//! The reasons vocabulary: every sentence a workload's timeline can hold, built from typed
//! parameters. Runtime text never reaches a timeline; `clean_reason` bounds and sanitises every
//! reason before it is stored, as a last line of defence.

use std::fmt;
use std::time::Duration;

use crate::agent::StatusCode;
use crate::kind::WorkloadKind;

/// Who did something, as a timeline names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The person: an email with local accounts, a user name in dev mode.
    pub subject: String,
    pub credential: Credential,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A session the dashboard signed in.
    BrowserSession,
    /// A session `einsora login` signed in.
    CliSession,
    /// An API token, named by its owner and shown by its public prefix (e.g. `tsk_Ab3x`).
    ApiToken { name: String, prefix: String },
    /// Dev mode's seeded users: no credential worth naming.
    Dev,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.credential {
            Credential::BrowserSession => write!(f, "{} (browser session)", self.subject),
            Credential::CliSession => write!(f, "{} (CLI session)", self.subject),
            Credential::ApiToken { name, prefix } => {
                write!(f, "{} (API token {name:?} ({prefix}…))", self.subject)
            }
            Credential::Dev => f.write_str(&self.subject),
        }
    }
}

/// What signed a session in: it names the session in timelines, and grants nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionClient {
    /// The dashboard, and any client that doesn't say.
    #[default]
    Browser,
    /// `einsora login`.
    Cli,
}

impl SessionClient {
    /// The word the store keeps.
    pub fn word(self) -> &'static str {
        match self {
            SessionClient::Browser => "browser",
            SessionClient::Cli => "cli",
        }
    }

    pub fn from_word(word: &str) -> Option<SessionClient> {
        match word {
            "browser" => Some(SessionClient::Browser),
            "cli" => Some(SessionClient::Cli),
            _ => None,
        }
    }

    /// How a timeline names a session of this client.
    pub fn credential(self) -> Credential {
        match self {
            SessionClient::Browser => Credential::BrowserSession,
            SessionClient::Cli => Credential::CliSession,
        }
    }
}

/// A user's action on a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAction {
    Start,
    Stop,
    Delete,
}

/// What a catalog entry that vanished was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogEntry {
    GpuClass,
    Image,
}

/// What a class's capacity is counted in, as a wait for it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapacityUnit {
    /// Accelerator devices (NVIDIA, AMD, an Apple GPU).
    Gpus,
    /// A CPU class's CPUs.
    Cpus,
}

impl CapacityUnit {
    /// The unit of a class on `accelerator`.
    pub fn of(accelerator: crate::accelerator::AcceleratorKind) -> CapacityUnit {
        match accelerator {
            crate::accelerator::AcceleratorKind::Cpu => CapacityUnit::Cpus,
            _ => CapacityUnit::Gpus,
        }
    }
}

/// Every reason a timeline can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    Created {
        by: Actor,
    },
    Requested {
        action: UserAction,
        by: Actor,
    },
    AccessOpened {
        by: Actor,
    },
    /// Free capacity is shown only to trusted tenants.
    WaitingForCapacity {
        class: String,
        /// What a workload of the class is counted in: its GPUs, or a CPU class's CPUs.
        unit: CapacityUnit,
        requested: u32,
        free: Option<u32>,
    },
    WaitingForMachineForClass {
        class: String,
    },
    WaitingForDriver {
        kind: WorkloadKind,
        class: String,
    },
    WaitingForItsMachine,
    /// Its machines' drivers for it isolate weakly, and run only the workloads of the user who
    /// owns the machine: it needs a strongly isolating driver (or its own machine).
    WaitingForIsolation {
        kind: WorkloadKind,
        class: String,
    },
    /// A CPU workload for a Mac's native driver, whose Apple GPU another workload holds: native
    /// code can use Metal, so it holds the GPU too.
    WaitingForAppleGpu {
        class: String,
    },
    /// Every machine that would take it already runs as many of its driver's workloads at
    /// once as it may: the driver table's limit (two macOS VMs per Mac), or its owner's
    /// (`EINSORA_VM_LIMIT`).
    WaitingForDriverRoom {
        kind: WorkloadKind,
        class: String,
    },
    Admitted {
        units: u32,
        class: String,
        served_by: Option<String>,
        on: Option<Placement>,
        /// Admitted on a class of its opt-in fallback list, not the one it requested (boxed:
        /// it keeps every reason small).
        fallback: Option<Box<Fallback>>,
    },
    /// A wait, for a workload with an opt-in fallback list (`fallbacks`, as its owner wrote
    /// them): when its fallbacks are tried, or that they had no room either.
    WaitingWithFallbacks {
        wait: Box<Reason>,
        fallbacks: Vec<String>,
        tried: FallbackTry,
    },
    /// A note on a request waiting longer than the aging threshold: smaller requests of its
    /// class and region no longer backfill ahead of it.
    HoldingBackSmaller {
        class: String,
        after: Duration,
    },
    /// A smaller request that would backfill ahead of an aged one of its class, and waits.
    WaitingBehindOlder {
        class: String,
        after: Duration,
    },
    MachineOffline,
    MachineOfflineTooLong {
        after: Duration,
    },
    Reported(StatusCode),
    RetryingRun,
    RetryingPark,
    RetryingRemove,
    StatusUnreadable,
    /// Running, but the runtime no longer has it.
    Vanished,
    CapacityUnreadable,
    ProvisioningTimedOut {
        after: Duration,
    },
    /// A fixed failure sentence from a backend's own vocabulary (e.g. `model server not ready
    /// (RevisionFailed)`): `&'static` so runtime text can't be passed.
    BackendFailure(&'static str),
    NoLongerOffered {
        entry: CatalogEntry,
        name: String,
    },
    /// Scale-to-zero: stopped after running this long without a request.
    ParkedWhenIdle {
        after: Duration,
    },
    /// Scale-to-zero: started again for a request to it, by its caller (an inference key's
    /// owner, with the key).
    WokenByRequest {
        by: Waker,
    },
    Ready,
    ResourcesReleased,
    Gone,
    /// Deleted without its machine's word: it can't be asked (revoked), or was away too long
    /// (and is told to remove it if it returns).
    DeletedWithoutItsMachine(MachineGone),
}

/// Who a request that woke a parked endpoint came from: the user, and the inference key it
/// carried (named by its owner, shown by its public prefix, e.g. `isk_Ab3x`); an API token's
/// request names the user alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waker {
    pub subject: String,
    pub key: Option<KeyName>,
}

/// An inference key as a timeline names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyName {
    pub name: String,
    pub prefix: String,
}

impl fmt::Display for Waker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.subject)?;
        if let Some(KeyName { name, prefix }) = &self.key {
            write!(f, " (inference key {name:?} ({prefix}…))")?;
        }
        Ok(())
    }
}

/// A whole idle time as people say it: `10 min`, `2 h`, `1 h 30 min`, `90 s`.
fn idle_words(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (h, 0, 0) => format!("{h} h"),
        (h, m, 0) => format!("{h} h {m} min"),
        _ => format!("{secs} s"),
    }
}

/// Why a machine can't confirm a removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachineGone {
    /// Offline for longer than the failure threshold.
    Away {
        after: Duration,
    },
    Revoked,
}

/// A fallback admission: the class it requested, and how long it waits for it before its
/// fallbacks are tried (`fallback_after_s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub requested: String,
    pub after: Duration,
}

/// Where a waiting workload stands with its fallbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackTry {
    /// Not yet: they are tried once it has waited this long.
    After(Duration),
    /// Tried this pass: none had room either.
    NoRoom,
}

/// Where an agent placement put a workload, for its admission reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub machine: String,
    pub driver: String,
    /// A CPU workload on a Mac still holds its Apple GPU, since native code can use Metal.
    pub reserves_apple_gpu: bool,
}

const DETAILS: &str = "The operator's log has the details under this workload's ID.";

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Created { by } => write!(f, "created by {by}"),
            Reason::Requested { action, by } => {
                let action = match action {
                    UserAction::Start => "start",
                    UserAction::Stop => "stop",
                    UserAction::Delete => "delete",
                };
                write!(f, "{action} requested by {by}")
            }
            Reason::AccessOpened { by } => write!(f, "opened by {by}"),
            Reason::WaitingForCapacity {
                class,
                unit,
                requested,
                free,
            } => {
                let unit = match unit {
                    CapacityUnit::Gpus => "GPU(s)",
                    CapacityUnit::Cpus => "CPU(s)",
                };
                write!(
                    f,
                    "waiting for {class} capacity: requested {requested} {unit}, "
                )?;
                match free {
                    Some(free) => write!(f, "{free} free"),
                    None => f.write_str("not enough free right now"),
                }
            }
            Reason::WaitingForMachineForClass { class } => {
                write!(
                    f,
                    "waiting for a machine that can run {class} to come online"
                )
            }
            Reason::WaitingForDriver { kind, class } => write!(
                f,
                "waiting for a machine with a driver that runs {kind}s on {class}: none here has one yet"
            ),
            Reason::WaitingForIsolation { kind, class } => write!(
                f,
                "waiting for a machine that can isolate it: the drivers here that run {kind}s on \
                 {class} run only the workloads of the user who owns the machine"
            ),
            Reason::WaitingForItsMachine => {
                f.write_str("waiting for its machine to come online: its disk is there")
            }
            Reason::WaitingForAppleGpu { class } => write!(
                f,
                "waiting for {class} on a Mac whose Apple GPU is in use: native code can use \
                 Metal, so it needs the GPU free too"
            ),
            Reason::WaitingForDriverRoom { kind, class } => write!(
                f,
                "waiting for room: each machine here that runs {kind}s on {class} already runs \
                 as many at once as it may"
            ),
            Reason::Admitted {
                units,
                class,
                served_by,
                on,
                fallback,
            } => {
                write!(f, "admitted: {units} × {class}")?;
                if let Some(runtime) = served_by {
                    write!(f, ", served by {runtime}")?;
                }
                if let Some(p) = on {
                    write!(f, " on {} with {}", p.machine, p.driver)?;
                    if p.reserves_apple_gpu {
                        f.write_str(
                            "; its Apple GPU is reserved too, since native code can use Metal",
                        )?;
                    }
                }
                if let Some(Fallback { requested, after }) = fallback.as_deref() {
                    write!(f, "; a fallback: {requested} had no room")?;
                    if !after.is_zero() {
                        write!(f, " for {}", go_duration(*after))?;
                    }
                }
                Ok(())
            }
            Reason::WaitingWithFallbacks {
                wait,
                fallbacks,
                tried,
            } => {
                let list = fallbacks.join(", ");
                let one = fallbacks.len() == 1;
                match tried {
                    FallbackTry::After(after) if after.is_zero() => write!(f, "{wait}"),
                    FallbackTry::After(after) => {
                        let (noun, verb) = if one {
                            ("fallback", "is")
                        } else {
                            ("fallbacks", "are")
                        };
                        write!(
                            f,
                            "{wait}; its {noun} {verb} tried after {}: {list}",
                            go_duration(*after)
                        )
                    }
                    FallbackTry::NoRoom => {
                        let (noun, verb) = if one {
                            ("fallback", "has")
                        } else {
                            ("fallbacks", "have")
                        };
                        write!(f, "{wait}; its {noun} {verb} no room either: {list}")
                    }
                }
            }
            Reason::HoldingBackSmaller { class, after } => write!(
                f,
                "holding back smaller {class} requests for it: it has waited over {}",
                go_duration(*after)
            ),
            Reason::WaitingBehindOlder { class, after } => write!(
                f,
                "waiting behind a larger {class} request that has waited over {}",
                go_duration(*after)
            ),
            Reason::MachineOffline => {
                f.write_str("its machine is offline; waiting for it to reconnect")
            }
            Reason::MachineOfflineTooLong { after } => {
                write!(
                    f,
                    "its machine has been offline for over {}",
                    go_duration(*after)
                )
            }
            Reason::Reported(code) => f.write_str(code.reason()),
            Reason::RetryingRun => {
                write!(f, "couldn't start it on the runtime; retrying. {DETAILS}")
            }
            Reason::RetryingPark => {
                write!(f, "couldn't stop it on the runtime; retrying. {DETAILS}")
            }
            Reason::RetryingRemove => {
                write!(
                    f,
                    "couldn't remove it from the runtime; retrying. {DETAILS}"
                )
            }
            Reason::Vanished => f.write_str("it vanished from the runtime"),
            Reason::StatusUnreadable => {
                write!(
                    f,
                    "couldn't read its status from the runtime; retrying. {DETAILS}"
                )
            }
            Reason::CapacityUnreadable => {
                write!(
                    f,
                    "couldn't check for free GPUs on the runtime; retrying. {DETAILS}"
                )
            }
            Reason::ProvisioningTimedOut { after } => {
                write!(f, "it didn't become ready within {}", go_duration(*after))
            }
            Reason::BackendFailure(text) => f.write_str(text),
            Reason::ParkedWhenIdle { after } => {
                write!(f, "parked after {} without requests", idle_words(*after))
            }
            Reason::WokenByRequest { by } => write!(f, "woken by a request from {by}"),
            Reason::NoLongerOffered { entry, name } => {
                let entry = match entry {
                    CatalogEntry::GpuClass => "GPU class",
                    CatalogEntry::Image => "image",
                };
                write!(
                    f,
                    "can't start: {entry} {name:?} is no longer offered by this installation"
                )
            }
            Reason::Ready => f.write_str("ready"),
            Reason::ResourcesReleased => f.write_str("resources released"),
            Reason::Gone => f.write_str("deleted, with everything it stored"),
            Reason::DeletedWithoutItsMachine(MachineGone::Away { after }) => write!(
                f,
                "deleted while its machine was away (offline for over {}); the machine \
                 removes it if it returns",
                go_duration(*after)
            ),
            Reason::DeletedWithoutItsMachine(MachineGone::Revoked) => {
                f.write_str("deleted; its machine was revoked and will never sync again")
            }
        }
    }
}

impl Reason {
    /// The text stored in a timeline.
    pub fn text(&self) -> String {
        clean_reason(&self.to_string())
    }
}

/// Durations the way the seeds print them (`10m0s`, `45s`, `300ms`).
fn go_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// The longest reason a timeline stores, in characters.
pub const MAX_REASON_CHARS: usize = 400;

/// Bounds and sanitises a reason: control characters become spaces, whitespace runs collapse,
/// anything that looks like a secret is cut to its public prefix, and the text is capped.
pub fn clean_reason(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_REASON_CHARS));
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        redact_into(word, &mut out);
    }
    if out.chars().count() > MAX_REASON_CHARS {
        out = out.chars().take(MAX_REASON_CHARS - 1).collect();
        out.push('…');
    }
    out
}

/// `text` with every secret shape Einsora issues cut to its public prefix (as in reasons), and
/// nothing else changed.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    redact_into(text, &mut out);
    out
}

/// Secret shapes Einsora issues: API tokens, inference keys, tickets, enrolment tokens. Only
/// their public prefix (the marker and four characters) may appear.
const SECRET_MARKERS: &[&str] = &["tsk_", "isk_", "tkt_", "enr_"];
const PUBLIC_SUFFIX_CHARS: usize = 4;

fn redact_into(word: &str, out: &mut String) {
    let mut rest = word;
    while let Some((at, marker)) = SECRET_MARKERS
        .iter()
        .filter_map(|m| rest.find(m).map(|at| (at, *m)))
        .min_by_key(|(at, _)| *at)
    {
        out.push_str(&rest[..at + marker.len()]);
        let after = &rest[at + marker.len()..];
        let secret_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(after.len());
        let shown: String = after[..secret_len]
            .chars()
            .take(PUBLIC_SUFFIX_CHARS)
            .collect();
        out.push_str(&shown);
        if secret_len > shown.len() && !after[secret_len..].starts_with('…') {
            out.push('…');
        }
        rest = &after[secret_len..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests;
