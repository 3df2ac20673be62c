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

/// What only the hard-link way has: its pins' directory, shared by every dialler of a root.
mod pins {
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use tokio::net::UnixListener;

    use super::super::linked::PINS;
    use super::super::{SocketRefused, connect_linked};

    fn serve(path: &Path) -> UnixListener {
        UnixListener::bind(path).expect("bind")
    }

    /// The agent's probe and the proxy dial the same socket at once: every dial connects, none
    /// reads another's pin as a hard link, and no pin is left.
    #[tokio::test]
    async fn concurrent_dials_take_turns_and_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("w1");
        std::fs::create_dir(&run).unwrap();
        let _listener = serve(&run.join("jl.sock"));
        let mut dials = tokio::task::JoinSet::new();
        for _ in 0..32 {
            let socket = run.join("jl.sock");
            dials.spawn(async move { connect_linked(&socket).await.map(drop) });
        }
        while let Some(dialled) = dials.join_next().await {
            dialled.unwrap().expect("each dial connects");
        }
        let left: Vec<_> = std::fs::read_dir(dir.path().join(PINS)).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// A pin left by a dialler killed midway is removed by the next, which connects.
    #[tokio::test]
    async fn a_pin_left_behind_is_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("w1");
        std::fs::create_dir(&run).unwrap();
        let _listener = serve(&run.join("jl.sock"));
        std::fs::create_dir(dir.path().join(PINS)).unwrap();
        std::fs::set_permissions(
            dir.path().join(PINS),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::hard_link(run.join("jl.sock"), dir.path().join(PINS).join("pin")).unwrap();
        connect_linked(&run.join("jl.sock")).await.expect("dialled");
        assert_eq!(std::fs::read_dir(dir.path().join(PINS)).unwrap().count(), 0);
    }

    /// Pins in a directory others can write, or a link in its place, would be theirs to swap:
    /// nothing is dialled.
    #[tokio::test]
    async fn a_pins_directory_others_can_write_or_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("w1");
        std::fs::create_dir(&run).unwrap();
        let _listener = serve(&run.join("jl.sock"));
        let pins = dir.path().join(PINS);
        std::fs::create_dir(&pins).unwrap();
        std::fs::set_permissions(&pins, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = connect_linked(&run.join("jl.sock")).await.unwrap_err();
        assert!(matches!(refused, SocketRefused::Io(_)), "{refused}");
        std::fs::remove_dir(&pins).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &pins).unwrap();
        let refused = connect_linked(&run.join("jl.sock")).await.unwrap_err();
        assert!(matches!(refused, SocketRefused::Io(_)), "{refused}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
