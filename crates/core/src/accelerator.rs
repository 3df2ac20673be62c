//! Accelerator kinds a compute class asks for.

use crate::words::word_enum;

word_enum! {
    /// The accelerator behind a compute class; `cpu` means none.
    pub enum AcceleratorKind ("accelerator") {
        Nvidia = "nvidia",
        Apple = "apple",
        Amd = "amd",
        Cpu = "cpu",
    }
}
