//! What a workload is.

use crate::words::word_enum;

word_enum! {
    /// The kinds of workload Einsora runs.
    pub enum WorkloadKind ("kind") {
        Vm = "vm",
        Notebook = "notebook",
        Endpoint = "endpoint",
    }
}
