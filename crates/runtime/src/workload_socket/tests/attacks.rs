// A workload's run directory as an attacker leaves it: every name the host might dial replaced
// by something else. A canary socket counts the connections it is handed: it must see none.
// Included once per way of pinning a socket (`../tests.rs`), with its `connect` in scope.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;


/// A listening socket that counts what it accepts.
struct Counted {
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Counted {
    fn listen(path: &Path) -> Counted {
        let listener = UnixListener::bind(path).expect("bind");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Counted { accepted, task }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `<root>/run/<workload>/` with the workload's own server on `jl.sock`, and a canary socket
/// outside it standing for the engine's or a sibling's.
struct Layout {
    dir: tempfile::TempDir,
    own: Counted,
    canary: Counted,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run").join("w1");
        std::fs::create_dir_all(&run).expect("run dir");
        std::fs::create_dir_all(dir.path().join("run").join("w2")).expect("sibling dir");
        let own = Counted::listen(&run.join("jl.sock"));
        let canary = Counted::listen(&dir.path().join("run").join("w2").join("jl.sock"));
        Layout { dir, own, canary }
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run").join("w1")
    }

    fn socket(&self) -> PathBuf {
        self.run_dir().join("jl.sock")
    }

    fn canary_path(&self) -> PathBuf {
        self.dir.path().join("run").join("w2").join("jl.sock")
    }

    /// Moves the workload's own socket aside (still listening) so its name can be replaced.
    fn set_aside(&self) -> PathBuf {
        let aside = self.run_dir().join("aside.sock");
        std::fs::rename(self.socket(), &aside).expect("rename");
        aside
    }
}

async fn refusal(path: &Path) -> SocketRefused {
    match connect(path).await {
        Ok(_) => panic!("{} was dialled", path.display()),
        Err(e) => e,
    }
}

#[tokio::test]
async fn the_workloads_own_socket_is_connected() {
    let l = Layout::new();
    connect(&l.socket()).await.expect("its own socket");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(l.own.accepted(), 1);
    assert_eq!(l.canary.accepted(), 0);
}

#[tokio::test]
async fn a_symlink_to_a_siblings_socket_is_refused_and_dials_nothing() {
    let l = Layout::new();
    l.set_aside();
    std::os::unix::fs::symlink("../w2/jl.sock", l.socket()).expect("symlink");
    let e = refusal(&l.socket()).await;
    assert!(matches!(e, SocketRefused::NotASocket), "{e}");
    assert!(e.is_tampering());
    std::fs::remove_file(l.socket()).expect("unlink");
    std::os::unix::fs::symlink(l.canary_path(), l.socket()).expect("absolute symlink");
    assert!(refusal(&l.socket()).await.is_tampering());
    assert_eq!(l.canary.accepted(), 0, "the canary was dialled");
}

#[tokio::test]
async fn a_hard_link_fifo_file_or_directory_in_place_of_the_socket_is_refused() {
    let l = Layout::new();
    let aside = l.set_aside();
    std::fs::hard_link(&aside, l.socket()).expect("hard link");
    assert!(matches!(
        refusal(&l.socket()).await,
        SocketRefused::HardLinked
    ));
    std::fs::remove_file(l.socket()).expect("unlink");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        l.socket(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("fifo");
    assert!(matches!(
        refusal(&l.socket()).await,
        SocketRefused::NotASocket
    ));
    std::fs::remove_file(l.socket()).expect("unlink");
    std::fs::write(l.socket(), b"x").expect("file");
    assert!(matches!(
        refusal(&l.socket()).await,
        SocketRefused::NotASocket
    ));
    std::fs::remove_file(l.socket()).expect("unlink");
    std::fs::create_dir(l.socket()).expect("dir");
    assert!(matches!(
        refusal(&l.socket()).await,
        SocketRefused::NotASocket
    ));
    assert_eq!(l.own.accepted(), 0, "the hard-linked socket was dialled");
    assert_eq!(l.canary.accepted(), 0);
}

#[tokio::test]
async fn a_run_directory_replaced_by_a_link_is_refused() {
    let l = Layout::new();
    let moved = l.dir.path().join("run").join("w1-real");
    std::fs::rename(l.run_dir(), &moved).expect("move run dir");
    std::os::unix::fs::symlink("w2", l.run_dir()).expect("symlink run dir");
    assert!(refusal(&l.socket()).await.is_tampering());
    assert_eq!(l.canary.accepted(), 0);
}

#[tokio::test]
async fn paths_that_are_not_root_run_dir_name_are_refused() {
    let l = Layout::new();
    for bad in [
        PathBuf::from("run/w1/jl.sock"),
        l.dir.path().join("run/w2/../w1/jl.sock"),
        PathBuf::from("/jl.sock"),
    ] {
        assert!(
            matches!(refusal(&bad).await, SocketRefused::BadPath),
            "{}",
            bad.display()
        );
    }
    assert!(matches!(
        refusal(&l.run_dir().join("missing.sock")).await,
        SocketRefused::Absent
    ));
}

/// The socket's file is given to the run directory's owner, but another uid listens on it:
/// the peer's credentials give it away. Needs root, as CI is, to change owners.
#[tokio::test]
async fn a_socket_whose_listener_is_another_uid_is_refused() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: changing owners needs root");
        return;
    }
    let l = Layout::new();
    let someone = Some(rustix::fs::Uid::from_raw(61_999));
    let group = Some(rustix::fs::Gid::from_raw(61_999));
    rustix::fs::chown(l.run_dir(), someone, group).expect("chown dir");
    // The name and the inode are the owner's, but the listener (this test, root) isn't.
    rustix::fs::chown(l.socket(), someone, group).expect("chown socket");
    let e = refusal(&l.socket()).await;
    assert!(
        matches!(
            e,
            SocketRefused::WrongOwner {
                expected: 61_999,
                found: 0
            }
        ),
        "{e}"
    );
    // And a socket left as another uid's in the owner's directory: refused before dialling.
    rustix::fs::chown(l.socket(), Some(rustix::fs::Uid::ROOT), None).expect("chown back");
    assert!(matches!(
        refusal(&l.socket()).await,
        SocketRefused::WrongOwner { .. }
    ));
}

/// A thread flips the name between the real socket and a symlink to the canary as fast as it
/// can while the host dials over and over: every connection lands on the workload's own
/// server or is refused; the canary sees none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_flipped_thousands_of_times_a_second_never_reaches_the_canary() {
    let l = Layout::new();
    let aside = l.set_aside();
    let (socket, canary) = (l.socket(), l.canary_path());
    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicUsize::new(0));
    let flipper = {
        let (stop, flips) = (Arc::clone(&stop), Arc::clone(&flips));
        let tmp = l.run_dir().join("flip.tmp");
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // The real socket under the name, then a link to the canary in its place.
                let _ = std::fs::rename(&aside, &socket);
                let _ = std::fs::rename(&socket, &aside);
                let _ = std::os::unix::fs::symlink(&canary, &tmp);
                let _ = std::fs::rename(&tmp, &socket);
                let _ = std::fs::remove_file(&socket);
                flips.fetch_add(2, Ordering::Relaxed);
            }
        })
    };
    let started = Instant::now();
    let (mut connected, mut refused) = (0, 0);
    while started.elapsed() < Duration::from_secs(2) {
        match connect(&l.socket()).await {
            Ok(_) => connected += 1,
            Err(_) => refused += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().expect("flipper");
    let rate = flips.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    assert!(rate > 1000.0, "only {rate:.0} flips a second");
    assert!(refused > 0, "no dial saw the flip: {connected} connected");
    assert_eq!(l.canary.accepted(), 0, "the canary was dialled");
    assert_eq!(l.own.accepted(), connected, "a connection went elsewhere");
}
