//! The attacks of `tests/attacks.rs`, on each way of pinning a workload's socket: by the inode
//! held open (Linux), and by a hard link of the dialler's own (macOS's way, run here too).

#[cfg(target_os = "linux")]
mod proc_fd {
    use super::super::{SocketRefused, connect};
    include!("tests/attacks.rs");
}

mod linked {
    use super::super::{SocketRefused, connect_linked as connect};
    include!("tests/attacks.rs");
}
