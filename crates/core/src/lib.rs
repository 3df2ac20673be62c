//! The Einsora domain, free of I/O: identifiers, workload kinds, the lifecycle state machine,
//! the reasons vocabulary of timelines, machines and the trust matrix, the driver table and the
//! catalog. Nothing here knows about gRPC, HTTP, SQL or Kubernetes.

pub mod accelerator;
pub mod agent;
pub mod attempt;
pub mod backend;
pub mod catalog;
pub mod driver;
pub mod ids;
pub mod kind;
pub mod lifecycle;
pub mod machine;
pub mod output;
pub mod reasons;
pub mod region;
pub mod role;
pub mod run_dirs;
pub mod sharing;
pub mod words;
pub mod workload;
